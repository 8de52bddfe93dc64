// device.cpp - runtime start-up (configuration from the environment), the
// device table, the per-thread current device, sticky errors and device-wide
// synchronisation.
//
// Not here: memory (memory.cpp) or streams (stream.cpp); this file only
// creates each device's memory mapping and default stream.
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime.h"

namespace openreg::rt {

namespace {

// LITERALINCLUDE START: OR_CONFIG_DEFAULTS
constexpr int kDefaultDeviceCount = 2;
constexpr size_t kDefaultDeviceMemory = size_t{4} << 30;  // 4 GiB, reserved lazily
constexpr int kMaxDeviceCount = 64;
constexpr size_t kDefaultTraceRecords = size_t{1} << 20;  // waiting to be drained
// LITERALINCLUDE END: OR_CONFIG_DEFAULTS

thread_local int threadDevice = 0;
std::atomic<bool> forkedChild{false};
std::atomic<bool> initialised{false};

// Parses "512MiB", "4GiB", "1G", "1000000" (bytes), "2GB" (decimal).
bool parseSize(const char* text, size_t* out) {
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(text, &end);
  if (end == text || errno != 0 || !(value > 0)) return false;  // also rejects NaN
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::pair<const char*, double> units[] = {
      {"", 1},          {"b", 1},          {"k", 1024.0},     {"kib", 1024.0},
      {"kb", 1e3},      {"m", 1048576.0},  {"mib", 1048576.0}, {"mb", 1e6},
      {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9},
      {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12}};
  for (auto& [name, scale] : units) {
    if (unit == name) {
      // Converting a double that does not fit (or inf) to size_t is undefined.
      if (!(value * scale < 18446744073709551616.0)) return false;
      *out = static_cast<size_t>(value * scale);
      return *out > 0;
    }
  }
  return false;
}

// A switch such as OPENREG_LAUNCH_BLOCKING, as users of CUDA_LAUNCH_BLOCKING
// write it: "1", "true" or "yes" (any case, spaces trimmed) turn it on; "0",
// "false", "no" or nothing leave it off; anything else warns and leaves it off.
bool parseSwitch(const char* name, const char* text) {
  std::string value(text);
  auto blank = [](unsigned char c) { return std::isspace(c) != 0; };
  while (!value.empty() && blank(value.back())) value.pop_back();
  size_t first = 0;
  while (first < value.size() && blank(value[first])) ++first;
  value.erase(0, first);
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value == "1" || value == "true" || value == "yes") return true;
  if (value.empty() || value == "0" || value == "false" || value == "no") return false;
  std::fprintf(stderr, "openreg warning: %s=%s is not understood and leaves it off (set it to 1, true or yes to "
               "switch it on)\n", name, text);
  return false;
}

void onForkChild() {
  if (initialised.load()) forkedChild.store(true);
}

// The configuration from the environment, read once. Reading it touches no
// device, so counting devices never makes a forked child unusable.
struct Config {
  int count = kDefaultDeviceCount;
  size_t capacity = kDefaultDeviceMemory;
  bool launchBlocking = false;
  bool checkAliases = false;
  bool timingOnly = false;
  size_t traceRecords = kDefaultTraceRecords;
  orError_t error = orSuccess;
  std::string message;
};

Config readConfig() {
  Config config;
  // LITERALINCLUDE START: OR_ENV_CONFIG
  if (const char* text = std::getenv("OPENREG_DEVICE_COUNT")) {
    char* end = nullptr;
    long parsed = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || parsed < 1 || parsed > kMaxDeviceCount) {
      config.error = orErrorInitializationError;
      config.message = format("OPENREG_DEVICE_COUNT=%s is not a whole number from 1 to %d",
                              text, kMaxDeviceCount);
      return config;
    }
    config.count = static_cast<int>(parsed);
  }
  if (const char* text = std::getenv("OPENREG_DEVICE_MEMORY")) {
    if (!parseSize(text, &config.capacity)) {
      config.error = orErrorInitializationError;
      config.message = format("OPENREG_DEVICE_MEMORY=%s is not a size such as 512MiB or 4GiB",
                              text);
      return config;
    }
  }
  size_t page = platformPageSize();
  config.capacity = (config.capacity + page - 1) / page * page;
  if (const char* text = std::getenv("OPENREG_LAUNCH_BLOCKING")) {
    config.launchBlocking = parseSwitch("OPENREG_LAUNCH_BLOCKING", text);
  }
  if (const char* text = std::getenv("OPENREG_CHECK_ALIASES")) {
    config.checkAliases = parseSwitch("OPENREG_CHECK_ALIASES", text);
  }
  if (const char* text = std::getenv("OPENREG_TIMING_ONLY")) {
    config.timingOnly = parseSwitch("OPENREG_TIMING_ONLY", text);
  }
  if (const char* text = std::getenv("OPENREG_TRACE_RECORDS")) {
    char* end = nullptr;
    long long parsed = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || parsed < 1) {
      config.error = orErrorInitializationError;
      config.message = format("OPENREG_TRACE_RECORDS=%s is not a whole number of records of at least 1", text);
      return config;
    }
    config.traceRecords = static_cast<size_t>(parsed);
  }
  // LITERALINCLUDE END: OR_ENV_CONFIG
  return config;
}

