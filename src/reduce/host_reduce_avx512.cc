// The host kernels built for AVX-512 (F, BW, VL, DQ) with 512-bit vectors;
// used only when the CPU has them (host_reduce.cc).
#define NEXAR_REDUCE_NS isa_avx512
#define NEXAR_REDUCE_F16C 1
#define NEXAR_REDUCE_AVX512 1
#include "reduce/host_reduce_kernels.h"
