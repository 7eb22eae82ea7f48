#include "core/copy_choice.h"

#include <cstdio>

namespace nexar {

ShmCopyChooser::Shape& ShmCopyChooser::shape(size_t bytes, int variant) {
    unsigned size_class = bytes ? unsigned(63 - __builtin_clzll(uint64_t(bytes))) : 0;
    return shapes_[kVariants * size_class + unsigned(variant) % kVariants];
}

ShmCopy ShmCopyChooser::propose(size_t bytes, int variant) {
    Shape& s = shape(bytes, variant);
    const uint32_t n = s.calls % kRoundCalls;
    if (n == 0)
        for (double& b : s.best) b = 0;
    // A mode's samples are consecutive calls.  A call finds the cache as the
    // call before left it, and a mode that streams its results past the
    // cache is slow right after one that left them there dirty (measured:
    // slots took 10.2 ms for a 64 MiB allgather between CMA calls, 6.9 ms
    // after slots), so only a mode's later samples show its steady state.
    if (n < kSamplesPerMode * kShmCopyModes) return ShmCopy(n / kSamplesPerMode);
    int fastest = 0;
    for (int m = 1; m < kShmCopyModes; ++m)
        if (s.best[m] > 0 && (s.best[fastest] <= 0 || s.best[m] < s.best[fastest])) fastest = m;
    return ShmCopy(fastest);
}

bool ShmCopyChooser::record(size_t bytes, int variant, ShmCopy used, double seconds) {
    Shape& s = shape(bytes, variant);
    ++s.calls;
    double& b = s.best[int(used)];
    if (seconds > 0 && (b <= 0 || seconds < b)) b = seconds;
    return s.calls % kRoundCalls == kSamplesPerMode * kShmCopyModes;
}

std::string ShmCopyChooser::describe(size_t bytes, int variant) {
    const Shape& s = shape(bytes, variant);
    std::string out = shm_copy_name(propose(bytes, variant));
    char buf[64];
    for (int m = 0; m < kShmCopyModes; ++m) {
        snprintf(buf, sizeof buf, "%s%s %.2f ms", m ? ", " : " (", shm_copy_name(ShmCopy(m)), s.best[m] * 1e3);
        out += buf;
    }
    return out + ")";
}

}  // namespace nexar
