// c_api_suite.cpp - the runtime's C API tested from C++ alone, as a program a
// vendor's CI runs on each platform it builds for (tests/test_native.py
// builds and runs it here). Standard C++17 and openreg.h only: the child
// processes the fault and IPC tests need are this program run again through
// std::system, which every platform has.
//
//   c_api_suite                 runs every test, prints one line each and
//                               "N passed, M failed"; exits 1 if any failed
//   c_api_suite NAME...         runs the named tests only
//   c_api_suite --child WHAT    a child's part (host-fault, ipc-writer)

#include <openreg/ipc.h>
#include <openreg/openreg.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

// ------------------------------------------------------------- the runner

namespace {

struct Failure {
  std::string what;
};

std::string where(const char* file, int line) { return std::string(file) + ":" + std::to_string(line) + ": "; }

#define CHECK(condition)                                                         \
  do {                                                                           \
    if (!(condition)) throw Failure{where(__FILE__, __LINE__) + #condition};     \
  } while (0)

// The call must succeed; a failure names the call, the error and the runtime's message.
#define CHECK_OK(call)                                                                               \
  do {                                                                                               \
    orError_t status_ = (call);                                                                      \
    if (status_ != orSuccess)                                                                        \
      throw Failure{where(__FILE__, __LINE__) + #call + " returned " + orGetErrorName(status_) +     \
                    ": " + orGetLastErrorMessage()};                                                 \
  } while (0)

// The call must fail with this error, and say why.
#define CHECK_FAILS(call, expected)                                                                  \
  do {                                                                                               \
    orError_t status_ = (call);                                                                      \
    if (status_ != (expected))                                                                       \
      throw Failure{where(__FILE__, __LINE__) + #call + " returned " + orGetErrorName(status_) +     \
                    ", not " + orGetErrorName(expected)};                                            \
    CHECK(std::strlen(orGetLastErrorMessage()) > 0);                                                 \
    orGetLastError(); /* handled: reset */                                                           \
  } while (0)

struct Test {
  const char* name;
  std::function<void()> body;
};

std::vector<Test>& tests() {
  static std::vector<Test> all;
  return all;
}

struct Register {
  Register(const char* name, std::function<void()> body) { tests().push_back({name, std::move(body)}); }
};

#define TEST(name)                                    \
  void name();                                        \
  const Register register_##name(#name, name);        \
  void name()

std::string self;  // this program, for the children

size_t freeBytes(int device) {
  size_t free = 0, total = 0;
  CHECK_OK(orSetDevice(device));
  CHECK_OK(orMemGetInfo(&free, &total));
  CHECK_OK(orSetDevice(0));
  return free;
}

// Runs this program again as `--child what args`, its stderr to a file;
// returns (exit status, stderr).
std::pair<int, std::string> runChild(const std::string& what, const std::string& args = "") {
  std::string errors = "c_api_suite_child_" + what + ".err";
  std::string command = "\"" + self + "\" --child " + what + " " + args + " 2> " + errors;
  int status = std::system(command.c_str());
  std::ifstream file(errors);
  std::stringstream text;
  text << file.rdbuf();
  file.close();
  std::remove(errors.c_str());
  return {status, text.str()};
}

// ------------------------------------------------------------ the kernels

struct Add {
  float* data;  // device memory
  size_t count;
  float value;
};

// data[i] += value, through the kernel's host alias of the device memory.
orError_t addKernel(void* userData) {
  auto* args = static_cast<Add*>(userData);
  void* host = nullptr;
  orError_t status = orKernelTranslatePointer(&host, args->data, args->count * sizeof(float));
  if (status != orSuccess) return status;
  auto* values = static_cast<float*>(host);
  for (size_t i = 0; i < args->count; ++i) values[i] += args->value;
  return orSuccess;
}

// Holds its stream until the host opens it (never by timing).
orError_t gateKernel(void* userData) {
  auto* open = static_cast<std::atomic<bool>*>(userData);
  while (!open->load()) std::this_thread::yield();
  return orSuccess;
}

orError_t sleepKernel(void* userData) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<int*>(userData)));
  return orSuccess;
}

