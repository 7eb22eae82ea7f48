// Host reduction kernels, compiled once per instruction set: host_reduce.cc
// (baseline x86-64 / any CPU), host_reduce_avx2.cc and host_reduce_avx512.cc
// include this file with NEXAR_REDUCE_NS naming their namespace and with
// their own -m flags.  host_reduce() picks one at run time.
//
// One small template per (type, op), written as plain loops over __restrict
// pointers so that -O3 vectorizes them for the TU's instruction set.
// Signed integer SUM/PROD are computed in the unsigned type to get the
// wrap-around MPI libraries produce without undefined behaviour.
//
// Everything here has internal linkage (anonymous namespaces, here and in
// reduce/half.h): an out-of-line copy built with AVX-512 must never be
// shared with the baseline build.
#ifndef NEXAR_REDUCE_NS
#error "define NEXAR_REDUCE_NS before including host_reduce_kernels.h"
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "base/status.h"
#include "reduce/types.h"

#include "reduce/half.h"
#if NEXAR_REDUCE_F16C
#include <immintrin.h>
// GCC 12's AVX-512 conversion intrinsics start from _mm*_undefined_*() and
// then warn about it wherever they are inlined.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace nexar {
namespace NEXAR_REDUCE_NS {
namespace {

// The type arithmetic is done in: unsigned for integers, itself otherwise.
template <class T, bool = std::is_integral<T>::value>
struct ArithOf { using type = T; };
template <class T>
struct ArithOf<T, true> { using type = std::make_unsigned_t<T>; };
template <class T>
using Arith = typename ArithOf<T>::type;

struct OpSum { template <class T> static T apply(T a, T b) { return T(Arith<T>(a) + Arith<T>(b)); } };
struct OpProd { template <class T> static T apply(T a, T b) { return T(Arith<T>(a) * Arith<T>(b)); } };
struct OpMin { template <class T> static T apply(T a, T b) { return b < a ? b : a; } };
struct OpMax { template <class T> static T apply(T a, T b) { return b > a ? b : a; } };
struct OpBand { template <class T> static T apply(T a, T b) { return T(a & b); } };
struct OpBor { template <class T> static T apply(T a, T b) { return T(a | b); } };
struct OpBxor { template <class T> static T apply(T a, T b) { return T(a ^ b); } };
struct OpLand { template <class T> static T apply(T a, T b) { return T((a != 0) & (b != 0)); } };
struct OpLor { template <class T> static T apply(T a, T b) { return T((a != 0) | (b != 0)); } };
struct OpLxor { template <class T> static T apply(T a, T b) { return T((a != 0) ^ (b != 0)); } };

// Out of place: three distinct arrays.
template <class T, class Op>
void reduce3(void* __restrict dst, const void* __restrict a, const void* __restrict b, size_t n) {
    T* __restrict d = static_cast<T*>(dst);
    const T* __restrict x = static_cast<const T*>(a);
    const T* __restrict y = static_cast<const T*>(b);
    for (size_t i = 0; i < n; ++i) d[i] = Op::apply(x[i], y[i]);
}

// In place: dst op= b.
template <class T, class Op>
void reduce2(void* __restrict dst, const void* __restrict b, size_t n) {
    T* __restrict d = static_cast<T*>(dst);
    const T* __restrict y = static_cast<const T*>(b);
    for (size_t i = 0; i < n; ++i) d[i] = Op::apply(d[i], y[i]);
}

template <class T, class Op>
void run(void* dst, const void* a, const void* b, size_t n) {
    if (dst == a)
        reduce2<T, Op>(dst, b, n);
    else
        reduce3<T, Op>(dst, a, b, n);
}

// 16-bit floats: widen to float, apply the op, round to nearest even.  The
// vector and scalar forms give the same bits (the same float operation and
// IEEE conversions; the tests compare every build with a reference).
#if NEXAR_REDUCE_F16C
// The op on 8 (AVX2) or 16 (AVX-512) floats.  MIN/MAX as OpMin/OpMax:
// b < a ? b : a and b > a ? b : a, NaN operands included.
struct VecSum {
    static __m256 apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
#if NEXAR_REDUCE_AVX512
    static __m512 apply(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
#endif
};
struct VecProd {
    static __m256 apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
#if NEXAR_REDUCE_AVX512
    static __m512 apply(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
#endif
};
struct VecMin {
    static __m256 apply(__m256 a, __m256 b) { return _mm256_blendv_ps(a, b, _mm256_cmp_ps(b, a, _CMP_LT_OQ)); }
#if NEXAR_REDUCE_AVX512
    static __m512 apply(__m512 a, __m512 b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, a, _CMP_LT_OQ), a, b); }
#endif
};
struct VecMax {
    static __m256 apply(__m256 a, __m256 b) { return _mm256_blendv_ps(a, b, _mm256_cmp_ps(b, a, _CMP_GT_OQ)); }
#if NEXAR_REDUCE_AVX512
    static __m512 apply(__m512 a, __m512 b) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, a, _CMP_GT_OQ), a, b); }
