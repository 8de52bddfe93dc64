// ExecutorRules.cpp - see ExecutorRules.h.
#include "aten/ExecutorRules.h"

#include <ATen/Dispatch.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/overflows.h>

#include <algorithm>
#include <memory>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "aten/SpeedLayer.h"

namespace torch_openreg {
namespace {

// LITERALINCLUDE START: EXECUTOR_DTYPES_CHECKED
// Note [Dtypes a CPU kernel does not implement]
// A CPU kernel picks its loop by dtype when it runs (AT_DISPATCH), and
// refuses a dtype it has no loop for: `F.silu` of an integer tensor. The
// Meta kernel does not know that. CUDA refuses at the call, since its
// dtype dispatch runs on the host before the launch; queued on openreg, the
// refusal would be a sticky device error. So the first call of an operator
// with each combination of argument dtypes (its tensors' dtypes, in order,
// and its dtype= arguments) runs synchronously (counted as "sync"), and a
// refusal is the caller's error, raised at the call with the CPU's message;
// once a combination has run, its calls are queued.
bool isDtypeArgument(const c10::Argument& argument) {
  const c10::TypePtr& type = argument.type();
  if (type->kind() == c10::TypeKind::ScalarTypeType) return true;
  auto optional = type->cast<c10::OptionalType>();
  return optional && optional->getElementType()->kind() == c10::TypeKind::ScalarTypeType;
}
// LITERALINCLUDE END: EXECUTOR_DTYPES_CHECKED

std::vector<size_t> dtypeArgumentsOf(const c10::FunctionSchema& schema) {
  std::vector<size_t> positions;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (isDtypeArgument(schema.arguments()[i])) positions.push_back(i);
  }
  return positions;
}

// Operators whose Meta kernel promises results that their CPU kernel does
// not produce.
MetaAgreement metaAgreementWithCpu(const c10::FunctionSchema& schema) {
  const std::string& name = schema.name();
  // offset2bag is empty on the CPU when no backward needs it.
  if (name == "aten::_embedding_bag_forward_only" || name == "aten::_embedding_bag") return MetaAgreement::Never;
  // Found by the executor's check (Note [A Meta kernel that disagrees with
  // the CPU]) on PyTorch's ModuleInfo database: for a 1-D input with
  // reduction='none', Meta promises an output of shape [1], the CPU (and
  // CUDA) return shape [].
  if (name == "aten::multilabel_margin_loss_forward") return MetaAgreement::Never;
  // The CPU keeps layer, batch and group norm statistics in the weight's
  // dtype, or the input's without a weight, where Meta (like CUDA) promises
  // float32 for layer and batch norm and the input's dtype for group norm;
  // the CPU's backward then refuses statistics of another dtype. Batch norm
  // outside training returns empty statistics on the CPU, of the input's
  // channel count on Meta. Meta's answer is corrected (withCpuStatistics)
  // and the call is queued as any other: timing-only mode runs it too.
  if (name == "aten::native_layer_norm" || name == "aten::native_group_norm" || name == "aten::native_batch_norm" ||
      name == "aten::_native_batch_norm_legit" || name == "aten::_batch_norm_with_update") {
    return MetaAgreement::StatisticsLikeCpu;
  }
  // Group norm's backward (found by the executor's check): Meta promises a
  // float32 input gradient for a float16 input, the CPU returns float16.
  if (name == "aten::native_group_norm_backward") return MetaAgreement::InFloat32AndFloat64;
  return MetaAgreement::Always;
}

// LITERALINCLUDE START: EXECUTOR_REFUSALS
// Note [Arguments a queued kernel could refuse]
// The Meta kernel checks shapes and dtypes on the host, but a few refusals
// happen only inside the CPU kernel: a dtype that few CPU kernels implement
// (float8 and float4, the bit-packed types, unsigned types beyond uint8),
// and a Scalar argument that overflows a tensor's dtype (Scalar::to<T> is
// checked: `x.half().clamp(min=-1e6)`). Queued, such a refusal would be a
// sticky device error where CUDA raises at the call. So those calls run
// synchronously, and a refusal is the caller's error. The scalar check is
// against every non-bool tensor's dtype, so it may send a call that the CPU
// would accept the synchronous way too; that costs time, never a result.
// Only arguments the schema types as Scalar are converted that way; int
// and float arguments (a dim, an eps) are not.
bool fewCpuKernelsAccept(at::ScalarType dtype) {
  return c10::isFloat8Type(dtype) || dtype == at::ScalarType::Float4_e2m1fn_x2 || c10::isBitsType(dtype) ||
         c10::isBarebonesUnsignedType(dtype);
}

// Whether a schema type is Scalar, Scalar? or Scalar[].
bool holdsScalars(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::NumberType) return true;
  if (auto optional = type->cast<c10::OptionalType>()) return holdsScalars(optional->getElementType());
  if (auto list = type->cast<c10::ListType>()) return holdsScalars(list->getElementType());
  return false;
}
// LITERALINCLUDE END: EXECUTOR_REFUSALS

std::shared_mutex infosMutex;
std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OperatorInfo>> infos;

}  // namespace

bool OperatorInfo::ranWith(const std::string& dtypes) {
  std::lock_guard<std::mutex> lock(ranMutex_);
  return ranDtypes_.count(dtypes) != 0;
}

void OperatorInfo::markRanWith(const std::string& dtypes) {
  std::lock_guard<std::mutex> lock(ranMutex_);
  ranDtypes_.insert(dtypes);
}

