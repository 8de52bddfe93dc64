// runtime_bench.cpp - libopenreg's figures against their anchors, in one run.
//
// Built and run by tools/bench/runtime.py. Each figure is a median over
// repetitions; copies are compared with a plain memcpy of the same bytes
// between warm host buffers, measured in the same process. The IPC figures
// copy to and from an allocation of a second process (forked first).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

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

// The other process of the IPC figures: exports one allocation through a
// pipe and keeps it until told the benchmark is done. Forked before this
// process touches the runtime, so that both may use it.
struct Exporter {
  pid_t pid = -1;
  int handleFd = -1;  // read the orIpcMemHandle_t here
  int doneFd = -1;    // write one byte here when finished with it
};

Exporter startExporter(size_t bytes) {
  int handlePipe[2], donePipe[2];
  if (pipe(handlePipe) != 0 || pipe(donePipe) != 0) std::exit(1);
  pid_t pid = fork();
  if (pid < 0) std::exit(1);
  if (pid == 0) {
    void* buffer = nullptr;
    orIpcMemHandle_t handle;
    check(orMalloc(&buffer, bytes), "orMalloc (exporter)");
    check(orMemset(buffer, 7, bytes), "orMemset (exporter)");
    check(orIpcGetMemHandle(&handle, buffer), "orIpcGetMemHandle");
    char done = 0;
    bool ok = write(handlePipe[1], &handle, sizeof(handle)) == sizeof(handle) &&
              read(donePipe[0], &done, 1) == 1;  // also returns if the parent dies
    check(orFree(buffer), "orFree (exporter)");
    _exit(ok ? 0 : 1);
  }
  close(handlePipe[1]);
  close(donePipe[0]);
  return Exporter{pid, handlePipe[0], donePipe[1]};
}

void finishExporter(const Exporter& exporter) {
  char done = 1;
  if (write(exporter.doneFd, &done, 1) != 1) std::exit(1);
  int status = 0;
  waitpid(exporter.pid, &status, 0);
  close(exporter.handleFd);
  close(exporter.doneFd);
}

}  // namespace

int main() {
  const size_t bytes = size_t{64} << 20;
  const int reps = 15;
  Exporter exporter = startExporter(bytes);
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
  orIpcMemHandle_t handle;
  if (read(exporter.handleFd, &handle, sizeof(handle)) != sizeof(handle)) {
    std::fprintf(stderr, "the exporting process sent no handle\n");
    return 1;
  }
  void* peer = nullptr;
  check(orIpcOpenMemHandle(&peer, handle, 0), "orIpcOpenMemHandle");
  reportCopy("D2D from another process (IPC)", anchor, asyncCopy(devB, peer, orMemcpyDeviceToDevice));
  reportCopy("D2D to another process (IPC)", anchor, asyncCopy(peer, devA, orMemcpyDeviceToDevice));
  check(orIpcCloseMemHandle(peer), "orIpcCloseMemHandle");
  finishExporter(exporter);

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
