// RawKey.h - speed layer: cache keys built as raw bytes, integers as they
// lie in memory, not as text. The executor's shape cache and the lending plans of
// ResultsInPlace key their calls this way; appending allocates nothing once
// the key's buffer has grown. Its gain is measured within theirs
// (ShapeCache.cpp, ResultsInPlace.cpp).
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace torch_openreg {

template <typename T>
void appendRaw(std::string& key, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  key.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// The count, then the values: two lists never run into each other.
inline void appendInts(std::string& key, c10::IntArrayRef values) {
  appendRaw(key, values.size());
  key.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t));
}

}  // namespace torch_openreg
