// Note [Platform calls] (Platform.h): the POSIX side, for Linux and macOS.

#include "runtime/Platform.h"

#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/syscall.h>
#endif

namespace torch_openreg::platform {

bool onMainThread() {
#if defined(__APPLE__)
  return pthread_main_np() != 0;
#else
  // Linux: the first thread's id is the process id. Asked for every kernel a
  // host thread runs, so the system call is made once per thread.
  thread_local const bool isMain = getpid() == static_cast<pid_t>(syscall(SYS_gettid));
  return isMain;
#endif
}

void aroundFork(void (*prepare)(), void (*parent)(), void (*child)()) { pthread_atfork(prepare, parent, child); }

int callLibraryFunction(const std::string& library, const char* name, const char* what) {
  void* handle = dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  TORCH_CHECK(handle != nullptr, "cannot load ", what, " ", library, ": ", dlerror());
  auto function = reinterpret_cast<int (*)()>(dlsym(handle, name));
  int result = function != nullptr ? function() : -1;
  dlclose(handle);
  return result;
}

}  // namespace torch_openreg::platform
