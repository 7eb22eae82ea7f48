// The host kernels built for AVX2 + FMA + F16C (this file's -m flags come
// from Makefile.am); used only when the CPU has them (host_reduce.cc).
#define NEXAR_REDUCE_NS isa_avx2
#define NEXAR_REDUCE_F16C 1
#define NEXAR_REDUCE_AVX512 0
#include "reduce/host_reduce_kernels.h"