const Config& config() {
  static const Config* parsed = new Config(readConfig());
  return *parsed;
}

Runtime* start() {
  auto* rt = new Runtime();  // never destroyed: workers may outlive main()
  const Config& cfg = config();
  if (cfg.error != orSuccess) {
    rt->initError = cfg.error;
    rt->initMessage = cfg.message;
    return rt;
  }
  rt->launchBlocking = cfg.launchBlocking;
  rt->checkAliases = cfg.checkAliases;
  rt->timingOnly.store(cfg.timingOnly);
  rt->traceRecords = cfg.traceRecords;
  std::vector<DeviceMapping> mappings;
  for (int index = 0; index < cfg.count; ++index) {
    DeviceMapping mapping;
    std::string error;
    if (!platformMapDevice(index, cfg.capacity, &mapping, &error)) {
      rt->initError = orErrorInitializationError;
      rt->initMessage = format("cannot create openreg device memory: %s; lower "
                               "OPENREG_DEVICE_MEMORY (each of the %d devices reserves %zu bytes "
                               "of address space; a limit such as ulimit -v may be lower)",
                               error.c_str(), cfg.count, cfg.capacity);
      rt->devices.clear();
      return rt;
    }
    mappings.push_back(mapping);
    rt->devices.push_back(std::make_unique<Device>(index, mapping));
  }
  // Default streams take ids 1..count, in device order (orStreamGetId).
  for (auto& device : rt->devices) device->defaultStream = createStream(*device, 0);
  platformInstallFaultHandler(mappings);
  platformOnFork(onForkChild);
  initialised.store(true);
  return rt;
}

}  // namespace

Runtime& runtime() {
  static Runtime* rt = start();
  return *rt;
}

orError_t ensureInit() {
  Runtime& rt = runtime();
  if (rt.initError != orSuccess) return fail(rt.initError, rt.initMessage);
  if (forkedChild.load()) {
    // The same words as CUDA's, so users and tools recognise the situation.
    return fail(orErrorInitializationError,
                "Cannot re-initialize OpenReg in forked subprocess. To use OpenReg with "
                "multiprocessing, you must use the 'spawn' start method (OpenReg was "
                "initialised in the parent, and its worker threads do not survive fork)");
  }
  return orSuccess;
}

orError_t checkDevice(int index) {
  int count = static_cast<int>(runtime().devices.size());
  if (index >= 0 && index < count) return orSuccess;
  return fail(orErrorInvalidDevice,
              format("invalid openreg device index %d: there are %d devices (0 to %d); "
                     "set OPENREG_DEVICE_COUNT for more", index, count, count - 1));
}

int currentDevice() { return threadDevice; }
void setCurrentDevice(int device) { threadDevice = device; }

void Device::setSticky(orError_t code, std::string message) {
  std::lock_guard<std::mutex> lock(stickyMutex_);
  if (stickyCode_.load() != orSuccess) return;  // the first failure wins
  stickyMessage_ = std::move(message);
  stickyCode_.store(code);
}

orError_t Device::checkSticky() const {
  orError_t code = sticky();
  if (code == orSuccess) return orSuccess;
  std::lock_guard<std::mutex> lock(stickyMutex_);
  return fail(code, stickyMessage_ + " (sticky: call orDeviceReset to use the device again)");
}

std::string Device::stickyMessage() const {
  std::lock_guard<std::mutex> lock(stickyMutex_);
  return stickyMessage_;
}