#endif
};

constexpr int kRoundNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// IEEE half <-> float with F16C (round to nearest even), 8 at a time.
struct F16x8 {
    using V = __m256;
    static constexpr size_t kLanes = 8;
    static V load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
    static void store(uint16_t* p, V v) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, kRoundNearest));
    }
    static float widen(uint16_t h) { return _cvtsh_ss(h); }
    static uint16_t narrow(float f) { return uint16_t(_cvtss_sh(f, kRoundNearest)); }
};

// bfloat16 <-> float: the top half of the float's bits, rounded to nearest
// even; NaNs stay NaN with the quiet bit set, as reduce/half.h does.
struct BF16x8 {
    using V = __m256;
    static constexpr size_t kLanes = 8;
    static V load(const uint16_t* p) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    static void store(uint16_t* p, V v) {
        __m256i f = _mm256_castps_si256(v);
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(f, 16), _mm256_set1_epi32(1));
        __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(f, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
        __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(f, 16), _mm256_set1_epi32(0x40));
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
        __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
    }
    static float widen(uint16_t b) { return to_float(bfloat16_t{b}); }
    static uint16_t narrow(float v) { return to_bfloat16(v).bits; }
};

#if NEXAR_REDUCE_AVX512
// The same, 16 at a time.
struct F16x16 : F16x8 {
    using V = __m512;
    static constexpr size_t kLanes = 16;
    static V load(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static void store(uint16_t* p, V v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, kRoundNearest));
    }
};
struct BF16x16 : BF16x8 {
    using V = __m512;
    static constexpr size_t kLanes = 16;
    static V load(const uint16_t* p) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    }
    static void store(uint16_t* p, V v) {
        __m512i f = _mm512_castps_si512(v);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(f, 16), _mm512_set1_epi32(1));
        __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(f, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
        __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(f, 16), _mm512_set1_epi32(0x40));
        __m512i r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), rounded, quiet);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
    }
};
using HalfF16 = F16x16;
using HalfBF16 = BF16x16;
#else
using HalfF16 = F16x8;
using HalfBF16 = BF16x8;
#endif

template <class Conv, class Op, class Vec>
void run_half(void* dst, const void* a, const void* b, size_t n) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    const uint16_t* x = static_cast<const uint16_t*>(a);
    const uint16_t* y = static_cast<const uint16_t*>(b);
    size_t i = 0;
    for (; i + Conv::kLanes <= n; i += Conv::kLanes)
        Conv::store(d + i, Vec::apply(Conv::load(x + i), Conv::load(y + i)));
    for (; i < n; ++i) d[i] = Conv::narrow(Op::apply(Conv::widen(x[i]), Conv::widen(y[i])));
}

