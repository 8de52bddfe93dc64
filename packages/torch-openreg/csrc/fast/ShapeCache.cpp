// ShapeCache.cpp - speed layer: see ShapeCache.h. Measured when
// introduced: a Python Meta kernel costs tens of microseconds a call; a
// cache hit, well under one.
#include "fast/ShapeCache.h"

#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "aten/OperatorCall.h"
#include "fast/RawKey.h"

namespace torch_openreg::fast {
namespace {

// LITERALINCLUDE START: EXECUTOR_SHAPE_CACHE
// Note [Caching shape inference]
// Many Meta kernels are Python functions (PyTorch's reference
// implementations), which cost tens of microseconds a call. What they
// compute depends only on the operator and the metadata of its arguments, so
// the answer is cached under a key that spells out exactly that: each
// tensor's dtype, sizes, strides and kind (device tensor, CPU scalar with its
// value, other CPU tensor), and every other argument's value. A training
// loop asks the same questions at every step, so after the first step no
// Meta kernel runs. "No answer" (data-dependent shapes) is cached too.
// The key is binary (raw integers, not text): building it allocates nothing
// once the per-thread buffer has grown, which keeps a cache hit cheap
// (appendRaw and appendInts, RawKey.h).
//
// One exception to "every value": the floating-point numbers of arithmetic
// operators (Note [Numbers that only enter the arithmetic]).

// Note [Numbers that only enter the arithmetic]
// An optimizer divides by a number that changes at every step (AdamW's bias
// correction): keyed by its bits, each such call missed the cache and ran a
// Python Meta kernel, 50-70 us; the tiny ViT's AdamW step made 32 of them.
// For the operators below, a floating-point number (a double argument or a
// CPU scalar tensor of type double) decides neither the result's shape (they
// broadcast their tensors) nor its dtype (its type does, which stays in the
// key); the one check its value meets is the conversion to the float32 that
// reduced-precision kernels compute in. So the key keeps only whether the
// number converts to float32 without overflow.
bool numbersOnlyEnterArithmetic(const c10::OperatorHandle& op) {
  static const std::unordered_set<std::string> arithmetic = {
      "aten::add",  "aten::add_",     "aten::sub",      "aten::sub_",     "aten::mul",  "aten::mul_",
      "aten::div",  "aten::div_",     "aten::addcmul",  "aten::addcmul_", "aten::addcdiv",
      "aten::addcdiv_", "aten::lerp", "aten::lerp_"};
  return arithmetic.count(op.schema().name()) != 0;
}

void appendNumberClass(std::string& key, double value) {
  bool convertsToFloat = !std::isfinite(value) || std::abs(value) <= std::numeric_limits<float>::max();
  key += convertsToFloat ? 'f' : 'F';
}

void appendKey(std::string& key, const c10::IValue& value, bool numberClassOnly) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (!t.defined()) {
      key += 'U';
      return;
    }
    bool cpuScalar = t.device().is_cpu() && t.dim() == 0;
    key += cpuScalar ? (t.unsafeGetTensorImpl()->is_wrapped_number() ? 'W' : 'S') : (t.is_cpu() ? 'C' : 'D');
    appendRaw(key, t.scalar_type());
    appendInts(key, t.sizes());
    appendInts(key, t.strides());
    // A CPU scalar's value can decide the result dtype: its bytes are part of it.
    if (cpuScalar && numberClassOnly && t.scalar_type() == at::kDouble) {
      appendNumberClass(key, *t.const_data_ptr<double>());
    } else if (cpuScalar) {
      key.append(static_cast<const char*>(t.const_data_ptr()), t.element_size());
    }
  } else if (value.isTensorList() || value.isOptionalTensorList()) {
    key += '[';
    mapTensors(value, [&](const at::Tensor& t) {
      appendKey(key, t, numberClassOnly);
      return t;
    });
    key += ']';
  } else if (value.isInt()) {
    key += 'i';
    appendRaw(key, value.toInt());
  } else if (value.isDouble()) {
    key += 'd';
    if (numberClassOnly) {
      appendNumberClass(key, value.toDouble());
    } else {
      appendRaw(key, value.toDouble());  // the bits: exact
    }
  } else if (value.isBool()) {
    key += value.toBool() ? 'T' : 'F';
  } else if (value.isNone()) {
    key += 'N';
  } else if (value.isIntList()) {
    key += 'l';
    appendInts(key, value.toDimVector());
  } else {
    key += 'x';
    key += c10::str(value);  // strings, devices, nested lists: rare
    key += '\0';
  }
}

struct ShapeCache {
  static constexpr size_t kMaxEntries = size_t{1} << 16;
  std::mutex mutex;
  // Shared so that a hit hands the answer out without copying it; null
  // means "no answer".
  std::unordered_map<std::string, std::shared_ptr<const Stack>> answers;
};

}  // namespace

std::shared_ptr<const Stack> cachedInferOnMeta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  static ShapeCache* cache = new ShapeCache();  // never destroyed: used until exit
  thread_local std::string key;
  key.clear();
  appendRaw(key, &op.schema());
  bool numberClassOnly = numbersOnlyEnterArithmetic(op);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!isGeneratorArgument(op.schema().arguments()[i])) appendKey(key, args[i], numberClassOnly);
  }
  {
    std::lock_guard<std::mutex> lock(cache->mutex);
    auto found = cache->answers.find(key);
    if (found != cache->answers.end()) return found->second;
  }
  std::shared_ptr<const Stack> answer = inferOnMeta(op, args);
  std::lock_guard<std::mutex> lock(cache->mutex);
  if (cache->answers.size() >= ShapeCache::kMaxEntries) cache->answers.clear();
  cache->answers.emplace(key, answer);
  return answer;
}
// LITERALINCLUDE END: EXECUTOR_SHAPE_CACHE

}  // namespace torch_openreg::fast
