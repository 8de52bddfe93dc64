// ActivityDrain.cpp - see ActivityDrain.h and Note [One consumer of the
// runtime's records].
#include "profiler/ActivityDrain.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace torch_openreg {
namespace {

// How often a drain moves the runtime's records into its own buffer: the
// runtime keeps OPENREG_TRACE_RECORDS waiting (2^20 by default;
// orTraceGetDroppedCount counts the rest), which a program launching a
// million operations a second would fill in half a second.
constexpr auto kDrainInterval = std::chrono::milliseconds(20);
constexpr size_t kBatch = 256;

std::atomic<bool> drainingPaused{false};
std::atomic<bool> recordsDiscarded{false};

std::mutex holderMutex;
std::string holder;  // the consumer whose drain holds the records, or empty

void waitForEveryDevice() {
  int current = 0, count = 0;
  orGetDevice(&current);
  orGetDeviceCount(&count);
  for (int device = 0; device < count; ++device) {
    // A failure (a sticky kernel error, a capture under way) is left for
    // the program's next synchronising call to report; the records then
    // hold what had finished.
    if (orSetDevice(device) != orSuccess || orDeviceSynchronize() != orSuccess) orGetLastError();
  }
  orSetDevice(current);
}

void discardOlderRecords() {
  orActivity scratch[kBatch];
  size_t count = 0;
  do {
    orTraceDrain(scratch, kBatch, &count);
  } while (count == kBatch);
}

}  // namespace

ActivityDrain::ActivityDrain(std::string consumer, std::string missed)
    : consumer_(std::move(consumer)), missed_(std::move(missed)) {}

ActivityDrain::~ActivityDrain() {
  if (claimed_) stop();
}

std::string ActivityDrain::start() {
  {
    std::lock_guard<std::mutex> lock(holderMutex);
    if (!holder.empty()) {
      return c10::str(holder, " is collecting the openreg runtime's activity records, which go to one consumer "
                      "at a time; stop it first");
    }
    holder = consumer_;
  }
  claimed_ = true;
  discardOlderRecords();
  orTraceEnable(1);
  stopping_ = false;
  drainer_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(drainMutex_);
    while (!drainStop_.wait_for(lock, kDrainInterval, [this] { return stopping_; })) {
      if (!drainingPaused.load()) drain();
    }
  });
  return {};
}

std::vector<orActivity> ActivityDrain::stop() {
  if (!claimed_) return {};
  waitForEveryDevice();
  orTraceEnable(0);
  {
    std::lock_guard<std::mutex> lock(drainMutex_);
    stopping_ = true;
  }
  drainStop_.notify_one();
  drainer_.join();
  drain();
  uint64_t dropped = 0;
  if (orTraceGetDroppedCount(&dropped) == orSuccess && dropped != 0) {
    droppedMessage_ = c10::str(consumer_, ": the runtime dropped ", dropped,
                               " device activity records (its buffer was full); ", missed_, " miss that device work");
  }
  {
    std::lock_guard<std::mutex> lock(holderMutex);
    holder.clear();
  }
  claimed_ = false;
  if (recordsDiscarded.load()) records_.clear();
  return std::move(records_);
}

// The drainer thread while recording, then stop(): never both at once.
void ActivityDrain::drain() {
  orActivity batch[kBatch];
  size_t count = 0;
  do {
    orTraceDrain(batch, kBatch, &count);
    records_.insert(records_.end(), batch, batch + count);
  } while (count == kBatch);
}

void pauseDrainingForTesting(bool paused) { drainingPaused.store(paused); }

void discardRecordsForTesting(bool discarded) { recordsDiscarded.store(discarded); }

}  // namespace torch_openreg
