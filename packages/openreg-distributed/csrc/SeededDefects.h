// SeededDefects.h - tests only: occl with one contract broken on purpose, for
// the conformance kit's negative controls (SeededDefects.cpp).
#pragma once

#include "Backend.h"

namespace occl {

// An OcclBackend whose all_reduce leaves out the last rank's contribution.
c10::intrusive_ptr<OcclBackend> makeBackendDroppingARank(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                         int size, std::chrono::milliseconds timeout,
                                                         std::string group, TransportFactory makeTransport);

}  // namespace occl
