// run_package.cpp - runs an AOTInductor package compiled for openreg from
// C++, with no Python code: loads it through torch's
// AOTIModelPackageLoader (which creates the runner libtorch_openreg.so
// registered for "openreg"), runs it on openreg:0 and writes the output.
//   run_package PACKAGE INPUT OUTPUT DIM0 [DIM1 ...]
// INPUT holds the float32 input of the given sizes, raw; OUTPUT receives the
// model's first output, float32, raw. tests/test_aot_inductor.py builds and
// runs it; the guide quotes it.
#include <ATen/ATen.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

// LITERALINCLUDE START: AOTI_CPP_RUN
at::Tensor runOnOpenReg(const std::string& package, const at::Tensor& input) {
  // What `import torch_openreg` does in Python: PrivateUse1 is called
  // "openreg". The backend itself registered when libtorch_openreg.so loaded.
  c10::register_privateuse1_backend("openreg");
  torch::inductor::AOTIModelPackageLoader loader(package, "model", /*run_single_threaded=*/false,
                                                 /*num_runners=*/1, /*device_index=*/0);
  std::vector<at::Tensor> outputs = loader.run({input.to(c10::Device("openreg:0"))});
  return outputs.at(0).cpu();  // waits for the model's kernels
}
// LITERALINCLUDE END: AOTI_CPP_RUN

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: run_package PACKAGE INPUT OUTPUT DIM0 [DIM1 ...]\n";
    return 2;
  }
  std::vector<int64_t> sizes;
  for (int i = 4; i < argc; ++i) {
    sizes.push_back(std::atoll(argv[i]));
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  at::Tensor input = at::empty(sizes, at::kFloat);
  if (bytes.size() != static_cast<size_t>(input.nbytes())) {
    std::cerr << "input holds " << bytes.size() << " bytes, expected " << input.nbytes() << "\n";
    return 2;
  }
  std::memcpy(input.data_ptr(), bytes.data(), bytes.size());
  at::Tensor output = runOnOpenReg(argv[1], input).contiguous().to(at::kFloat);
  std::ofstream out(argv[3], std::ios::binary);
  out.write(static_cast<const char*>(output.data_ptr()), static_cast<std::streamsize>(output.nbytes()));
  std::cout << "output sizes " << output.sizes() << "\n";
  return 0;
}
