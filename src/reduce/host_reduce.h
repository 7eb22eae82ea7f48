// Host (CPU) reduction kernels.
#pragma once

#include <cstddef>

#include "base/status.h"
#include "reduce/types.h"

namespace nexar {

// dst[i] = a[i] op b[i] for i < n.  dst may be the same pointer as a (the
// in-place case) but must not otherwise overlap a or b.  Integer results are
// exact (two's-complement wrap-around, as MPI implementations compute them).
// Returns invalid_argument for a (type, op) pair that op_supported rejects.
// Uses the best build of the kernels this CPU runs (host_isa_best()).
Status host_reduce(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op);

// The kernels are built for several x86-64 instruction sets and chosen at
// run time; every build computes the same bits.
enum class HostIsa { baseline, avx2, avx512 };
const char* host_isa_name(HostIsa isa);
// Built into this library and supported by this CPU.
bool host_isa_supported(HostIsa isa);
HostIsa host_isa_best();
// One particular build (tests, benchmarks); unavailable when not supported.
Status host_reduce_isa(HostIsa isa, void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op);

}  // namespace nexar
