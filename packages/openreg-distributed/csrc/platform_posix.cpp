// Note [Platform calls] (Platform.h): the POSIX side, for Linux and macOS.

#include "Platform.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace occl::platform {

int32_t processId() { return static_cast<int32_t>(getpid()); }

bool processExited(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
#if defined(__linux__)
  // A zombie still answers kill(): its state in /proc says it has exited.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  size_t close = line.rfind(')');  // the command name may hold spaces
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
#else
  return false;
#endif
}

}  // namespace occl::platform
