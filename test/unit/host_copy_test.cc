// copy_streaming and copy_twice (memory/host_copy.h) against memcpy: every
// alignment of the destination and the source within a line, lengths around
// the line size and a large one, and no byte written outside the
// destination(s).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "memory/host_copy.h"

namespace nexar {
namespace {

void check_copy(size_t dst_offset, size_t src_offset, size_t bytes, bool streaming) {
    const size_t guard = 128;
    std::vector<uint8_t> src(src_offset + bytes + guard), dst(dst_offset + bytes + 2 * guard, 0xA5);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 131 + 7);
    uint8_t* d = dst.data() + guard + dst_offset;
    copy_result(d, src.data() + src_offset, bytes, streaming);
    ASSERT_EQ(memcmp(d, src.data() + src_offset, bytes), 0)
        << "dst_offset=" << dst_offset << " src_offset=" << src_offset << " bytes=" << bytes;
    for (size_t i = 0; i < guard + dst_offset; ++i) ASSERT_EQ(dst[i], 0xA5) << "written before the destination";
    for (size_t i = guard + dst_offset + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xA5) << "written past it";
}

// copy_twice: both destinations, each with its own alignment.
void check_copy_twice(size_t cached_offset, size_t result_offset, size_t src_offset, size_t bytes, bool streaming) {
    const size_t guard = 128;
    std::vector<uint8_t> src(src_offset + bytes + guard), cached(cached_offset + bytes + 2 * guard, 0x5A),
        result(result_offset + bytes + 2 * guard, 0xA5);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 29 + 3);
    uint8_t* c = cached.data() + guard + cached_offset;
    uint8_t* r = result.data() + guard + result_offset;
    copy_twice(c, r, src.data() + src_offset, bytes, streaming);
    SCOPED_TRACE("cached_offset=" + std::to_string(cached_offset) + " result_offset=" + std::to_string(result_offset) +
                 " src_offset=" + std::to_string(src_offset) + " bytes=" + std::to_string(bytes));
    ASSERT_EQ(memcmp(c, src.data() + src_offset, bytes), 0);
    ASSERT_EQ(memcmp(r, src.data() + src_offset, bytes), 0);
    for (size_t i = 0; i < guard + cached_offset; ++i) ASSERT_EQ(cached[i], 0x5A) << "written before the copy";
    for (size_t i = guard + cached_offset + bytes; i < cached.size(); ++i) ASSERT_EQ(cached[i], 0x5A) << "past it";
    for (size_t i = 0; i < guard + result_offset; ++i) ASSERT_EQ(result[i], 0xA5) << "written before the result";
    for (size_t i = guard + result_offset + bytes; i < result.size(); ++i) ASSERT_EQ(result[i], 0xA5) << "past it";
}

TEST(HostCopy, CopyTwiceMatchesMemcpyAtEveryAlignment) {
    for (bool streaming : {true, false})
        for (size_t result_offset = 0; result_offset < 64; result_offset += 5)
            for (size_t cached_offset : {0, 7, 32})
                for (size_t src_offset : {0, 1, 40})
                    for (size_t bytes : {0, 1, 63, 64, 65, 129, 4099})
                        check_copy_twice(cached_offset, result_offset, src_offset, bytes, streaming);
    check_copy_twice(3, 9, 1, (size_t(1) << 20) + 77, true);
}

TEST(HostCopy, StreamingMatchesMemcpyAtEveryAlignment) {
    for (size_t dst_offset = 0; dst_offset < 64; dst_offset += 3)
        for (size_t src_offset : {0, 1, 8, 33})
            for (size_t bytes : {0, 1, 15, 63, 64, 65, 127, 128, 129, 200, 4099})
                check_copy(dst_offset, src_offset, bytes, true);
}

TEST(HostCopy, LargeCopiesBothWays) {
    for (bool streaming : {false, true}) {
        check_copy(0, 0, (size_t(1) << 20) + 77, streaming);
        check_copy(5, 3, 3 * (size_t(1) << 20) + 1, streaming);
    }
}

}  // namespace
}  // namespace nexar
