// Completion.cpp - the completion thread of a group (Completion.h).
#include "Completion.h"

#include <c10/core/StreamGuard.h>

#include <stdexcept>

namespace occl {

void Completion::add(const c10::Stream& stream, c10::intrusive_ptr<c10::ivalue::Future> future,
                     std::vector<at::Tensor> outputs, std::shared_ptr<std::atomic<bool>> succeeded) {
  auto end = std::make_unique<c10::Event>(stream.device_type());
  end->record(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!stopping_, "occl: a collective was queued on a group that is shutting down");
  pending_.push_back(Pending{std::move(end), stream, std::move(future), std::move(outputs), std::move(succeeded)});
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  changed_.notify_one();
}

// In queue order, which is the comm stream's: each kernel is bounded by the
// group's timeout (or ends at once after an abort), so the wait is too.
void Completion::run() {
  for (;;) {
    std::optional<Pending> pending;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, and nothing left
      pending.emplace(std::move(pending_.front()));
      pending_.pop_front();
    }
    pending->end->synchronize();
    complete(*pending);
  }
}

// LITERALINCLUDE START: OCCL_COMPLETE_FUTURE
void Completion::complete(Pending& pending) const {
  if (pending.succeeded->load()) {
    // Stream-ordered, as a CUDA future is: waiting on it orders the waiter's
    // stream after the comm stream.
    c10::StreamGuard onComm(pending.stream);
    pending.future->markCompleted(c10::IValue(pending.outputs));
    return;
  }
  std::string message = failure_->message();
  if (message.empty()) message = "occl: a collective did not complete (its group was shut down)";
  pending.future->setError(std::make_exception_ptr(std::runtime_error(message)));
}
// LITERALINCLUDE END: OCCL_COMPLETE_FUTURE

void Completion::stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    thread = std::move(thread_);
    changed_.notify_one();
  }
  if (thread.joinable()) thread.join();
}

}  // namespace occl