orError_t countKernel(void* userData) {
  ++*static_cast<std::atomic<int>*>(userData);
  return orSuccess;
}

orError_t failingKernel(void*) {
  orKernelSetErrorMessage("the suite's kernel failed on purpose");
  return orErrorLaunchFailure;
}

std::vector<float> read(const float* device, size_t count) {
  std::vector<float> host(count);
  CHECK_OK(orMemcpy(host.data(), device, count * sizeof(float), orMemcpyDeviceToHost));
  return host;
}

// ---------------------------------------------------------------- devices

TEST(devices_are_counted_and_selected) {
  int count = 0, current = -1;
  CHECK_OK(orGetDeviceCount(&count));
  CHECK(count >= 2);
  CHECK_OK(orSetDevice(1));
  CHECK_OK(orGetDevice(&current));
  CHECK(current == 1);
  CHECK_FAILS(orSetDevice(count), orErrorInvalidDevice);
  CHECK_OK(orGetDevice(&current));
  CHECK(current == 1);  // a refused switch changes nothing
  CHECK_OK(orSetDevice(0));
}

// ----------------------------------------------------------------- memory

TEST(memory_round_trips_and_goes_back_to_the_device) {
  size_t before = freeBytes(0);
  const size_t count = 1 << 18;
  float* device = nullptr;
  CHECK_OK(orMalloc(reinterpret_cast<void**>(&device), count * sizeof(float)));
  CHECK(freeBytes(0) < before);
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(i);
  CHECK_OK(orMemcpy(device, host.data(), count * sizeof(float), orMemcpyHostToDevice));
  CHECK_OK(orMemset(device, 0, 16 * sizeof(float)));
  std::vector<float> back = read(device, count);
  CHECK(back[15] == 0.0f && back[16] == 16.0f && back[count - 1] == static_cast<float>(count - 1));
  CHECK_OK(orFree(device));
  CHECK(freeBytes(0) == before);
  CHECK_FAILS(orFree(device), orErrorInvalidDevicePointer);  // freed already
}

TEST(out_of_memory_at_the_capacity_leaves_the_device_usable) {
  size_t free = 0, total = 0;
  CHECK_OK(orMemGetInfo(&free, &total));
  void* tooLarge = nullptr;
  CHECK_FAILS(orMalloc(&tooLarge, total + 1), orErrorMemoryAllocation);
  CHECK(tooLarge == nullptr);
  void* small = nullptr;
  CHECK_OK(orMalloc(&small, 4096));
  CHECK_OK(orFree(small));
}

TEST(host_code_touching_device_memory_faults_and_is_named) {
  auto [status, errors] = runChild("host-fault");
  CHECK(status != 0);
  CHECK(errors.find("openreg: host code accessed device memory at address") != std::string::npos);
  CHECK(errors.find("orKernelTranslatePointer") != std::string::npos);  // says what to do instead
}

// ---------------------------------------------------------------- kernels

TEST(a_kernel_works_on_device_memory_through_its_alias) {
  const size_t count = 1000;
  float* device = nullptr;
  CHECK_OK(orMalloc(reinterpret_cast<void**>(&device), count * sizeof(float)));
  CHECK_OK(orMemset(device, 0, count * sizeof(float)));
  Add add{device, count, 2.5f};
  CHECK_OK(orLaunchKernel(nullptr, addKernel, &add, "add"));
  CHECK_OK(orLaunchKernel(nullptr, addKernel, &add, "add"));
  std::vector<float> back = read(device, count);  // a synchronous copy waits for the stream
  CHECK(back[0] == 5.0f && back[count - 1] == 5.0f);
  CHECK_OK(orFree(device));
}

// ---------------------------------------------------- streams and events

TEST(a_stream_runs_its_work_in_order_and_says_when_it_is_done) {
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  std::atomic<bool> open{false};
  std::atomic<int> counted{0};
  CHECK_OK(orLaunchKernel(stream, gateKernel, &open, "gate"));
  CHECK_OK(orLaunchKernel(stream, countKernel, &counted, "count"));
  CHECK_FAILS(orStreamQuery(stream), orErrorNotReady);
  CHECK(counted.load() == 0);  // held behind the gate
  open.store(true);
  CHECK_OK(orStreamSynchronize(stream));
  CHECK(counted.load() == 1);
  CHECK_OK(orStreamQuery(stream));
  CHECK_OK(orStreamDestroy(stream));
}

