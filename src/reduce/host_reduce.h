// Host (CPU) reduction kernels.
#pragma once

#include <cstddef>

#include "core/status.h"
#include "reduce/types.h"

namespace nexar {

// dst[i] = a[i] op b[i] for i < n.  dst may be the same pointer as a (the
// in-place case) but must not otherwise overlap a or b.  Integer results are
// exact (two's-complement wrap-around, as MPI implementations compute them).
// Returns invalid_argument for a (type, op) pair that op_supported rejects.
Status host_reduce(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op);

}  // namespace nexar
