// Profiler.cpp - the Kineto activity profiler for PrivateUse1: turns
// libopenreg's activity records (orTraceDrain) into Kineto device activities,
// one lane per device stream, linked to the operators that launched them.
// Not here: the legacy profiler's event stubs (ProfilerStubs.cpp), or the
// memory view (DeviceAllocator.cpp reports allocations to the profiler).
#include <openreg/openreg.h>

#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <time_since_epoch.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiler/ActivityDrain.h"
#include "profiler/Profiler.h"

namespace torch_openreg {
namespace {

using libkineto::ActivityType;

const std::set<ActivityType> kOpenRegActivities = {
    ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::GPU_MEMSET,
    ActivityType::GPU_USER_ANNOTATION, ActivityType::CUDA_SYNC};

// The runtime's trace clock is monotonic; Kineto's (PyTorch's) is the wall
// clock in ns since the epoch. One offset, read when the session starts.
int64_t wallClockOffsetNs() {
  uint64_t runtimeNs = 0;
  orTraceGetTimestamp(&runtimeNs);
  int64_t wallNs = libkineto::timeSinceEpoch(std::chrono::system_clock::now());
  return wallNs - static_cast<int64_t>(runtimeNs);
}

// The record_function ranges (user correlation ids) open on this thread.
thread_local std::vector<uint64_t> openUserRanges;
// Correlation ids a session pushed on this thread and has not popped.
thread_local int idsPushed = 0;

std::mutex lastSessionMutex;
std::vector<orActivity> lastSession;  // lastSessionRecords()

// LITERALINCLUDE START: PROFILER_SESSION
// Note [How runtime activity becomes Kineto activity]
// PyTorch pushes a correlation id around every operator it records; the
// session forwards it to libopenreg (orTracePushExternalCorrelationId), so
// each Launch record names the operator that queued the work. The device
// record of that work (kernel, copy, memset, event record, stream wait)
// shares the Launch record's runtime correlation id, so the two joins give:
// device record -> launch -> operator. Each device record becomes a Kineto
// activity on pid = device, tid = stream id, linked to the operator's CPU
// activity, which is what gives key_averages() its device time and the
// trace its lanes.
class OpenRegProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit OpenRegProfilerSession(const std::set<ActivityType>& requested) : requested_(requested) {}

  void start() override {
    offsetNs_ = wallClockOffsetNs();
    std::string busy = drain_.start();
    collecting_ = busy.empty();
    if (!collecting_) {  // Note [One consumer of the runtime's records]: leave the other's alone
      std::string message = "openreg profiler: no openreg device activity in this profile: " + busy;
      errors_.push_back(message);
      TORCH_WARN(message);
    }
    status_ = libkineto::TraceStatus::RECORDING;
  }

  // The drain waits for every device first (PyTorch synchronises only the
  // current one), so that every record of the profiled work is there.
  void stop() override {
    status_ = libkineto::TraceStatus::PROCESSING;
    if (!collecting_) return;
    records_ = drain_.stop();
    if (!drain_.droppedMessage().empty()) {  // as Kineto reports records CUPTI dropped
      errors_.push_back(drain_.droppedMessage());
      TORCH_WARN(drain_.droppedMessage());
    }
    for (const orActivity& record : records_) {
      if (record.kind != orActivityKindLaunch) streamsSeen_.insert({record.device, record.stream});
    }
    std::lock_guard<std::mutex> lock(lastSessionMutex);
    lastSession = records_;
  }

