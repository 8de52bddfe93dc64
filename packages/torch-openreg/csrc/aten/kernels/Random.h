// Random.h - random fills of openreg tensors, drawn from openreg generators.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <tuple>

namespace torch_openreg::native {

at::Tensor& normal(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen);
at::Tensor& uniform(at::Tensor& self, double from, double to, std::optional<at::Generator> gen);
at::Tensor& random(at::Tensor& self, std::optional<at::Generator> gen);
at::Tensor& randomTo(at::Tensor& self, int64_t to, std::optional<at::Generator> gen);
at::Tensor& randomFrom(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                       std::optional<at::Generator> gen);
at::Tensor& bernoulli(at::Tensor& self, double p, std::optional<at::Generator> gen);
// Dropout takes no generator argument: its CPU kernel would draw from the CPU
// generator, so openreg builds it from its own bernoulli_.
std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input, double p,
                                                 std::optional<bool> train);

}  // namespace torch_openreg::native
