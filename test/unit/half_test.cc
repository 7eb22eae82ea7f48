// 16-bit floats: conversions checked exhaustively, reducers against an
// independent reference (exact arithmetic in double, then the nearest
// representable value found by search, ties to even).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "reduce/half.h"
#include "reduce/host_reduce.h"

using namespace nexar;

namespace {

bool is_nan16(uint16_t b, bool bf) {
    return bf ? ((b & 0x7f80) == 0x7f80 && (b & 0x7f)) : ((b & 0x7c00) == 0x7c00 && (b & 0x3ff));
}
float widen(uint16_t b, bool bf) { return bf ? to_float(bfloat16_t{b}) : to_float(float16_t{b}); }
uint16_t narrow(float f, bool bf) { return bf ? to_bfloat16(f).bits : to_float16(f).bits; }

// Non-negative finite values in increasing order, then the search.
std::vector<uint16_t> positives(bool bf) {
    std::vector<uint16_t> v;
    for (uint32_t b = 0; b < (bf ? 0x7f80u : 0x7c00u); ++b) v.push_back(uint16_t(b));
    return v;
}

uint16_t reference_round(double x, bool bf) {
    static const std::vector<uint16_t> pos16 = positives(false), posbf = positives(true);
    const auto& pos = bf ? posbf : pos16;
    uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    double a = std::fabs(x);
    double maxv = widen(pos.back(), bf), ulp_top = maxv - widen(uint16_t(pos.back() - 1), bf);
    if (a >= maxv + ulp_top / 2) return sign | (bf ? 0x7f80 : 0x7c00);  // overflow (tie goes to even = inf)
    auto it = std::lower_bound(pos.begin(), pos.end(), a, [&](uint16_t b, double v) { return widen(b, bf) < v; });
    if (it == pos.end()) return sign | pos.back();
    uint16_t hi = *it;
    if (widen(hi, bf) == a || it == pos.begin()) return sign | hi;
    uint16_t lo = uint16_t(hi - 1);
    double dlo = a - widen(lo, bf), dhi = widen(hi, bf) - a;
    if (dlo < dhi) return sign | lo;
    if (dhi < dlo) return sign | hi;
    return sign | ((lo & 1) ? hi : lo);
}

}  // namespace

TEST(Half, EveryValueRoundTrips) {
    for (bool bf : {false, true})
        for (uint32_t b = 0; b < 65536; ++b) {
            if (is_nan16(uint16_t(b), bf)) {
                ASSERT_TRUE(std::isnan(widen(uint16_t(b), bf)));
                ASSERT_TRUE(is_nan16(narrow(widen(uint16_t(b), bf), bf), bf)) << "nan must stay nan";
                continue;
            }
            ASSERT_EQ(narrow(widen(uint16_t(b), bf), bf), b) << (bf ? "bf16 " : "f16 ") << std::hex << b;
        }
}

TEST(Half, RoundsToNearestEvenAtEveryMidpoint) {
    for (bool bf : {false, true}) {
        uint32_t top = bf ? 0x7f7f : 0x7bff;  // below the largest finite value
        for (uint32_t b = 0; b < top; ++b) {
            float lo = widen(uint16_t(b), bf), hi = widen(uint16_t(b + 1), bf), mid = lo + (hi - lo) / 2;
            ASSERT_EQ(narrow(mid, bf), (b & 1) ? b + 1 : b) << std::hex << b;
            ASSERT_EQ(narrow(std::nextafter(mid, INFINITY), bf), b + 1) << std::hex << b;
            ASSERT_EQ(narrow(std::nextafter(mid, -INFINITY), bf), b) << std::hex << b;
            ASSERT_EQ(narrow(-mid, bf), ((b & 1) ? b + 1 : b) | 0x8000) << std::hex << b;
        }
    }
    EXPECT_EQ(to_float16(65520.0f).bits, 0x7c00);                        // tie above 65504: to inf
    EXPECT_EQ(to_float16(std::nextafter(65520.0f, 0.f)).bits, 0x7bff);  // just below: 65504
    EXPECT_EQ(to_float16(1e-9f).bits, 0);                                // underflow to zero
}

TEST(Half, ReducersMatchIndependentReference) {
    std::mt19937 rng(5);
    for (bool bf : {false, true}) {
        DataType type = bf ? DataType::bf16 : DataType::f16;
        const size_t n = 20000;
        std::vector<uint16_t> a(n), b(n), out(n);
        for (size_t i = 0; i < n; ++i) {
            do a[i] = uint16_t(rng()); while (is_nan16(a[i], bf) || std::isinf(widen(a[i], bf)));
            do b[i] = uint16_t(rng()); while (is_nan16(b[i], bf) || std::isinf(widen(b[i], bf)));
        }
        for (HostIsa isa : {HostIsa::baseline, HostIsa::avx2, HostIsa::avx512})
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
            if (!host_isa_supported(isa)) continue;
            SCOPED_TRACE(host_isa_name(isa));
            ASSERT_EQ(host_reduce_isa(isa, out.data(), a.data(), b.data(), n, type, op), Status::ok);
            for (size_t i = 0; i < n; ++i) {
                double x = widen(a[i], bf), y = widen(b[i], bf);
                double exact = op == ReduceOp::sum ? x + y : op == ReduceOp::prod ? x * y
                             : op == ReduceOp::min ? std::min(x, y) : std::max(x, y);
                uint16_t want = reference_round(exact, bf);
                if (exact == 0 && out[i] != want) want = out[i] & 0x8000 ? 0x8000 : 0;  // sign of zero is free
                ASSERT_EQ(out[i], want) << (bf ? "bf16 " : "f16 ") << reduce_op_name(op) << " " << x << " , " << y;
            }
        }
        EXPECT_EQ(host_reduce(out.data(), a.data(), b.data(), n, type, ReduceOp::band), Status::invalid_argument);
    }
}

// Infinities, NaNs (every payload), subnormals and overflow: the AVX builds
// (F16C conversions, vector compares) give exactly the baseline's bits, whose
// conversions the tests above check against IEEE rounding.
TEST(Half, EveryBuildMatchesBaselineOnSpecialValues) {
    for (bool bf : {false, true}) {
        DataType type = bf ? DataType::bf16 : DataType::f16;
        const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff,
                                     0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x7f80, 0xff80, 0x7fc0, 0x7f81,
                                     0x0080, 0x007f, 0x7f7f, 0x4b00, 0x3555};
        std::vector<uint16_t> a, b;
        for (uint32_t x = 0; x < 0x10000; ++x)
            for (uint16_t y : specials) a.push_back(uint16_t(x)), b.push_back(y);
        std::vector<uint16_t> want(a.size()), got(a.size());
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
            ASSERT_EQ(host_reduce_isa(HostIsa::baseline, want.data(), a.data(), b.data(), a.size(), type, op), Status::ok);
            for (HostIsa isa : {HostIsa::avx2, HostIsa::avx512}) {
                if (!host_isa_supported(isa)) continue;
                ASSERT_EQ(host_reduce_isa(isa, got.data(), a.data(), b.data(), a.size(), type, op), Status::ok);
                for (size_t i = 0; i < a.size(); ++i) {
                    // Which NaN operand's payload survives NaN op NaN is the
                    // compiler's choice (it may swap operands): any NaN will do.
                    if (is_nan16(want[i], bf) && is_nan16(got[i], bf)) continue;
                    ASSERT_EQ(got[i], want[i]) << (bf ? "bf16 " : "f16 ") << host_isa_name(isa) << " "
                                               << reduce_op_name(op) << std::hex << " a=" << a[i] << " b=" << b[i];
                }
            }
        }
    }
}
