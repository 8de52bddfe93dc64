// trace.cpp - activity records for profilers: what ran where, and when.
//
// Recording is off by default and costs one relaxed atomic load per launch
// then. Records wait in a bounded buffer until a consumer drains them; those
// that find it full are counted (orTraceGetDroppedCount), never lost silently.
#include <chrono>
#include <cstring>

#include "runtime.h"

namespace openreg::rt {
namespace {

std::atomic<bool> enabled{false};
std::atomic<uint64_t> correlation{0};
// The host (at each launch) and a stream's worker (at each op it runs) record
// at once: with a std::mutex they met in futex calls, which cost a traced
// training step more than writing its records did.
QueueLock recordsLock;
std::deque<orActivity> records;
uint64_t dropped = 0;  // records not kept since tracing was last switched on
thread_local std::vector<uint64_t> externalIds;

}  // namespace

uint64_t currentExternalCorrelationId() { return externalIds.empty() ? 0 : externalIds.back(); }

uint64_t nowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

bool tracing() { return enabled.load(std::memory_order_relaxed); }

uint64_t nextCorrelationId() { return correlation.fetch_add(1) + 1; }

void traceRecord(orActivityKind kind, const std::string& name, int device,
                 uint64_t stream, uint64_t startNs, uint64_t endNs,
                 uint64_t correlationId, uint64_t externalCorrelationId,
                 uint64_t waitedForCorrelationId) {
  orActivity record;
  std::memset(&record, 0, sizeof(record));
  record.kind = kind;
  std::strncpy(record.name, name.c_str(), sizeof(record.name) - 1);
  record.device = device;
  record.stream = stream;
  record.startNs = startNs;
  record.endNs = endNs;
  record.correlationId = correlationId;
  record.externalCorrelationId = externalCorrelationId;
  record.waitedForCorrelationId = waitedForCorrelationId;
  size_t capacity = runtime().traceRecords;  // read before the lock: keep what it guards short
  std::lock_guard<QueueLock> lock(recordsLock);
  if (records.size() < capacity) {
    records.push_back(record);
  } else {
    ++dropped;  // orTraceGetDroppedCount tells the consumer
  }
}

LaunchTrace beginLaunchTrace(Op& op) {
  LaunchTrace launch;
  if (!tracing()) return launch;
  launch.startNs = nowNs();
  launch.correlationId = op.correlationId = nextCorrelationId();
  launch.name = op.name;
  return launch;
}

void endLaunchTrace(const LaunchTrace& launch, const Stream& stream) {
  if (launch.startNs == 0) return;
  traceRecord(orActivityKindLaunch, launch.name, stream.device.index, stream.id, launch.startNs, nowNs(),
              launch.correlationId, currentExternalCorrelationId());
}

}  // namespace openreg::rt

using namespace openreg::rt;

extern "C" {

orError_t orTraceEnable(int enable) {
  std::lock_guard<QueueLock> lock(recordsLock);
  if (enable != 0 && !enabled.load()) dropped = 0;
  enabled.store(enable != 0);
  return orSuccess;
}

orError_t orTraceGetDroppedCount(uint64_t* count) {
  if (count == nullptr) return fail(orErrorInvalidValue, "orTraceGetDroppedCount: count is NULL");
  std::lock_guard<QueueLock> lock(recordsLock);
  *count = dropped;
  return orSuccess;
}

orError_t orTraceDrain(orActivity* out, size_t capacity, size_t* count) {
  if (count == nullptr || (out == nullptr && capacity > 0)) {
    return fail(orErrorInvalidValue, "orTraceDrain: count is NULL, or records is NULL with capacity > 0");
  }
  std::lock_guard<QueueLock> lock(recordsLock);
  size_t n = std::min(capacity, records.size());
  std::copy(records.begin(), records.begin() + static_cast<long>(n), out);
  records.erase(records.begin(), records.begin() + static_cast<long>(n));
  *count = n;
  return orSuccess;
}

orError_t orTraceGetTimestamp(uint64_t* ns) {
  if (ns == nullptr) return fail(orErrorInvalidValue, "orTraceGetTimestamp: ns is NULL");
  *ns = nowNs();
  return orSuccess;
}

orError_t orTracePushExternalCorrelationId(uint64_t id) {
  externalIds.push_back(id);
  return orSuccess;
}

orError_t orTracePopExternalCorrelationId(uint64_t* id) {
  if (externalIds.empty()) {
    return fail(orErrorInvalidValue, "orTracePopExternalCorrelationId: this thread pushed no id");
  }
  if (id != nullptr) *id = externalIds.back();
  externalIds.pop_back();
  return orSuccess;
}

}  // extern "C"
