// launch_throw.cpp - openreg.hpp's openreg::launch with C++ lambdas: a
// lambda that works, and one that throws, whose exception message becomes
// the device's sticky error.
//
// Build: c++ -std=c++17 launch_throw.cpp -I<include> -L<libdir> -lopenreg
//            -Wl,-rpath,<libdir>
// Prints "launch_throw: OK" and the sticky message, and returns 0.
#include <openreg/openreg.hpp>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#define EXPECT(cond)                                                       \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "launch_throw: expectation failed at line %d: %s\n", \
                   __LINE__, #cond);                                       \
      return 1;                                                            \
    }                                                                      \
  } while (0)

int main() {
  try {
    orStream_t stream = nullptr;
    openreg::check(orStreamCreate(&stream));
    int* dev = nullptr;
    openreg::check(orMalloc(reinterpret_cast<void**>(&dev), 16 * sizeof(int)));

    // A working lambda kernel: it captures by value, and the runtime owns it.
    openreg::check(openreg::launch(stream, "fill_iota", [dev] {
      int* host = openreg::translate(dev, 16);
      for (int i = 0; i < 16; ++i) host[i] = i * i;
    }));
    int out[16] = {};
    openreg::check(orStreamSynchronize(stream));
    openreg::check(orMemcpy(out, dev, sizeof(out), orMemcpyDeviceToHost));
    for (int i = 0; i < 16; ++i) EXPECT(out[i] == i * i);

    // A lambda that throws fails the kernel with its message.
    openreg::check(openreg::launch(stream, "throwing_lambda", []() -> void {
      throw std::runtime_error("lambda exploded at index 7");
    }));
    orError_t status = orStreamSynchronize(stream);
    EXPECT(status == orErrorLaunchFailure);
    std::string message = orGetLastErrorMessage();
    EXPECT(message.find("throwing_lambda") != std::string::npos);
    EXPECT(message.find("lambda exploded at index 7") != std::string::npos);

    // openreg::check turns the sticky error into an openreg::Error.
    bool threw = false;
    try {
      openreg::check(orDeviceSynchronize());
    } catch (const openreg::Error& e) {
      threw = e.code() == orErrorLaunchFailure &&
              std::strstr(e.what(), "lambda exploded at index 7") != nullptr;
    }
    EXPECT(threw);
    // Launches are refused while the error stands.
    EXPECT(openreg::launch(stream, "refused", [] {}) == orErrorLaunchFailure);

    // translate() throwing inside a kernel: an illegal address naming it.
    openreg::check(orDeviceReset());
    openreg::check(openreg::launch(stream, "bad_translate", [dev] {
      openreg::translate(dev, 1000);
    }));
    EXPECT(orStreamSynchronize(stream) == orErrorIllegalAddress);
    EXPECT(std::strstr(orGetLastErrorMessage(), "bad_translate") != nullptr);
    openreg::check(orDeviceReset());

    openreg::check(orFree(dev));
    openreg::check(orStreamDestroy(stream));
    std::printf("launch_throw: OK sticky message: %s\n", message.c_str());
    return 0;
  } catch (const openreg::Error& e) {
    std::fprintf(stderr, "launch_throw: %s (%s)\n", e.what(), orGetErrorName(e.code()));
    return 1;
  }
}