TEST(an_event_orders_another_stream_and_times_its_work) {
  orStream_t first = nullptr, second = nullptr;
  orEvent_t start = nullptr, end = nullptr;
  CHECK_OK(orStreamCreate(&first));
  CHECK_OK(orStreamCreate(&second));
  CHECK_OK(orEventCreate(&start));
  CHECK_OK(orEventCreate(&end));
  std::atomic<bool> open{false};
  std::atomic<int> counted{0};
  int milliseconds = 20;
  CHECK_OK(orLaunchKernel(first, gateKernel, &open, "gate"));
  CHECK_OK(orEventRecord(start, first));
  CHECK_OK(orLaunchKernel(first, sleepKernel, &milliseconds, "sleep"));
  CHECK_OK(orEventRecord(end, first));
  CHECK_OK(orStreamWaitEvent(second, end));
  CHECK_OK(orLaunchKernel(second, countKernel, &counted, "count"));
  CHECK_FAILS(orEventQuery(end), orErrorNotReady);
  open.store(true);
  CHECK_OK(orStreamSynchronize(second));
  CHECK(counted.load() == 1);
  CHECK_OK(orEventQuery(end));  // the second stream waited for it
  float elapsed = 0;
  CHECK_OK(orEventElapsedTime(&elapsed, start, end));
  CHECK(elapsed >= 15.0f && elapsed < 10000.0f);  // milliseconds
  CHECK_OK(orEventDestroy(start));
  CHECK_OK(orEventDestroy(end));
  CHECK_OK(orStreamDestroy(first));
  CHECK_OK(orStreamDestroy(second));
}

// ------------------------------------------------------------ sticky errors

// LITERALINCLUDE START: C_API_SUITE_STICKY
TEST(a_failed_kernel_is_sticky_until_the_device_is_reset) {
  CHECK_OK(orSetDevice(1));
  CHECK_OK(orLaunchKernel(nullptr, failingKernel, nullptr, "fails"));
  CHECK_FAILS(orDeviceSynchronize(), orErrorLaunchFailure);
  CHECK_FAILS(orDeviceSynchronize(), orErrorLaunchFailure);  // sticky: later work is refused too
  std::atomic<int> counted{0};
  CHECK_FAILS(orLaunchKernel(nullptr, countKernel, &counted, "count"), orErrorLaunchFailure);
  CHECK_OK(orDeviceReset());
  CHECK_OK(orLaunchKernel(nullptr, countKernel, &counted, "count"));
  CHECK_OK(orDeviceSynchronize());
  CHECK(counted.load() == 1);
  CHECK_OK(orSetDevice(0));
  CHECK_OK(orDeviceSynchronize());  // device 0 never saw the error
}
// LITERALINCLUDE END: C_API_SUITE_STICKY

// ------------------------------------------------------------------ graphs

TEST(a_captured_graph_replays_its_work_without_running_it_at_capture) {
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  std::atomic<int> counted{0};
  CHECK_OK(orStreamBeginCapture(stream, orStreamCaptureModeGlobal));
  CHECK_OK(orLaunchKernel(stream, countKernel, &counted, "count"));
  CHECK_OK(orLaunchKernel(stream, countKernel, &counted, "count"));
  orGraph_t graph = nullptr;
  CHECK_OK(orStreamEndCapture(stream, &graph));
  CHECK(counted.load() == 0);
  size_t nodes = 0;
  CHECK_OK(orGraphGetNodeCount(graph, &nodes));
  CHECK(nodes == 2);
  orGraphExec_t exec = nullptr;
  CHECK_OK(orGraphInstantiate(&exec, graph));
  for (int launch = 0; launch < 3; ++launch) CHECK_OK(orGraphLaunch(exec, stream));
  CHECK_OK(orStreamSynchronize(stream));
  CHECK(counted.load() == 6);
  CHECK_OK(orGraphExecDestroy(exec));
  CHECK_OK(orGraphDestroy(graph));
  CHECK_OK(orStreamDestroy(stream));
}

