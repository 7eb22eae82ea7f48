// IEEE binary16 (half) and bfloat16 as 16-bit storage types, with exact
// conversions to float and round-to-nearest-even conversions back.  The host
// and the GPU reducers both compute a op b in float and round once, so their
// results are bit-identical.
#pragma once

#include <cstdint>
#include <cstring>

namespace nexar {

struct float16_t { uint16_t bits; };
struct bfloat16_t { uint16_t bits; };

// Internal linkage on purpose: reduce/host_reduce_kernels.h is compiled with
// AVX-512 flags too, and an out-of-line copy from that build must never be
// the one a baseline caller links to.
namespace {

inline float to_float(float16_t h) {
    uint32_t sign = uint32_t(h.bits & 0x8000) << 16, exp = (h.bits >> 10) & 0x1f, man = h.bits & 0x3ff, f;
    if (exp == 0x1f) {
        f = sign | 0x7f800000u | (man << 13);  // inf / nan
    } else if (exp != 0) {
        f = sign | ((exp + 112) << 23) | (man << 13);  // normal: rebias 15 -> 127
    } else if (man == 0) {
        f = sign;  // signed zero
    } else {       // subnormal: normalize
        int e = -1;
        do { man <<= 1; ++e; } while (!(man & 0x400));
        f = sign | (uint32_t(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float out;
    memcpy(&out, &f, 4);
    return out;
}

inline float16_t to_float16(float v) {
    uint32_t f;
    memcpy(&f, &v, 4);
    uint32_t sign = (f >> 16) & 0x8000, abs = f & 0x7fffffffu;
    if (abs >= 0x7f800000u)  // inf or nan (keep nan quiet and non-zero)
        return {uint16_t(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 | ((abs >> 13) & 0x3ff) : 0))};
    if (abs >= 0x477ff000u) return {uint16_t(sign | 0x7c00)};  // rounds past 65504: inf
    if (abs < 0x38800000u) {  // result is subnormal or zero (below 2^-14)
        if (abs < 0x33000000u) return {uint16_t(sign)};  // below half of the smallest subnormal
        uint32_t e = abs >> 23, man = (abs & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e;  // 14 + 1 + (113 - e) ... gives the subnormal position
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) ++q;
        return {uint16_t(sign | q)};
    }
    uint32_t q = (abs - 0x38000000u) >> 13;  // rebias 127 -> 15 and drop 13 bits
    uint32_t rem = abs & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) ++q;
    return {uint16_t(sign | q)};
}

inline float to_float(bfloat16_t b) {
    uint32_t f = uint32_t(b.bits) << 16;
    float out;
    memcpy(&out, &f, 4);
    return out;
}

inline bfloat16_t to_bfloat16(float v) {
    uint32_t f;
    memcpy(&f, &v, 4);
    if ((f & 0x7fffffffu) > 0x7f800000u) return {uint16_t((f >> 16) | 0x40)};  // quiet nan
    uint32_t rounding = 0x7fff + ((f >> 16) & 1);
    return {uint16_t((f + rounding) >> 16)};
}

}  // namespace

}  // namespace nexar
