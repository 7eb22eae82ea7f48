// The baseline build of the host kernels (any CPU), and the run-time choice
// between it and the AVX2 / AVX-512 builds (host_reduce_kernels.h).
#define NEXAR_REDUCE_NS isa_baseline
#define NEXAR_REDUCE_F16C 0
#define NEXAR_REDUCE_AVX512 0
#include "reduce/host_reduce_kernels.h"

#include "reduce/host_reduce.h"

namespace nexar {

#if NEXAR_HAVE_X86_ISAS
namespace isa_avx2 {
Status host_reduce(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op);
}
namespace isa_avx512 {
Status host_reduce(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op);
}
#endif

const char* host_isa_name(HostIsa isa) {
    switch (isa) {
        case HostIsa::baseline: return "baseline";
        case HostIsa::avx2: return "avx2";
        case HostIsa::avx512: return "avx512";
    }
    return "?";
}

bool host_isa_supported(HostIsa isa) {
    switch (isa) {
        case HostIsa::baseline: return true;
#if NEXAR_HAVE_X86_ISAS
        case HostIsa::avx2:
            __builtin_cpu_init();  // may run before libgcc's own constructor did
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
        case HostIsa::avx512:
            return host_isa_supported(HostIsa::avx2) && __builtin_cpu_supports("avx512f") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512dq");
#else
        default: return false;
#endif
    }
    return false;
}

HostIsa host_isa_best() {
    static const HostIsa best = host_isa_supported(HostIsa::avx512) ? HostIsa::avx512
                                : host_isa_supported(HostIsa::avx2)  ? HostIsa::avx2
                                                                     : HostIsa::baseline;
    return best;
}

Status host_reduce_isa(HostIsa isa, void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op) {
    if (!host_isa_supported(isa)) return Status::unavailable;
    switch (isa) {
#if NEXAR_HAVE_X86_ISAS
        case HostIsa::avx2: return isa_avx2::host_reduce(dst, a, b, n, type, op);
        case HostIsa::avx512: return isa_avx512::host_reduce(dst, a, b, n, type, op);
#endif
        default: return isa_baseline::host_reduce(dst, a, b, n, type, op);
    }
}

Status host_reduce(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op) {
    using Fn = Status (*)(void*, const void*, const void*, size_t, DataType, ReduceOp);
    static const Fn best = [] {
        switch (host_isa_best()) {
#if NEXAR_HAVE_X86_ISAS
            case HostIsa::avx512: return Fn(isa_avx512::host_reduce);
            case HostIsa::avx2: return Fn(isa_avx2::host_reduce);
#endif
            default: return Fn(isa_baseline::host_reduce);
        }
    }();
    return best(dst, a, b, n, type, op);
}

}  // namespace nexar
