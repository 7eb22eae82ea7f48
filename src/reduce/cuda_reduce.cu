// GPU reduction kernels: one template per (type, op), in the spirit of
// NCCL's reduce_kernel.h.  Each thread handles 16 bytes at a time with one
// vector load per operand when all three pointers are 16-byte aligned, then
// the tail (or everything, when unaligned) element by element.  16-bit
// floats compute in float and round to nearest even, exactly like the host
// reducers (reduce/half.h), so host and GPU results are bit-identical.
#include "reduce/cuda_reduce.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "reduce/types.h"

namespace nexar {

namespace {

// Storage types of the 16-bit floats (raw bits, like the host side).
struct f16_bits { uint16_t v; };
struct bf16_bits { uint16_t v; };

template <class T> struct Compute { using type = T; };
template <> struct Compute<f16_bits> { using type = float; };
template <> struct Compute<bf16_bits> { using type = float; };

__device__ __forceinline__ float widen(f16_bits x) { return __half2float(__ushort_as_half(x.v)); }
__device__ __forceinline__ float widen(bf16_bits x) { return __bfloat162float(__ushort_as_bfloat16(x.v)); }
template <class T> __device__ __forceinline__ T widen(T x) { return x; }
template <class T> __device__ __forceinline__ T narrow(typename Compute<T>::type x, T*) { return T(x); }
__device__ __forceinline__ f16_bits narrow(float x, f16_bits*) { return {__half_as_ushort(__float2half_rn(x))}; }
__device__ __forceinline__ bf16_bits narrow(float x, bf16_bits*) { return {__bfloat16_as_ushort(__float2bfloat16_rn(x))}; }

// Integer SUM/PROD in the unsigned type: wrap-around without UB.
template <class T, bool = std::is_integral<T>::value> struct Arith { using type = T; };
template <class T> struct Arith<T, true> { using type = typename std::make_unsigned<T>::type; };

struct OpSum { template <class C> __device__ static C apply(C a, C b) { using A = typename Arith<C>::type; return C(A(a) + A(b)); } };
struct OpProd { template <class C> __device__ static C apply(C a, C b) { using A = typename Arith<C>::type; return C(A(a) * A(b)); } };
struct OpMin { template <class C> __device__ static C apply(C a, C b) { return b < a ? b : a; } };
struct OpMax { template <class C> __device__ static C apply(C a, C b) { return b > a ? b : a; } };
struct OpBand { template <class C> __device__ static C apply(C a, C b) { return C(a & b); } };
struct OpBor { template <class C> __device__ static C apply(C a, C b) { return C(a | b); } };
struct OpBxor { template <class C> __device__ static C apply(C a, C b) { return C(a ^ b); } };
struct OpLand { template <class C> __device__ static C apply(C a, C b) { return C((a != 0) & (b != 0)); } };
struct OpLor { template <class C> __device__ static C apply(C a, C b) { return C((a != 0) | (b != 0)); } };
struct OpLxor { template <class C> __device__ static C apply(C a, C b) { return C((a != 0) ^ (b != 0)); } };

template <class T, class Op>
__device__ __forceinline__ T combine(T a, T b) {
    T* tag = nullptr;
    return narrow(Op::template apply<typename Compute<T>::type>(widen(a), widen(b)), tag);
}

constexpr int kVecBytes = 16;
template <class T> struct alignas(kVecBytes) Vec { T v[kVecBytes / sizeof(T)]; };

template <class T, class Op>
__global__ void reduce_kernel(T* dst, const T* a, const T* b, size_t count, bool aligned) {
    constexpr size_t kPer = kVecBytes / sizeof(T);
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    size_t done = 0;
    if (aligned) {
        const size_t nvec = count / kPer;
        auto* dv = reinterpret_cast<Vec<T>*>(dst);
        auto* av = reinterpret_cast<const Vec<T>*>(a);
        auto* bv = reinterpret_cast<const Vec<T>*>(b);
        for (size_t i = tid; i < nvec; i += stride) {
            Vec<T> x = av[i], y = bv[i], r;
#pragma unroll
            for (size_t k = 0; k < kPer; ++k) r.v[k] = combine<T, Op>(x.v[k], y.v[k]);
            dv[i] = r;
        }
        done = nvec * kPer;
    }
    for (size_t i = done + tid; i < count; i += stride) dst[i] = combine<T, Op>(a[i], b[i]);
}

template <class T, class Op>
cudaError_t launch(void* dst, const void* a, const void* b, size_t count, cudaStream_t stream) {
    if (count == 0) return cudaSuccess;
    bool aligned = ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(a) |
                     reinterpret_cast<uintptr_t>(b)) % kVecBytes) == 0;
    constexpr int kThreads = 256;
    size_t per_thread = aligned ? kVecBytes / sizeof(T) : 1;
    size_t blocks = (count / per_thread + kThreads - 1) / kThreads;
    if (blocks == 0) blocks = 1;
    if (blocks > 4096) blocks = 4096;  // grid-stride beyond this
    reduce_kernel<T, Op><<<unsigned(blocks), kThreads, 0, stream>>>(static_cast<T*>(dst), static_cast<const T*>(a),
                                                                   static_cast<const T*>(b), count, aligned);
    return cudaGetLastError();
}