// Note [Memory timing-only mode never computed]: what an operator writes
// whole without reading it may be memory timing-only mode never computed.
std::vector<size_t> overwrittenArgumentsOf(const c10::FunctionSchema& schema) {
  static const std::set<std::string> overwriteSelf{
      "aten::fill_", "aten::zero_", "aten::copy_", "aten::normal_", "aten::uniform_", "aten::random_",
      "aten::exponential_", "aten::geometric_", "aten::cauchy_", "aten::log_normal_"};
  std::vector<size_t> positions;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (schema.arguments()[i].is_out() || (i == 0 && overwriteSelf.count(schema.name()) != 0)) {
      positions.push_back(i);
    }
  }
  return positions;
}

OperatorInfo& infoOf(const c10::OperatorHandle& op) {
  const c10::FunctionSchema* schema = &op.schema();
  {
    std::shared_lock<std::shared_mutex> lock(infosMutex);
    auto found = infos.find(schema);
    if (found != infos.end()) return *found->second;
  }
  auto info = std::make_unique<OperatorInfo>();
  info->name = operatorName(op);
  info->label = schema->operator_name().name;
  info->signature = readSignature(*schema);
  info->hasCpuKernel = op.hasComputedKernelForDispatchKey(c10::DispatchKey::CPU);
  info->meta = metaAgreementWithCpu(*schema);
  info->dtypeArguments = dtypeArgumentsOf(*schema);
  info->overwrittenArguments = overwrittenArgumentsOf(*schema);
  info->outVariant = speedLayer().findOutVariant(*schema);  // none on the plain path
  std::unique_lock<std::shared_mutex> lock(infosMutex);
  return *infos.emplace(schema, std::move(info)).first->second;  // keeps a racing first entry
}

void forEachOperatorInfo(const std::function<void(OperatorInfo&)>& fn) {
  std::shared_lock<std::shared_mutex> lock(infosMutex);
  for (const auto& [schema, info] : infos) fn(*info);
}

bool metaAgrees(const OperatorInfo& info, c10::ArrayRef<c10::IValue> args) {
  if (info.metaDistrusted.load(std::memory_order_relaxed)) return false;
  switch (info.meta) {
    case MetaAgreement::Always:
    case MetaAgreement::StatisticsLikeCpu:
      return true;
    case MetaAgreement::Never:
      return false;
    case MetaAgreement::InFloat32AndFloat64:
      return !at::isReducedFloatingType(args[0].toTensor().scalar_type());
  }
  return false;
}

namespace {

at::ScalarType cpuStatisticsDtype(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args) {
  std::optional<int> weight = schema.argumentIndexWithName("weight");
  if (weight.has_value() && args[*weight].isTensor() && args[*weight].toTensor().defined()) {
    return args[*weight].toTensor().scalar_type();
  }
  return args[0].toTensor().scalar_type();
}

}  // namespace

std::shared_ptr<const Stack> withCpuStatistics(const OperatorInfo& info, const c10::FunctionSchema& schema,
                                                     c10::ArrayRef<c10::IValue> args,
                                                     std::shared_ptr<const Stack> meta) {
  if (meta == nullptr || info.meta != MetaAgreement::StatisticsLikeCpu) return meta;
  at::ScalarType dtype = cpuStatisticsDtype(schema, args);
  std::optional<int> training = schema.argumentIndexWithName("training");
  bool empty = training.has_value() && args[*training].isBool() && !args[*training].toBool();
  auto corrected = std::make_shared<Stack>(*meta);
  for (size_t i = 1; i < corrected->size(); ++i) {
    if (!(*corrected)[i].isTensor()) continue;
    const at::Tensor& statistic = (*corrected)[i].toTensor();
    if (!statistic.defined() || !at::isFloatingType(statistic.scalar_type())) continue;
    at::TensorOptions options = statistic.options().dtype(dtype);
    (*corrected)[i] = empty ? at::empty_strided({0}, {1}, options)
                            : at::empty_strided(statistic.sizes(), statistic.strides(), options);
  }
  return corrected;
}

bool kernelMightRefuse(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                       c10::ArrayRef<at::ScalarType> dtypes) {
  if (std::any_of(dtypes.begin(), dtypes.end(), fewCpuKernelsAccept)) return true;
  auto refused = [&](const c10::IValue& value) {
    if (!value.isScalar()) return false;  // None
    at::Scalar scalar = value.toScalar();
    if (scalar.isBoolean() || scalar.isSymbolic()) return false;  // a bool never overflows
    auto overflowsDtype = [&](at::ScalarType dtype) { return scalarOverflows(scalar, dtype); };
    return std::any_of(dtypes.begin(), dtypes.end(), overflowsDtype);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (!holdsScalars(schema.arguments()[i].type())) continue;
    if (args[i].isList() ? std::any_of(args[i].toListRef().begin(), args[i].toListRef().end(), refused)
                         : refused(args[i])) {
      return true;
    }
  }
  return false;
}

bool scalarOverflows(const at::Scalar& scalar, at::ScalarType dtype) {
  try {
    return AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(at::kHalf, at::kBFloat16, at::kComplexHalf, dtype, "overflows", [&] {
      if (scalar.isComplex()) return c10::overflows<scalar_t>(scalar.toComplexDouble());
      if (scalar.isFloatingPoint()) return c10::overflows<scalar_t>(scalar.toDouble());
      return c10::overflows<scalar_t>(scalar.toLong());
    });
  } catch (const c10::Error&) {
    return true;  // a dtype or value this cannot judge: let the CPU kernel decide, synchronously
  }
}

}  // namespace torch_openreg
