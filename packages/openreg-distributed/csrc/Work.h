// Work.h - OcclWork, the handle c10d returns for one occl collective, with
// NCCL's stream semantics: the collective runs on the group's comm stream,
// wait() orders the caller's current stream after it without blocking the
// host, synchronize() blocks the host. Not here: running the collective
// (Backend.cpp queues it; the transports move the bytes).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

namespace occl {

// The first failure of a group's collectives, shared by the group, its
// works and its kernels: once a collective failed, the group refuses new
// ones (the ranks are out of step) and every wait() reports it.
class GroupFailure {
 public:
  void record(const std::string& message);
  // Throws c10::Error with the recorded message, if there is one.
  void check() const;
  bool failed() const;
  std::string message() const;

 private:
  mutable std::mutex mutex_;
  std::string message_;
};

class OcclWork final : public c10d::Work {
 public:
  OcclWork(int rank, c10d::OpType type, uint64_t seq, c10::Device device, std::unique_ptr<c10::Event> end,
           std::vector<at::Tensor> outputs, c10::intrusive_ptr<c10::ivalue::Future> future,
           std::shared_ptr<GroupFailure> failure, std::shared_ptr<std::atomic<int>> source, bool blocksHost);

  // Contract of c10d::Work, as occl keeps it:
  // - isCompleted() polls the end event, never blocks; a failed collective
  //   counts as completed (isSuccess() is then false).
  // - wait() makes the caller's current stream wait for the collective and
  //   returns at once (a barrier also blocks the host, as NCCL's does);
  //   it throws if the group has already seen a failure.
  // - synchronize() blocks the host until the collective ends and throws
  //   the group's failure if it (or an earlier collective) failed.
  // - getFuture() is completed when the collective is queued, with result(),
  //   stream-ordered as NCCL's: its value is there at once, and waiting on
  //   it orders the waiter's stream after the collective (which then fails
  //   if the collective failed: Note [A failed collective] in Backend.cpp).
  bool isCompleted() override;
  bool isSuccess() const override;
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override;
  void blockCurrentStream() override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override;
  uint64_t getSequencenumber() const override { return seq_; }

 private:
  uint64_t seq_;
  c10::Device device_;
  std::unique_ptr<c10::Event> end_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<GroupFailure> failure_;
  std::shared_ptr<std::atomic<int>> source_;
  bool blocksHost_;
};

}  // namespace occl