void Device::clearSticky() {
  std::lock_guard<std::mutex> lock(stickyMutex_);
  stickyCode_.store(orSuccess);
  stickyMessage_.clear();
}

orError_t Device::synchronize() {
  std::vector<std::shared_ptr<Stream>> streams = streamsOf(index);
  for (auto& stream : streams) stream->synchronize();
  orError_t status = checkSticky();
  for (size_t i = 0; status == orSuccess && i < streams.size(); ++i) status = streams[i]->progress->check();
  return status;
}

}  // namespace openreg::rt

using namespace openreg::rt;

extern "C" {

orError_t orGetDeviceCount(int* count) {
  // Reads only the configuration: counting devices initialises nothing, so
  // it works in a forked child too (as CUDA's device count does).
  const Config& cfg = config();
  if (cfg.error != orSuccess) return fail(cfg.error, cfg.message);
  if (count == nullptr) return fail(orErrorInvalidValue, "orGetDeviceCount: count is NULL");
  *count = cfg.count;
  return orSuccess;
}

orError_t orSetDevice(int device) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if ((status = checkDevice(device)) != orSuccess) return status;
  setCurrentDevice(device);
  return orSuccess;
}

orError_t orGetDevice(int* device) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (device == nullptr) return fail(orErrorInvalidValue, "orGetDevice: device is NULL");
  *device = currentDevice();
  return orSuccess;
}

orError_t orGetDeviceProperties(orDeviceProp* prop, int device) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (prop == nullptr) return fail(orErrorInvalidValue, "orGetDeviceProperties: prop is NULL");
  if ((status = checkDevice(device)) != orSuccess) return status;
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "OpenReg Simulated Device");
  prop->totalGlobalMem = runtime().devices[device]->memory.capacity();
  prop->major = 1;
  prop->minor = 0;
  unsigned cores = std::thread::hardware_concurrency();
  prop->multiProcessorCount = cores == 0 ? 1 : static_cast<int>(cores);
  return orSuccess;
}

orError_t orDeviceSynchronize(void) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  Device& device = *runtime().devices[currentDevice()];
  if (waitsForRunningKernel(device.index)) return refuseWaitForRunningKernel("orDeviceSynchronize");
  if ((status = refuseUnsafeCall(device.index, "orDeviceSynchronize")) != orSuccess) return status;
  uint64_t start = tracing() ? nowNs() : 0;
  status = device.synchronize();
  if (start != 0) {
    traceRecord(orActivityKindSynchronize, "orDeviceSynchronize", device.index, 0, start,
                nowNs(), 0);
  }
  return status;
}

orError_t orDeviceReset(void) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  Device& device = *runtime().devices[currentDevice()];
  if (waitsForRunningKernel(device.index)) return refuseWaitForRunningKernel("orDeviceReset");
  device.synchronize();  // queued work is skipped while the error stands
  orGetLastError();      // which this call clears
  device.clearSticky();
  for (auto& stream : streamsOf(device.index)) stream->progress->clearFailure();
  return orSuccess;
}

orError_t orSetTimingOnly(int timingOnly) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (runningStream() != nullptr) return refuseWaitForRunningKernel("orSetTimingOnly");  // waits for every device
  // Work queued so far runs in the mode it was queued in (Note [Timing-only mode]).
  for (auto& device : runtime().devices) {
    device->synchronize();
    orGetLastError();  // a failure is for whoever waits for that work, not this call
  }
  runtime().timingOnly.store(timingOnly != 0);
  return orSuccess;
}

orError_t orGetTimingOnly(int* timingOnly) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (timingOnly == nullptr) return fail(orErrorInvalidValue, "orGetTimingOnly: timingOnly is NULL");
  *timingOnly = runtime().timingOnly.load() ? 1 : 0;
  return orSuccess;
}

orError_t orDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  if (leastPriority != nullptr) *leastPriority = 0;
  if (greatestPriority != nullptr) *greatestPriority = -1;
  return orSuccess;
}

orError_t orDeviceGetDefaultStream(orStream_t* stream, int device) {
  orError_t status = ensureInit();
  if (status != orSuccess) return status;
  if (stream == nullptr) return fail(orErrorInvalidValue, "orDeviceGetDefaultStream: stream is NULL");
  if ((status = checkDevice(device)) != orSuccess) return status;
  *stream = toHandle(runtime().devices[device]->defaultStream->id);
  return orSuccess;
}

}  // extern "C"
