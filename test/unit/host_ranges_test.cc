// Host memory told without the GPU's driver (memory/host_ranges.h): the
// stack and the brk heap are; a fresh mapping is not known to be.
#include "memory/host_ranges.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdlib>
#include <thread>

namespace nexar {
namespace {

int g_static_value = 1;

TEST(HostRanges, StackDataAndHeapAreHost) {
    int on_stack = 0;
    EXPECT_TRUE(surely_host(&on_stack));
    EXPECT_TRUE(surely_host(&g_static_value));
    void* small = malloc(64);  // glibc: from the brk heap on the main thread
    EXPECT_TRUE(surely_host(small));
    free(small);
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
