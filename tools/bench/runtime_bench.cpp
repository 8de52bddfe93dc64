// runtime_bench.cpp - libopenreg's figures against their anchors, in one run.
//
// Built and run by tools/bench/runtime.py. Each figure is a median over
// repetitions; copies are compared with a plain memcpy of the same bytes
// between warm host buffers, measured in the same process.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "openreg/openreg.h"

namespace {

using Clock = std::chrono::steady_clock;

void check(orError_t status, const char* what) {
  if (status == orSuccess) return;
  std::fprintf(stderr, "%s failed: %s\n", what, orGetLastErrorMessage());
  std::exit(1);
}

template <typename F>
double medianSeconds(int repetitions, F&& body) {
  std::vector<double> samples;
  for (int i = 0; i < repetitions; ++i) {
    auto start = Clock::now();
    body();
    samples.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

orError_t emptyKernel(void*) { return orSuccess; }

void reportCopy(const char* what, double anchor, double measured) {
  std::printf("%-34s %8.2f GB/s   anchor memcpy %8.2f GB/s   ratio %.2f   (target >= 0.90)\n",
              what, 64.0 * 1048576 / measured / 1e9, 64.0 * 1048576 / anchor / 1e9,
              anchor / measured);
}

void reportLatency(const char* what, double seconds, double targetUs) {
  std::printf("%-34s %8.3f us   target <= %.0f us   ratio to target %.2f\n", what, seconds * 1e6,
              targetUs, seconds * 1e6 / targetUs);
}

// How long a cache line takes to go from one thread's core to another's
// and back: the cost a launch pays for each line the host and a stream's
// worker both write (Note [The launch queue]). Printed with the launch
// figures because it explains them: on a VM it moves with the placement of
// the virtual CPUs, from tens to hundreds of nanoseconds.
double cacheLineRoundTripSeconds() {
  alignas(64) static std::atomic<int> ping{0};
  alignas(64) static std::atomic<int> pong{0};
  std::atomic<bool> stop{false};
  std::thread echo([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      int value = ping.load(std::memory_order_acquire);
      if (value != pong.load(std::memory_order_relaxed)) pong.store(value, std::memory_order_release);
    }
  });
  const int trips = 20000;
  double seconds = medianSeconds(5, [&] {
    for (int i = 0; i < trips; ++i) {
      int value = ping.load(std::memory_order_relaxed) + 1;
      ping.store(value, std::memory_order_release);
      while (pong.load(std::memory_order_acquire) != value) {
      }
    }
  }) / trips;
  stop.store(true);
  echo.join();
  return seconds;
}

}  // namespace

int main() {
  const size_t bytes = size_t{64} << 20;
  const int reps = 15;
  orStream_t stream = nullptr;
  check(orStreamCreate(&stream), "orStreamCreate");

  void *pinnedA = nullptr, *pinnedB = nullptr, *devA = nullptr, *devB = nullptr;
  check(orMallocHost(&pinnedA, bytes), "orMallocHost");
  check(orMallocHost(&pinnedB, bytes), "orMallocHost");
  check(orMalloc(&devA, bytes), "orMalloc");
  check(orMalloc(&devB, bytes), "orMalloc");
  std::vector<char> hostA(bytes, 1), hostB(bytes, 2);
  std::memset(pinnedA, 3, bytes);
  std::memset(pinnedB, 4, bytes);
  // Warm every page once so no figure pays for first touch.
  check(orMemset(devA, 5, bytes), "orMemset");
  check(orMemset(devB, 6, bytes), "orMemset");

  double anchor = medianSeconds(reps, [&] { std::memcpy(hostB.data(), hostA.data(), bytes); });
  auto asyncCopy = [&](void* dst, const void* src, orMemcpyKind kind) {
    return medianSeconds(reps, [&] {
      check(orMemcpyAsync(dst, src, bytes, kind, stream), "orMemcpyAsync");
      check(orStreamSynchronize(stream), "orStreamSynchronize");
    });
  };
  std::printf("openreg-runtime benchmarks (median of %d, 64 MiB copies)\n", reps);
  reportCopy("H2D async from pinned, 64 MiB", anchor, asyncCopy(devA, pinnedA, orMemcpyHostToDevice));
  reportCopy("D2H async to pinned, 64 MiB", anchor, asyncCopy(pinnedB, devA, orMemcpyDeviceToHost));
  reportCopy("D2D async, 64 MiB", anchor, asyncCopy(devB, devA, orMemcpyDeviceToDevice));
  reportCopy("H2D from pageable, 64 MiB", anchor, asyncCopy(devA, hostA.data(), orMemcpyHostToDevice));

  const int launches = 100000;
  check(orStreamSynchronize(stream), "orStreamSynchronize");
  double enqueue = medianSeconds(5, [&] {
    for (int i = 0; i < launches; ++i) check(orLaunchKernel(stream, emptyKernel, nullptr, "empty"), "launch");
  }) / launches;
  check(orStreamSynchronize(stream), "orStreamSynchronize");
  reportLatency("enqueue of an empty kernel", enqueue, 1);

  const int trips = 5000;
  double roundTrip = medianSeconds(5, [&] {
    for (int i = 0; i < trips; ++i) {
      check(orLaunchKernel(stream, emptyKernel, nullptr, "empty"), "launch");
      check(orStreamSynchronize(stream), "orStreamSynchronize");
    }
  }) / trips;
  reportLatency("launch + synchronize round trip", roundTrip, 20);
  std::printf("%-34s %8.3f us   (no target: the machine's, for reading the two above)\n",
              "cache line round trip, 2 threads", cacheLineRoundTripSeconds() * 1e6);

  orEvent_t event = nullptr;
  check(orEventCreateWithFlags(&event, orEventDisableTiming), "orEventCreate");
  double recordQuery = medianSeconds(5, [&] {
    for (int i = 0; i < trips; ++i) {
      check(orEventRecord(event, stream), "orEventRecord");
      orError_t status = orEventQuery(event);
      if (status != orSuccess && status != orErrorNotReady) check(status, "orEventQuery");
    }
  }) / trips;
  check(orStreamSynchronize(stream), "orStreamSynchronize");
  std::printf("%-34s %8.3f us   anchor empty-kernel enqueue %.3f us   ratio %.2f\n",
              "event record + query", recordQuery * 1e6, enqueue * 1e6, recordQuery / enqueue);

  check(orEventDestroy(event), "orEventDestroy");
  check(orFree(devA), "orFree");
  check(orFree(devB), "orFree");
  check(orFreeHost(pinnedA), "orFreeHost");
  check(orFreeHost(pinnedB), "orFreeHost");
  check(orStreamDestroy(stream), "orStreamDestroy");
  return 0;
}
