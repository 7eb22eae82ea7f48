#include "memory/host_ranges.h"

#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// glibc's current break, which its brk and sbrk keep (and UCX's memory hooks
// with them).  Read, not asked: sbrk(0) goes through UCX's hook, a system
// call.  Weak: a C library without it leaves the heap to the driver.
extern "C" void* __curbrk __attribute__((weak));

namespace nexar {

namespace {

// The kernel's start_data (/proc/self/stat, field 45): the program's
// initialized data begin there, then its bss, then the brk heap, one range
// up to the current break.  GPU allocations are mappings elsewhere.  0 where
// it cannot be read.
uintptr_t read_start_data() {
    char buf[2048];
    FILE* f = fopen("/proc/self/stat", "r");
    if (!f) return 0;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char* p = strrchr(buf, ')');  // "pid (comm) S ...": comm may hold anything
    if (!p) return 0;
    ++p;
    // Field 3 (the state) is the first after the name; start_data is 45.
    for (int field = 3; field < 45; ++field) {
        p = strchr(p + 1, ' ');
        if (!p) return 0;
    }
    return uintptr_t(strtoull(p + 1, nullptr, 10));
}

struct Stack {
    bool known = false;
    uintptr_t lo = 0, hi = 0;
};

const Stack& thread_stack() {
    thread_local Stack s;
    if (!s.known) {
        s.known = true;
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            void* addr = nullptr;
            size_t size = 0;
            if (pthread_attr_getstack(&attr, &addr, &size) == 0) s.lo = uintptr_t(addr), s.hi = s.lo + size;
            pthread_attr_destroy(&attr);
        }
    }
    return s;
}

}  // namespace

bool surely_host(const void* p) {
    static const uintptr_t data_start = &__curbrk ? read_start_data() : 0;
    const uintptr_t a = uintptr_t(p);
    if (data_start && a >= data_start && a < uintptr_t(__atomic_load_n(&__curbrk, __ATOMIC_RELAXED))) return true;
    const Stack& s = thread_stack();
    return a >= s.lo && a < s.hi;
}

}  // namespace nexar
