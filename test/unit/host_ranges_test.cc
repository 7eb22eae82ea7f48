// Host memory told without the GPU's driver (memory/host_ranges.h): the
// stack and the brk heap are; a fresh mapping is not known to be.
#include "memory/host_ranges.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

namespace nexar {
namespace {

int g_static_value = 1;

TEST(HostRanges, StackDataAndHeapAreHost) {
    int on_stack = 0;
    EXPECT_TRUE(surely_host(&on_stack));
    EXPECT_TRUE(surely_host(&g_static_value));
    // The brk heap as far as the break: glibc's malloc takes small blocks
    // from it on the main thread, unless the heap could not grow (a mapping
    // right above it, as earlier tests may leave) and it took a mapping.
    void* grown = sbrk(64);
    ASSERT_NE(grown, reinterpret_cast<void*>(-1));
    EXPECT_TRUE(surely_host(grown));
    EXPECT_TRUE(surely_host(static_cast<char*>(grown) + 63));
    sbrk(-64);
}

TEST(HostRanges, OtherThreadsStacksToo) {
    bool seen = false;
    std::thread t([&] {
        int on_stack = 0;
        seen = surely_host(&on_stack);
    });
    t.join();
    EXPECT_TRUE(seen);
}

TEST(HostRanges, MappingsAreLeftToTheDriver) {
    const size_t bytes = 1 << 20;
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    EXPECT_FALSE(surely_host(m));  // a GPU allocation would be such a mapping
    munmap(m, bytes);
    EXPECT_FALSE(surely_host(nullptr));
}

}  // namespace
}  // namespace nexar