template <class T>
cudaError_t by_op(void* dst, const void* a, const void* b, size_t n, ReduceOp op, cudaStream_t s) {
    switch (op) {
        case ReduceOp::sum: return launch<T, OpSum>(dst, a, b, n, s);
        case ReduceOp::prod: return launch<T, OpProd>(dst, a, b, n, s);
        case ReduceOp::min: return launch<T, OpMin>(dst, a, b, n, s);
        case ReduceOp::max: return launch<T, OpMax>(dst, a, b, n, s);
        default: break;
    }
    if constexpr (std::is_integral<T>::value) {
        switch (op) {
            case ReduceOp::band: return launch<T, OpBand>(dst, a, b, n, s);
            case ReduceOp::bor: return launch<T, OpBor>(dst, a, b, n, s);
            case ReduceOp::bxor: return launch<T, OpBxor>(dst, a, b, n, s);
            case ReduceOp::land: return launch<T, OpLand>(dst, a, b, n, s);
            case ReduceOp::lor: return launch<T, OpLor>(dst, a, b, n, s);
            case ReduceOp::lxor: return launch<T, OpLxor>(dst, a, b, n, s);
            default: break;
        }
    }
    return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_reduce(void* dst, const void* a, const void* b, size_t count, int dtype, int op,
                          cudaStream_t stream) {
    ReduceOp o = ReduceOp(op);
    switch (DataType(dtype)) {
        case DataType::i8: return by_op<int8_t>(dst, a, b, count, o, stream);
        case DataType::i16: return by_op<int16_t>(dst, a, b, count, o, stream);
        case DataType::i32: return by_op<int32_t>(dst, a, b, count, o, stream);
        case DataType::i64: return by_op<int64_t>(dst, a, b, count, o, stream);
        case DataType::u8: return by_op<uint8_t>(dst, a, b, count, o, stream);
        case DataType::u16: return by_op<uint16_t>(dst, a, b, count, o, stream);
        case DataType::u32: return by_op<uint32_t>(dst, a, b, count, o, stream);
        case DataType::u64: return by_op<uint64_t>(dst, a, b, count, o, stream);
        case DataType::f32: return by_op<float>(dst, a, b, count, o, stream);
        case DataType::f64: return by_op<double>(dst, a, b, count, o, stream);
        case DataType::f16: return by_op<f16_bits>(dst, a, b, count, o, stream);
        case DataType::bf16: return by_op<bf16_bits>(dst, a, b, count, o, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace nexar