TEST(a_synchronizing_call_during_a_capture_is_refused) {
  orStream_t stream = nullptr;
  CHECK_OK(orStreamCreate(&stream));
  CHECK_OK(orStreamBeginCapture(stream, orStreamCaptureModeGlobal));
  CHECK_FAILS(orDeviceSynchronize(), orErrorStreamCaptureUnsupported);
  orGraph_t graph = nullptr;
  CHECK_FAILS(orStreamEndCapture(stream, &graph), orErrorStreamCaptureInvalidated);
  CHECK_OK(orStreamDestroy(stream));
}

// --------------------------------------------------------------------- IPC

std::string hex(const void* bytes, size_t count) {
  std::string text;
  char digits[3];
  for (size_t i = 0; i < count; ++i) {
    std::snprintf(digits, sizeof(digits), "%02x", static_cast<const unsigned char*>(bytes)[i]);
    text += digits;
  }
  return text;
}

TEST(another_process_writes_memory_this_one_exported) {
  const size_t count = 4096;
  float* device = nullptr;
  CHECK_OK(orMalloc(reinterpret_cast<void**>(&device), count * sizeof(float)));
  CHECK_OK(orMemset(device, 0, count * sizeof(float)));
  orIpcMemHandle_t handle;
  CHECK_OK(orIpcGetMemHandle(&handle, device));
  auto [status, errors] = runChild("ipc-writer", hex(&handle, sizeof(handle)));
  CHECK(status == 0);
  CHECK(errors.empty());
  std::vector<float> back = read(device, count);
  CHECK(back[0] == 7.0f && back[count - 1] == 7.0f);
  CHECK_OK(orFree(device));
}

// --------------------------------------------------------- the children

int hostFault() {
  void* device = nullptr;
  if (orMalloc(&device, 4096) != orSuccess) return 2;
  std::fprintf(stderr, "touching %p\n", device);
  *static_cast<volatile float*>(device) = 1.0f;  // the host may not: the fault handler names it
  return 0;                                      // not reached
}

int ipcWriter(const std::string& text) {
  orIpcMemHandle_t handle;
  if (text.size() != 2 * sizeof(handle)) return 2;
  auto* bytes = reinterpret_cast<unsigned char*>(&handle);
  for (size_t i = 0; i < sizeof(handle); ++i) {
    bytes[i] = static_cast<unsigned char>(std::stoi(text.substr(2 * i, 2), nullptr, 16));
  }
  void* opened = nullptr;
  if (orIpcOpenMemHandle(&opened, handle, 0) != orSuccess) {
    std::fprintf(stderr, "orIpcOpenMemHandle: %s\n", orGetLastErrorMessage());
    return 1;
  }
  Add add{static_cast<float*>(opened), 4096, 7.0f};
  if (orLaunchKernel(nullptr, addKernel, &add, "add") != orSuccess || orDeviceSynchronize() != orSuccess ||
      orIpcCloseMemHandle(opened) != orSuccess) {
    std::fprintf(stderr, "ipc-writer: %s\n", orGetLastErrorMessage());
    return 1;
  }
  return 0;
}

bool wanted(const char* name, int argc, char** argv) {
  if (argc < 2) return true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  self = argv[0];
  if (argc >= 3 && std::strcmp(argv[1], "--child") == 0) {
    std::string what = argv[2];
    if (what == "host-fault") return hostFault();
    if (what == "ipc-writer" && argc == 4) return ipcWriter(argv[3]);
    return 2;
  }
  int passed = 0, failed = 0;
  for (const Test& test : tests()) {
    if (!wanted(test.name, argc, argv)) continue;
    size_t before = freeBytes(0);
    try {
      test.body();
      CHECK(orGetLastError() == orSuccess);  // nothing left unhandled
      CHECK(freeBytes(0) == before);         // every test gives its memory back
      std::printf("PASS %s\n", test.name);
      ++passed;
    } catch (const Failure& failure) {
      std::printf("FAIL %s: %s\n", test.name, failure.what.c_str());
      ++failed;
      orGetLastError();
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 && passed > 0 ? 0 : 1;
}
