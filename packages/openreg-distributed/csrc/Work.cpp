// Work.cpp - OcclWork (Work.h): every answer comes from the collective's end
// event on the comm stream, so a Work needs no thread of its own.
#include "Work.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <thread>

namespace occl {

void GroupFailure::record(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (message_.empty()) message_ = message;
}

void GroupFailure::check() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(message_.empty(), message_);
}

std::string GroupFailure::message() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return message_;
}

bool GroupFailure::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !message_.empty();
}

OcclWork::OcclWork(int rank, c10d::OpType type, uint64_t seq, c10::Device device, std::unique_ptr<c10::Event> end,
                   std::vector<at::Tensor> outputs, c10::intrusive_ptr<c10::ivalue::Future> future,
                   std::shared_ptr<GroupFailure> failure, std::shared_ptr<std::atomic<int>> source, bool blocksHost)
    : c10d::Work(rank, type),
      seq_(seq),
      device_(device),
      end_(std::move(end)),
      outputs_(std::move(outputs)),
      future_(std::move(future)),
      failure_(std::move(failure)),
      source_(std::move(source)),
      blocksHost_(blocksHost) {}

bool OcclWork::isCompleted() { return end_->query(); }

bool OcclWork::isSuccess() const { return !failure_->failed(); }

// LITERALINCLUDE START: OCCL_WORK_WAIT
bool OcclWork::wait(std::chrono::milliseconds timeout) {
  // Ordered first, raising after: a collective that already failed must
  // still fail the current stream's later work (its consumers), which a
  // raise before the ordering would leave reading the unreduced values.
  blockCurrentStream();
  failure_->check();
  if (timeout != kNoTimeout) {
    // A caller's timeout asks to know, on the host, that the collective
    // ended in time (as ProcessGroupNCCL's wait(timeout) does).
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!end_->query()) {
      TORCH_CHECK(std::chrono::steady_clock::now() < deadline, "occl: collective #", seq_,
                  " did not complete within the ", timeout.count(), " ms given to wait()");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    failure_->check();
  }
  if (blocksHost_) synchronize();
  return true;
}

void OcclWork::blockCurrentStream() {
  c10::impl::VirtualGuardImpl guard(device_.type());
  end_->block(guard.getStream(device_));
}

void OcclWork::synchronize() {
  end_->synchronize();  // a failed collective ends too: its kernel records the failure in the group
  failure_->check();
}
// LITERALINCLUDE END: OCCL_WORK_WAIT

std::vector<at::Tensor> OcclWork::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> OcclWork::getFuture() { return future_; }

int OcclWork::sourceRank() const {
  end_->synchronize();
  failure_->check();
  return source_->load();
}

}  // namespace occl
