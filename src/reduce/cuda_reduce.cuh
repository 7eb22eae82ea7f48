// GPU reduction kernels (built into the CUDA plugin only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace nexar {

// dst[i] = a[i] op b[i] on `stream`; dst may equal a.  dtype and op are
// nexar::DataType and nexar::ReduceOp values.  Returns cudaErrorInvalidValue
// for a pair the kernels do not implement.
cudaError_t launch_reduce(void* dst, const void* a, const void* b, size_t count, int dtype, int op,
                          cudaStream_t stream);

}  // namespace nexar
