// Host reduction kernels: one small template per (type, op), written as plain
// loops over __restrict pointers so that -O3 vectorizes them.  Signed integer
// SUM/PROD are computed in the unsigned type to get the wrap-around MPI
// libraries produce without undefined behaviour.
#include "reduce/host_reduce.h"

#include "reduce/half.h"

#include <cstdint>
#include <type_traits>

namespace nexar {

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

// 16-bit floats: widen to float, apply the op, round to nearest even.
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
        case DataType::f16: return by_op_half<float16_t>(dst, a, b, n, op);
        case DataType::bf16: return by_op_half<bfloat16_t>(dst, a, b, n, op);
        default: return Status::invalid_argument;
    }
}

}  // namespace nexar