  // Only while collecting, and each pop only for a push of ours: an
  // operator may straddle start() or another consumer's recording.
  void pushCorrelationId(uint64_t id) override {
    if (!collecting_) return;
    orTracePushExternalCorrelationId(id);
    ++idsPushed;
    if (openUserRanges.empty()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    userRangesOfOperator_[id] = openUserRanges;
  }
  void popCorrelationId() override {
    if (idsPushed == 0) return;
    --idsPushed;
    orTracePopExternalCorrelationId(nullptr);
  }
  void pushUserCorrelationId(uint64_t id) override { openUserRanges.push_back(id); }
  void popUserCorrelationId() override {
    if (!openUserRanges.empty()) openUserRanges.pop_back();
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  // Kineto starts the session at the warm-up steps of a schedule and passes
  // the active window here: work queued outside it is left out.
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linkedOperator,
                    int64_t windowStart, int64_t windowEnd) override {
    std::unordered_map<uint64_t, const orActivity*> launchOf;  // by runtime correlation id
    for (const orActivity& record : records_) {
      if (record.kind == orActivityKindLaunch) launchOf[record.correlationId] = &record;
    }
    auto inWindow = [&](uint64_t hostNs) {
      int64_t t = static_cast<int64_t>(hostNs) + offsetNs_;
      return (windowStart == 0 || t >= windowStart) && (windowEnd == 0 || t <= windowEnd);
    };
    for (const orActivity& record : records_) {
      if (record.kind == orActivityKindLaunch) continue;
      auto found = launchOf.find(record.correlationId);
      const orActivity* launch = found == launchOf.end() ? nullptr : found->second;
      if (record.kind != orActivityKindSynchronize && launch == nullptr) continue;  // queued before tracing
      if (!inWindow(launch != nullptr ? launch->startNs : record.startNs)) continue;
      uint64_t op = launch != nullptr ? launch->externalCorrelationId : 0;
      auto* activity = addActivity(record, op, linkedOperator);
      if (activity != nullptr) extendUserRanges(op, *activity);
    }
    addUserAnnotations(linkedOperator);
    for (auto& activity : buffer_.activities) logger.handleGenericActivity(*activity);
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> lanes;
    for (const auto& lane : streamsSeen_) {
      std::string name = lane.second == 0 ? "openreg device (host waits)" : "openreg stream " + std::to_string(lane.second);
      lanes.push_back({static_cast<int64_t>(lane.second), static_cast<int64_t>(lane.second), lane.first, name});
    }
    return lanes;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::make_unique<libkineto::CpuTraceBuffer>(std::move(buffer_));
  }

  std::vector<std::string> errors() override { return errors_; }

 private:
  // Event records and stream waits take Kineto's synchronisation type, as
  // CUPTI's "Stream Wait Event" records do on CUDA; so do the host's waits.
  static ActivityType typeOf(orActivityKind kind) {
    switch (kind) {
      case orActivityKindKernel: return ActivityType::CONCURRENT_KERNEL;
      case orActivityKindMemcpy: return ActivityType::GPU_MEMCPY;
      case orActivityKindMemset: return ActivityType::GPU_MEMSET;
      default: return ActivityType::CUDA_SYNC;
    }
  }

  // PyTorch asks a PrivateUse1 profiler for kernels, copies, memsets and
  // annotations, never for CUDA_SYNC (enable_cuda_sync_events is CUDA's
  // switch). A stream's event records and waits order its kernels, and the
  // host's waits order what it launches next, so they come with them: the
  // lanes show why a kernel started late (and openreg-perf replays them).
  bool wanted(const orActivity& record) const {
    bool ordersKernels = record.kind == orActivityKindEventRecord || record.kind == orActivityKindStreamWait ||
                         record.kind == orActivityKindSynchronize;
    return requested_.count(typeOf(record.kind)) != 0 ||
           (ordersKernels && requested_.count(ActivityType::CONCURRENT_KERNEL) != 0);
  }

  libkineto::GenericTraceActivity* addActivity(const orActivity& record, uint64_t op,
                                               const libkineto::getLinkedActivityCallback& linkedOperator) {
    if (!wanted(record)) return nullptr;
    ActivityType type = typeOf(record.kind);
    buffer_.emplace_activity(buffer_.span, type, std::string(record.name));
    auto& activity = *buffer_.activities.back();
    activity.startTime = static_cast<int64_t>(record.startNs) + offsetNs_;
    activity.endTime = std::max(activity.startTime, static_cast<int64_t>(record.endNs) + offsetNs_);
    activity.id = static_cast<int32_t>(record.correlationId);
    activity.device = record.device;
    activity.resource = static_cast<int32_t>(record.stream);
    activity.threadId = static_cast<int32_t>(record.stream);
    activity.linked = op == 0 ? nullptr : linkedOperator(static_cast<int32_t>(op));
    activity.addMetadataQuoted("stream", std::to_string(record.stream));
    activity.addMetadataQuoted("device", std::to_string(record.device));
    activity.addMetadataQuoted("correlation", std::to_string(record.correlationId));
    // A wait names the event record it waits for (its correlation).
    if (record.waitedForCorrelationId != 0) {
      activity.addMetadataQuoted("waits for", std::to_string(record.waitedForCorrelationId));
    }
    return &activity;
  }
  // LITERALINCLUDE END: PROFILER_SESSION

  // Note [record_function on the device timeline]: a record_function range
  // gets a device-side span (gpu_user_annotation, as CUDA's have) from the
  // first start to the last end of the device work its operators queued.
  struct Span {
    int64_t start = INT64_MAX, end = 0;
    int device = 0;
    uint64_t stream = 0;
  };

  void extendUserRanges(uint64_t op, const libkineto::GenericTraceActivity& work) {
    auto ranges = userRangesOfOperator_.find(op);
    if (op == 0 || ranges == userRangesOfOperator_.end()) return;
    for (uint64_t range : ranges->second) {
      Span& span = userSpans_[range];
      if (work.startTime < span.start) {
        span.device = work.device;
        span.stream = static_cast<uint64_t>(work.resource);
      }
      span.start = std::min(span.start, work.startTime);
      span.end = std::max(span.end, work.endTime);
    }
  }

  void addUserAnnotations(const libkineto::getLinkedActivityCallback& linkedOperator) {
    if (requested_.count(ActivityType::GPU_USER_ANNOTATION) == 0) return;
    for (const auto& [range, span] : userSpans_) {
      const libkineto::ITraceActivity* cpuRange = linkedOperator(static_cast<int32_t>(range));
      if (cpuRange == nullptr) continue;  // a range the profiler did not keep
      buffer_.emplace_activity(buffer_.span, ActivityType::GPU_USER_ANNOTATION, cpuRange->name());
      auto& activity = *buffer_.activities.back();
      activity.startTime = span.start;
      activity.endTime = span.end;
      activity.id = static_cast<int32_t>(range);
      activity.device = span.device;
      activity.resource = static_cast<int32_t>(span.stream);
      activity.linked = cpuRange;
    }
  }

  const std::set<ActivityType> requested_;
  int64_t offsetNs_ = 0;
  std::atomic<bool> collecting_{false};  // false: another consumer holds the runtime's records
  ActivityDrain drain_{"openreg profiler", "the trace and key_averages()"};
  std::vector<orActivity> records_;
  std::set<std::pair<int, uint64_t>> streamsSeen_;  // (device, stream)
  std::mutex mutex_;  // userRangesOfOperator_ is filled by every profiled thread
  std::unordered_map<uint64_t, std::vector<uint64_t>> userRangesOfOperator_;
  std::map<uint64_t, Span> userSpans_;
  libkineto::CpuTraceBuffer buffer_;
  std::vector<std::string> errors_;
};

// LITERALINCLUDE START: PROFILER_REGISTRATION
class OpenRegActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return kOpenRegActivities; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& activities,
                                                                 const libkineto::Config& /*config*/) override {
    return std::make_unique<OpenRegProfilerSession>(activities);
  }
  // The delayed start of on-demand tracing: Kineto calls start() and stop()
  // at the right times, so the session is the same.
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t /*ts_ms*/, int64_t /*duration_ms*/,
                                                                 const std::set<ActivityType>& activities,
                                                                 const libkineto::Config& config) override {
    return configure(activities, config);
  }

 private:
  const std::string name_ = "openreg";
};

REGISTER_PRIVATEUSE1_PROFILER(OpenRegActivityProfiler);
// LITERALINCLUDE END: PROFILER_REGISTRATION

}  // namespace

std::vector<orActivity> lastSessionRecords() {
  std::lock_guard<std::mutex> lock(lastSessionMutex);
  return lastSession;
}

}  // namespace torch_openreg
