// Test helper: small integers as IEEE half or bfloat16 bits, encoded by
// the tests themselves (independently of nexar's conversions).  Every
// integer of magnitude up to 2048 (half) or 256 (bfloat16) is exact.
#pragma once

#include <cstdint>

inline uint16_t encode_small_int(long v, bool bf) {
    if (v == 0) return 0;
    uint16_t sign = v < 0 ? 0x8000 : 0;
    unsigned long a = (unsigned long)(v < 0 ? -v : v);
    int e = 63 - __builtin_clzl(a);
    if (bf) return uint16_t(sign | ((e + 127) << 7) | ((a - (1ul << e)) << (7 - e)));
    return uint16_t(sign | ((e + 15) << 10) | ((a - (1ul << e)) << (10 - e)));
}