template <class Conv>
Status by_op_half(void* dst, const void* a, const void* b, size_t n, ReduceOp op) {
    switch (op) {
        case ReduceOp::sum: run_half<Conv, OpSum, VecSum>(dst, a, b, n); return Status::ok;
        case ReduceOp::prod: run_half<Conv, OpProd, VecProd>(dst, a, b, n); return Status::ok;
        case ReduceOp::min: run_half<Conv, OpMin, VecMin>(dst, a, b, n); return Status::ok;
        case ReduceOp::max: run_half<Conv, OpMax, VecMax>(dst, a, b, n); return Status::ok;
        default: return Status::invalid_argument;
    }
}
#else
template <class H, class Op>
void run_half(void* dst, const void* a, const void* b, size_t n) {
    H* d = static_cast<H*>(dst);
    const H* x = static_cast<const H*>(a);
    const H* y = static_cast<const H*>(b);
    for (size_t i = 0; i < n; ++i) {
        float r = Op::apply(to_float(x[i]), to_float(y[i]));
        if constexpr (std::is_same<H, float16_t>::value)
            d[i] = to_float16(r);
        else
            d[i] = to_bfloat16(r);
    }
}

template <class H>
Status by_op_half(void* dst, const void* a, const void* b, size_t n, ReduceOp op) {
    switch (op) {
        case ReduceOp::sum: run_half<H, OpSum>(dst, a, b, n); return Status::ok;
        case ReduceOp::prod: run_half<H, OpProd>(dst, a, b, n); return Status::ok;
        case ReduceOp::min: run_half<H, OpMin>(dst, a, b, n); return Status::ok;
        case ReduceOp::max: run_half<H, OpMax>(dst, a, b, n); return Status::ok;
        default: return Status::invalid_argument;
    }
}
using HalfF16 = float16_t;
using HalfBF16 = bfloat16_t;
#endif

template <class T>
Status by_op(void* dst, const void* a, const void* b, size_t n, ReduceOp op) {
    switch (op) {
        case ReduceOp::sum: run<T, OpSum>(dst, a, b, n); return Status::ok;
        case ReduceOp::prod: run<T, OpProd>(dst, a, b, n); return Status::ok;
        case ReduceOp::min: run<T, OpMin>(dst, a, b, n); return Status::ok;
        case ReduceOp::max: run<T, OpMax>(dst, a, b, n); return Status::ok;
        default: break;
    }
    if constexpr (std::is_integral<T>::value) {
        switch (op) {
            case ReduceOp::band: run<T, OpBand>(dst, a, b, n); return Status::ok;
            case ReduceOp::bor: run<T, OpBor>(dst, a, b, n); return Status::ok;
            case ReduceOp::bxor: run<T, OpBxor>(dst, a, b, n); return Status::ok;
            case ReduceOp::land: run<T, OpLand>(dst, a, b, n); return Status::ok;
            case ReduceOp::lor: run<T, OpLor>(dst, a, b, n); return Status::ok;
            case ReduceOp::lxor: run<T, OpLxor>(dst, a, b, n); return Status::ok;
            default: break;
        }
    }
    return Status::invalid_argument;
}

}  // namespace

Status host_reduce(void* dst, const void* a, const void* b, size_t n, DataType type, ReduceOp op) {
    switch (type) {
        case DataType::i8: return by_op<int8_t>(dst, a, b, n, op);
        case DataType::i16: return by_op<int16_t>(dst, a, b, n, op);
        case DataType::i32: return by_op<int32_t>(dst, a, b, n, op);
        case DataType::i64: return by_op<int64_t>(dst, a, b, n, op);
        case DataType::u8: return by_op<uint8_t>(dst, a, b, n, op);
        case DataType::u16: return by_op<uint16_t>(dst, a, b, n, op);
        case DataType::u32: return by_op<uint32_t>(dst, a, b, n, op);
        case DataType::u64: return by_op<uint64_t>(dst, a, b, n, op);
        case DataType::f32: return by_op<float>(dst, a, b, n, op);
        case DataType::f64: return by_op<double>(dst, a, b, n, op);
        case DataType::f16: return by_op_half<HalfF16>(dst, a, b, n, op);
        case DataType::bf16: return by_op_half<HalfBF16>(dst, a, b, n, op);
        default: return Status::invalid_argument;
    }
}

}  // namespace NEXAR_REDUCE_NS
}  // namespace nexar

#if NEXAR_REDUCE_F16C && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
