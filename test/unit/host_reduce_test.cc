// Every host reducer against a scalar reference written independently
// (wide arithmetic truncated to the type, std::min/std::max), in place and
// out of place, on odd lengths and misaligned starts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "reduce/host_reduce.h"

using namespace nexar;

namespace {

template <class T>
T reference(T a, T b, ReduceOp op) {
    if constexpr (std::is_integral<T>::value) {
        // Two's complement wrap: compute in 128 bits and keep the low bits.
        __int128 x = a, y = b;
        unsigned __int128 r = 0;
        switch (op) {
            case ReduceOp::sum: r = (unsigned __int128)(x + y); break;
            case ReduceOp::prod: r = (unsigned __int128)x * (unsigned __int128)y; break;
            case ReduceOp::min: return std::min(a, b);
            case ReduceOp::max: return std::max(a, b);
            case ReduceOp::band: return T(a & b);
            case ReduceOp::bor: return T(a | b);
            case ReduceOp::bxor: return T(a ^ b);
            case ReduceOp::land: return T(a && b);
            case ReduceOp::lor: return T(a || b);
            case ReduceOp::lxor: return T(!a != !b);
            default: ADD_FAILURE(); return 0;
        }
        using U = std::make_unsigned_t<T>;
        U low = U(r);
        T out;
        memcpy(&out, &low, sizeof out);
        return out;
    } else {
        switch (op) {
            case ReduceOp::sum: return a + b;
            case ReduceOp::prod: return a * b;
            case ReduceOp::min: return std::min(a, b);
            case ReduceOp::max: return std::max(a, b);
            default: ADD_FAILURE(); return 0;
        }
    }
}

template <class T>
void check_type_isa(HostIsa isa, DataType type);

template <class T>
T random_value(std::mt19937_64& rng) {
    if constexpr (std::is_integral<T>::value) {
        switch (rng() % 6) {
            case 0: return std::numeric_limits<T>::max();
            case 1: return std::numeric_limits<T>::min();
            case 2: return T(0);
            case 3: return T(rng() % 5);
            default: return T(rng());
        }
    } else {
        return T(std::uniform_real_distribution<double>(-1000, 1000)(rng));
    }
}

// Every build of the kernels this CPU runs (host_reduce_isa), each against
// the reference.
template <class T>
void check_type(DataType type) {
    for (HostIsa isa : {HostIsa::baseline, HostIsa::avx2, HostIsa::avx512}) {
        if (!host_isa_supported(isa)) continue;
        SCOPED_TRACE(host_isa_name(isa));
        check_type_isa<T>(isa, type);
    }
}

template <class T>
void check_type_isa(HostIsa isa, DataType type) {
    std::mt19937_64 rng(1234 + int(type));
    for (int opi = 0; opi < int(ReduceOp::count_); ++opi) {
        ReduceOp op = ReduceOp(opi);
        if (!op_supported(type, op)) {
            std::vector<T> d(4), a(4), b(4);
            EXPECT_EQ(host_reduce_isa(isa, d.data(), a.data(), b.data(), 4, type, op), Status::invalid_argument);
            continue;
        }
        for (size_t n : {0, 1, 2, 7, 31, 64, 1000, 4099}) {
            for (size_t misalign : {0, 1}) {
                std::vector<T> a(n + 1), b(n + 1), dst(n + 1, T(0)), inplace(n + 1);
                for (size_t i = 0; i < n + 1; ++i) a[i] = random_value<T>(rng), b[i] = random_value<T>(rng);
                inplace = a;
                ASSERT_EQ(host_reduce_isa(isa, dst.data() + misalign, a.data() + misalign, b.data() + misalign, n, type, op),
                          Status::ok);
                ASSERT_EQ(host_reduce_isa(isa, inplace.data() + misalign, inplace.data() + misalign, b.data() + misalign, n,
                                      type, op),
                          Status::ok);
                for (size_t i = 0; i < n; ++i) {
                    T want = reference(a[i + misalign], b[i + misalign], op);
                    // Bitwise equality: no tolerance, both are one operation.
                    ASSERT_EQ(memcmp(&dst[i + misalign], &want, sizeof(T)), 0)
                        << datatype_name(type) << " " << reduce_op_name(op) << " n=" << n << " i=" << i;
                    ASSERT_EQ(memcmp(&inplace[i + misalign], &want, sizeof(T)), 0)
                        << "in place " << datatype_name(type) << " " << reduce_op_name(op) << " i=" << i;
                }
                if (misalign) {
                    ASSERT_EQ(dst[0], T(0)) << "wrote before the start";
                }
            }
        }
    }
}

}  // namespace

TEST(HostReduce, Int8) { check_type<int8_t>(DataType::i8); }
TEST(HostReduce, Int16) { check_type<int16_t>(DataType::i16); }
TEST(HostReduce, Int32) { check_type<int32_t>(DataType::i32); }
TEST(HostReduce, Int64) { check_type<int64_t>(DataType::i64); }
TEST(HostReduce, UInt8) { check_type<uint8_t>(DataType::u8); }
TEST(HostReduce, UInt16) { check_type<uint16_t>(DataType::u16); }
TEST(HostReduce, UInt32) { check_type<uint32_t>(DataType::u32); }
TEST(HostReduce, UInt64) { check_type<uint64_t>(DataType::u64); }
TEST(HostReduce, Float) { check_type<float>(DataType::f32); }
TEST(HostReduce, Double) { check_type<double>(DataType::f64); }

TEST(HostReduce, BestBuildIsSupported) {
    EXPECT_TRUE(host_isa_supported(host_isa_best()));
    EXPECT_TRUE(host_isa_supported(HostIsa::baseline));
    float a = 1, b = 2, d = 0;
    ASSERT_EQ(host_reduce(&d, &a, &b, 1, DataType::f32, ReduceOp::sum), Status::ok);
    EXPECT_EQ(d, 3.f);
    std::printf("host reducers: %s build\n", host_isa_name(host_isa_best()));
}

TEST(HostReduce, TypeSizesAndSupport) {
    EXPECT_EQ(datatype_size(DataType::i8), 1u);
    EXPECT_EQ(datatype_size(DataType::u16), 2u);
    EXPECT_EQ(datatype_size(DataType::f32), 4u);
    EXPECT_EQ(datatype_size(DataType::i64), 8u);
    EXPECT_FALSE(op_supported(DataType::f64, ReduceOp::band));
    EXPECT_FALSE(op_supported(DataType::f32, ReduceOp::lxor));
    EXPECT_TRUE(op_supported(DataType::u8, ReduceOp::lxor));
}
