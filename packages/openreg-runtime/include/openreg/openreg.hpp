// openreg.hpp - header-only C++17 conveniences over the C API in openreg.h.
//
// openreg::launch queues any callable as a kernel; openreg::translate reaches
// device memory from inside it. Nothing here adds device behaviour: each
// helper is a few lines over one C call, so the C API stays the single source
// of truth.
#pragma once

#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "openreg/openreg.h"

namespace openreg {

// Thrown by the helpers below when a runtime call fails; carries the code.
class Error : public std::runtime_error {
 public:
  Error(orError_t code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  orError_t code() const noexcept { return code_; }

 private:
  orError_t code_;
};

// Throws openreg::Error with the runtime's message if status is a failure.
inline void check(orError_t status) {
  if (status != orSuccess) {
    const char* message = orGetLastErrorMessage();
    throw Error(status, *message ? message : orGetErrorString(status));
  }
}

// Kernel only: the host alias of count elements of T at device address
// devicePtr. Throws openreg::Error (the kernel is then marked failed).
template <typename T>
T* translate(T* devicePtr, size_t count = 1) {
  void* host = nullptr;
  check(orKernelTranslatePointer(&host, devicePtr, count * sizeof(T)));
  return static_cast<T*>(host);
}

// LITERALINCLUDE START: OR_LAUNCH_CALLABLE
// Queues a Callable, constructed from args, as a kernel named name on
// stream. Callable() may return void or orError_t; an exception it throws
// fails the kernel with its what() as the message, the way a device-side
// assertion fails a CUDA kernel. The closure lives on the heap until the
// worker has run it, and the worker destroys and frees it.
template <typename Callable, typename... Args>
orError_t launchInPlace(orStream_t stream, const char* name, Args&&... args) {
  auto* owned = new (std::nothrow) Callable(std::forward<Args>(args)...);
  if (owned == nullptr) return orErrorMemoryAllocation;
  auto run = [](void* data) -> orError_t {
    try {
      auto& callable = *static_cast<Callable*>(data);
      if constexpr (std::is_void_v<decltype(callable())>) {
        callable();
        return orSuccess;
      } else {
        return callable();
      }
    } catch (const std::exception& e) {
      orKernelSetErrorMessage(e.what());
    } catch (...) {
      orKernelSetErrorMessage("unknown C++ exception");
    }
    return orErrorLaunchFailure;
  };
  auto release = [](void* data) { delete static_cast<Callable*>(data); };
  return orLaunchKernelWithRelease(stream, run, release, owned, name);
}

// Queues fn() as a kernel named name on stream, as launchInPlace does.
template <typename F>
orError_t launch(orStream_t stream, const char* name, F&& fn) {
  return launchInPlace<std::decay_t<F>>(stream, name, std::forward<F>(fn));
}
// LITERALINCLUDE END: OR_LAUNCH_CALLABLE

}  // namespace openreg
