// ActivityDrain.h - collecting the runtime's activity records (orTraceDrain)
// for one consumer at a time: the Kineto profiler session (Profiler.cpp) or
// an activity recording (ActivityRecording.cpp). Not here: what either makes
// of the records.
#pragma once

#include <openreg/openreg.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace torch_openreg {

// Note [One consumer of the runtime's records]
// The runtime keeps one buffer of records for the whole process, and
// draining moves records out of it: two consumers draining at once would
// each get part of the other's. So a drain claims the runtime's records for
// its consumer between start() and stop(); a second one's start() fails and
// says who holds them.
class ActivityDrain {
 public:
  // consumer: who collects; missed: what lacks the records the runtime
  // dropped. Both for the messages.
  ActivityDrain(std::string consumer, std::string missed);
  ~ActivityDrain();
  ActivityDrain(const ActivityDrain&) = delete;
  ActivityDrain& operator=(const ActivityDrain&) = delete;

  // Claims the runtime's records, discards those taken before, switches
  // recording on and drains every 20 ms from a thread of its own. Returns
  // the message of the consumer holding them instead, empty on success.
  std::string start();

  // Waits for the work queued on every device (its records appear when it
  // ends), switches recording off, and returns every record since start(),
  // oldest first. If the runtime dropped records (its buffer was full),
  // droppedMessage() says so, for the consumer to report.
  std::vector<orActivity> stop();

  const std::string& droppedMessage() const { return droppedMessage_; }

 private:
  void drain();

  const std::string consumer_, missed_;
  bool claimed_ = false;
  std::vector<orActivity> records_;
  std::string droppedMessage_;
  std::thread drainer_;
  std::mutex drainMutex_;  // records_: the drainer thread, then stop()
  std::condition_variable drainStop_;
  bool stopping_ = false;
};

// Tests only: stops drains from collecting records while they run, so that a
// test can fill the runtime's buffer.
void pauseDrainingForTesting(bool paused);
// Tests only: stop() hands back no records at all, a profiler that loses the
// device's work (a seeded defect of python/SeededDefects.cpp).
void discardRecordsForTesting(bool discarded);

}  // namespace torch_openreg
