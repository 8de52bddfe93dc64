// bindings.cpp - openreg_runtime._C: the whole C API of libopenreg for Python.
//
// One Python function per C function, snake_case without the "or" prefix.
// Failures raise openreg_runtime.Error carrying the status code and the
// runtime's message; pointers and handles are plain ints (0 is NULL). Every
// call that can block releases the GIL, so Python threads really run the
// runtime concurrently and Python kernels can run on stream workers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>

#include "openreg/openreg.h"

namespace py = pybind11;

namespace {

PyObject* errorType = nullptr;

struct Failure {
  orError_t code;
  std::string message;
};

void check(orError_t status) {
  if (status == orSuccess) return;
  const char* message = orGetLastErrorMessage();
  throw Failure{status, *message != '\0' ? message : orGetErrorString(status)};
}

template <typename T>
T* ptr(uintptr_t value) {
  return reinterpret_cast<T*>(value);
}
uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
orStream_t stream(uintptr_t handle) { return reinterpret_cast<orStream_t>(handle); }
orEvent_t event(uintptr_t handle) { return reinterpret_cast<orEvent_t>(handle); }

// A Python callable queued as a kernel. The runtime owns it: release() drops
// the reference once the kernel ran, was skipped, or was refused.
orError_t runPythonKernel(void* data) {
  py::gil_scoped_acquire gil;
  try {
    (*static_cast<py::function*>(data))();
    return orSuccess;
  } catch (py::error_already_set& e) {
    orKernelSetErrorMessage(e.what());
  } catch (Failure& f) {
    orKernelSetErrorMessage(f.message.c_str());
  }
  return orErrorLaunchFailure;
}

void releasePythonKernel(void* data) {
  py::gil_scoped_acquire gil;
  delete static_cast<py::function*>(data);
}

py::dict activityToDict(const orActivity& a) {
  static const char* kinds[] = {"kernel", "memcpy", "memset", "launch", "synchronize", "event_record",
                                "stream_wait"};
  py::dict d;
  d["kind"] = kinds[a.kind];
  d["name"] = std::string(a.name);
  d["device"] = a.device;
  d["stream"] = a.stream;
  d["start_ns"] = a.startNs;
  d["end_ns"] = a.endNs;
  d["correlation_id"] = a.correlationId;
  d["external_correlation_id"] = a.externalCorrelationId;
  d["waited_for_correlation_id"] = a.waitedForCorrelationId;
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Bindings of libopenreg's C API; see openreg/openreg.h for semantics.";
  using release = py::call_guard<py::gil_scoped_release>;

  errorType = PyErr_NewExceptionWithDoc(
      "openreg_runtime.Error",
      "A libopenreg call failed. .code is the orError_t value, .name its name.",
      PyExc_RuntimeError, nullptr);
  m.attr("Error") = py::handle(errorType);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Failure& f) {
      py::object error = py::reinterpret_borrow<py::object>(errorType)(f.message);
      error.attr("code") = static_cast<int>(f.code);
      error.attr("name") = orGetErrorName(f.code);
      PyErr_SetObject(errorType, error.ptr());
    }
  });

  // Constants, under the C names for easy cross-reference.
  for (int code = orSuccess; code <= orErrorStreamCaptureInvalidated; ++code) {
    m.attr(orGetErrorName(static_cast<orError_t>(code))) = code;
  }
  m.attr("orMemcpyHostToHost") = static_cast<int>(orMemcpyHostToHost);
  m.attr("orMemcpyHostToDevice") = static_cast<int>(orMemcpyHostToDevice);
  m.attr("orMemcpyDeviceToHost") = static_cast<int>(orMemcpyDeviceToHost);
  m.attr("orMemcpyDeviceToDevice") = static_cast<int>(orMemcpyDeviceToDevice);
  m.attr("orMemcpyDefault") = static_cast<int>(orMemcpyDefault);
  m.attr("orEventDefault") = static_cast<int>(orEventDefault);
  m.attr("orEventBlockingSync") = static_cast<int>(orEventBlockingSync);
  m.attr("orEventDisableTiming") = static_cast<int>(orEventDisableTiming);
  m.attr("orStreamCaptureModeGlobal") = static_cast<int>(orStreamCaptureModeGlobal);
  m.attr("orStreamCaptureModeThreadLocal") = static_cast<int>(orStreamCaptureModeThreadLocal);
  m.attr("orStreamCaptureModeRelaxed") = static_cast<int>(orStreamCaptureModeRelaxed);

  // Errors and version
  m.def("get_error_string", [](int code) { return std::string(orGetErrorString(static_cast<orError_t>(code))); });
  m.def("get_error_name", [](int code) { return std::string(orGetErrorName(static_cast<orError_t>(code))); });
  m.def("get_last_error", [] { return static_cast<int>(orGetLastError()); });
  m.def("peek_at_last_error", [] { return static_cast<int>(orPeekAtLastError()); });
  m.def("get_last_error_message", [] { return std::string(orGetLastErrorMessage()); });
  m.def("runtime_get_version", [] { int v = 0; check(orRuntimeGetVersion(&v)); return v; });

  // Devices
  m.def("get_device_count", [] { int n = 0; check(orGetDeviceCount(&n)); return n; });
  m.def("set_device", [](int d) { check(orSetDevice(d)); });
  m.def("get_device", [] { int d = 0; check(orGetDevice(&d)); return d; });
  m.def("get_device_properties", [](int device) {
    orDeviceProp p;
    check(orGetDeviceProperties(&p, device));
    py::dict d;
    d["name"] = std::string(p.name);
    d["total_memory"] = p.totalGlobalMem;
    d["major"] = p.major;
    d["minor"] = p.minor;
    d["multi_processor_count"] = p.multiProcessorCount;
    return d;
  });
  m.def("device_synchronize", [] { check(orDeviceSynchronize()); }, release());
  m.def("device_reset", [] { check(orDeviceReset()); }, release());
  m.def("set_timing_only", [](bool on) { check(orSetTimingOnly(on ? 1 : 0)); }, release());
  m.def("get_timing_only", [] { int on = 0; check(orGetTimingOnly(&on)); return on != 0; });
  m.def("device_get_stream_priority_range", [] {
    int least = 0, greatest = 0;
    check(orDeviceGetStreamPriorityRange(&least, &greatest));
    return py::make_tuple(least, greatest);
  });
  m.def("device_get_default_stream", [](int device) {
    orStream_t s = nullptr;
    check(orDeviceGetDefaultStream(&s, device));
    return addr(s);
  });

  // Memory
  m.def("malloc", [](size_t size) { void* p = nullptr; check(orMalloc(&p, size)); return addr(p); }, release());
  m.def("free", [](uintptr_t p) { check(orFree(ptr<void>(p))); }, release());
  m.def("malloc_host", [](size_t size) { void* p = nullptr; check(orMallocHost(&p, size)); return addr(p); }, release());
  m.def("free_host", [](uintptr_t p) { check(orFreeHost(ptr<void>(p))); }, release());
  m.def("memcpy", [](uintptr_t dst, uintptr_t src, size_t count, int kind) {
    check(orMemcpy(ptr<void>(dst), ptr<const void>(src), count, static_cast<orMemcpyKind>(kind)));
  }, py::arg("dst"), py::arg("src"), py::arg("count"), py::arg("kind") = int{orMemcpyDefault}, release());
  m.def("memcpy_async", [](uintptr_t dst, uintptr_t src, size_t count, int kind, uintptr_t s) {
    check(orMemcpyAsync(ptr<void>(dst), ptr<const void>(src), count, static_cast<orMemcpyKind>(kind), stream(s)));
  }, py::arg("dst"), py::arg("src"), py::arg("count"), py::arg("kind") = int{orMemcpyDefault},
     py::arg("stream") = 0, release());
  m.def("memset", [](uintptr_t p, int value, size_t count) { check(orMemset(ptr<void>(p), value, count)); }, release());
  m.def("memset_async", [](uintptr_t p, int value, size_t count, uintptr_t s) {
    check(orMemsetAsync(ptr<void>(p), value, count, stream(s)));
  }, py::arg("ptr"), py::arg("value"), py::arg("count"), py::arg("stream") = 0, release());
  m.def("pointer_get_attributes", [](uintptr_t p) {
    orPointerAttributes a;
    check(orPointerGetAttributes(&a, ptr<const void>(p)));
    static const char* types[] = {"unregistered", "host", "device"};
    py::dict d;
    d["type"] = types[a.type];
    d["device"] = a.device;
    d["base"] = addr(a.base);
    d["size"] = a.size;
    return d;
  });
  // LITERALINCLUDE START: OR_PY_IPC
  // Interprocess memory: a handle travels as OR_IPC_HANDLE_SIZE bytes.
  m.attr("OR_IPC_HANDLE_SIZE") = OR_IPC_HANDLE_SIZE;
  m.def("ipc_get_mem_handle", [](uintptr_t p) {
    orIpcMemHandle_t handle;
    check(orIpcGetMemHandle(&handle, ptr<void>(p)));
    return py::bytes(handle.reserved, sizeof(handle.reserved));
  });
  m.def("ipc_open_mem_handle", [](const py::bytes& bytes, unsigned flags) {
    std::string data = bytes;
    if (data.size() != OR_IPC_HANDLE_SIZE) {
      throw Failure{orErrorInvalidValue,
                    "ipc_open_mem_handle: a handle is " + std::to_string(OR_IPC_HANDLE_SIZE) +
                        " bytes from ipc_get_mem_handle, got " + std::to_string(data.size())};
    }
    orIpcMemHandle_t handle;
    std::memcpy(handle.reserved, data.data(), sizeof(handle.reserved));
    void* p = nullptr;
    {
      py::gil_scoped_release unlocked;
      check(orIpcOpenMemHandle(&p, handle, flags));
    }
    return addr(p);
  }, py::arg("handle"), py::arg("flags") = 0u);
  m.def("ipc_close_mem_handle", [](uintptr_t p) { check(orIpcCloseMemHandle(ptr<void>(p))); }, release());
  // LITERALINCLUDE END: OR_PY_IPC
  m.def("mem_get_info", [] {
    size_t free = 0, total = 0;
    check(orMemGetInfo(&free, &total));
    return py::make_tuple(free, total);
  });

  // Streams
  m.def("stream_create", [] { orStream_t s = nullptr; check(orStreamCreate(&s)); return addr(s); });
  m.def("stream_create_with_priority", [](int priority) {
    orStream_t s = nullptr;
    check(orStreamCreateWithPriority(&s, priority));
    return addr(s);
  });
  m.def("stream_destroy", [](uintptr_t s) { check(orStreamDestroy(stream(s))); }, release());
  m.def("stream_query", [](uintptr_t s) {
    orError_t status = orStreamQuery(stream(s));
    if (status == orErrorNotReady) return false;
    check(status);
    return true;
  }, py::arg("stream") = 0, release());
  m.def("stream_synchronize", [](uintptr_t s) { check(orStreamSynchronize(stream(s))); },
        py::arg("stream") = 0, release());
  m.def("stream_wait_event", [](uintptr_t s, uintptr_t e) { check(orStreamWaitEvent(stream(s), event(e))); },
        release());  // waits when the stream's queue is full, while Python kernels need the GIL
  m.def("stream_get_priority", [](uintptr_t s) { int p = 0; check(orStreamGetPriority(stream(s), &p)); return p; },
        py::arg("stream") = 0);
  m.def("stream_get_device", [](uintptr_t s) { int d = 0; check(orStreamGetDevice(stream(s), &d)); return d; },
        py::arg("stream") = 0);
  m.def("stream_get_id", [](uintptr_t s) { uint64_t id = 0; check(orStreamGetId(stream(s), &id)); return id; },
        py::arg("stream") = 0);

  // Events
  m.def("event_create", [](unsigned flags) {
    orEvent_t e = nullptr;
    check(orEventCreateWithFlags(&e, flags));
    return addr(e);
  }, py::arg("flags") = 0u);
  m.def("event_record", [](uintptr_t e, uintptr_t s) { check(orEventRecord(event(e), stream(s))); },
        py::arg("event"), py::arg("stream") = 0, release());  // may wait, as stream_wait_event
  m.def("event_query", [](uintptr_t e) {
    orError_t status = orEventQuery(event(e));
    if (status == orErrorNotReady) return false;
    check(status);
    return true;
  });
  m.def("event_synchronize", [](uintptr_t e) { check(orEventSynchronize(event(e))); }, release());
  m.def("event_elapsed_time", [](uintptr_t a, uintptr_t b) {
    float ms = 0;
    orError_t status = orEventElapsedTime(&ms, event(a), event(b));
    // NotReady records no message (as for the queries); do not let check()
    // attach this thread's stale message from an unrelated earlier failure.
    if (status == orErrorNotReady) {
      throw Failure{status, "orEventElapsedTime: an event's recorded work has not completed yet"};
    }
    check(status);
    return ms;
  });
  m.def("event_destroy", [](uintptr_t e) { check(orEventDestroy(event(e))); });

  // Kernels
  m.def("launch_kernel", [](uintptr_t s, py::function fn, const std::string& name, bool anyThread) {
    auto* owned = new py::function(std::move(fn));
    py::gil_scoped_release unlocked;  // the kernel needs the GIL to run
    check(orLaunchKernelWithFlags(stream(s), runPythonKernel, releasePythonKernel, owned, name.c_str(),
                                  anyThread ? orKernelAnyThread : orKernelDefault));
  }, py::arg("stream"), py::arg("fn"), py::arg("name") = "python_kernel", py::arg("any_thread") = false,
     "Queue fn() as a kernel on stream. An exception fails the kernel with its message. With "
     "any_thread, a thread that synchronises with the stream may run it (orKernelAnyThread).");
  m.def("kernel_is_on_worker", [] {
    int onWorker = 0;
    check(orKernelIsOnWorker(&onWorker));
    return onWorker != 0;
  });
  m.def("kernel_translate_pointer", [](uintptr_t p, size_t count) {
    void* host = nullptr;
    check(orKernelTranslatePointer(&host, ptr<const void>(p), count));
    return addr(host);
  });
  m.def("kernel_set_error_message", [](const std::string& message) {
    check(orKernelSetErrorMessage(message.c_str()));
  });
  m.def("kernel_fail_stream", [](int code, const std::string& message) {
    check(orKernelFailStream(static_cast<orError_t>(code), message.c_str()));
  }, py::arg("code"), py::arg("message"), "Kernel only: fail the work ordered after this kernel (a stream error).");

  // Tracing
  m.def("trace_enable", [](bool on) { check(orTraceEnable(on ? 1 : 0)); });
  m.def("trace_drain", [] {
    py::list out;
    orActivity batch[256];
    for (;;) {
      size_t n = 0;
      check(orTraceDrain(batch, 256, &n));
      for (size_t i = 0; i < n; ++i) out.append(activityToDict(batch[i]));
      if (n < 256) return out;
    }
  });
  m.def("trace_get_dropped_count", [] { uint64_t n = 0; check(orTraceGetDroppedCount(&n)); return n; });
  m.def("trace_get_timestamp", [] { uint64_t ns = 0; check(orTraceGetTimestamp(&ns)); return ns; });
  m.def("trace_push_external_correlation_id", [](uint64_t id) { check(orTracePushExternalCorrelationId(id)); });
  m.def("trace_pop_external_correlation_id", [] {
    uint64_t id = 0;
    check(orTracePopExternalCorrelationId(&id));
    return id;
  });

  // Stream capture and graphs (handles as integers, like streams)
  m.def("stream_begin_capture", [](uintptr_t s, int mode) {
    check(orStreamBeginCapture(stream(s), static_cast<orStreamCaptureMode>(mode)));
  }, py::arg("stream"), py::arg("mode") = static_cast<int>(orStreamCaptureModeGlobal));
  m.def("stream_end_capture", [](uintptr_t s) {
    orGraph_t g = nullptr;
    check(orStreamEndCapture(stream(s), &g));
    return addr(g);
  });
  m.def("stream_is_capturing", [](uintptr_t s) {
    static const char* names[] = {"none", "active", "invalidated"};
    orStreamCaptureStatus status = orStreamCaptureStatusNone;
    check(orStreamIsCapturing(stream(s), &status));
    return std::string(names[status]);
  });
  m.def("graph_get_node_count", [](uintptr_t g) {
    size_t n = 0;
    check(orGraphGetNodeCount(reinterpret_cast<orGraph_t>(g), &n));
    return n;
  });
  m.def("graph_debug_dot_print", [](uintptr_t g, const std::string& path) {
    check(orGraphDebugDotPrint(reinterpret_cast<orGraph_t>(g), path.c_str()));
  });
  m.def("graph_instantiate", [](uintptr_t g) {
    orGraphExec_t e = nullptr;
    check(orGraphInstantiate(&e, reinterpret_cast<orGraph_t>(g)));
    return addr(e);
  });
  m.def("graph_launch", [](uintptr_t e, uintptr_t s) {
    check(orGraphLaunch(reinterpret_cast<orGraphExec_t>(e), stream(s)));
  }, release());
  m.def("graph_exec_destroy", [](uintptr_t e) { check(orGraphExecDestroy(reinterpret_cast<orGraphExec_t>(e))); },
        release());
  m.def("graph_destroy", [](uintptr_t g) { check(orGraphDestroy(reinterpret_cast<orGraph_t>(g))); }, release());
}
