// Completion.h - completes the future of each collective of a group once its
// kernel has ended: with its outputs, or with the group's failure, so that
// get_future() (DDP's communication hooks) sees an error as wait() does.
// ProcessGroupNCCL's watchdog plays this part for CUDA. One host thread per
// group, started by its first collective. Not here: running collectives, or
// the Work's own wait (Work.cpp), which needs no thread.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "Work.h"

namespace occl {

class Completion {
 public:
  explicit Completion(std::shared_ptr<GroupFailure> failure) : failure_(std::move(failure)) {}
  ~Completion() { stop(); }

  // Host, right after a collective's kernel is queued on stream: completes
  // future once the kernel has ended, with outputs if *succeeded was set by
  // then (the kernel sets it), else with the group's failure.
  void add(const c10::Stream& stream, c10::intrusive_ptr<c10::ivalue::Future> future,
           std::vector<at::Tensor> outputs, std::shared_ptr<std::atomic<bool>> succeeded);
  // Host, once every kernel of the group has ended: completes what is left
  // and joins the thread.
  void stop();

 private:
  struct Pending {
    std::unique_ptr<c10::Event> end;
    c10::Stream stream;
    c10::intrusive_ptr<c10::ivalue::Future> future;
    std::vector<at::Tensor> outputs;
    std::shared_ptr<std::atomic<bool>> succeeded;
  };
  void run();
  void complete(Pending& pending) const;

  std::shared_ptr<GroupFailure> failure_;
  std::mutex mutex_;  // guards pending_, stopping_ and thread_
  std::condition_variable changed_;
  std::deque<Pending> pending_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace occl
