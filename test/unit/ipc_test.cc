// The IPC layer of the device path: the cache of peers' allocations (with a
// stub driver that counts opens and closes), and the host-emulated GPU's
// IPC across a real process boundary (fork): memory, stale handles, events.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include "fake_device.h"
#include "memory/ipc_cache.h"

namespace {

// --- the cache, against a stub driver ---

struct StubDriver {
    static std::map<void*, uint64_t> open;  // mapped base -> buffer id
    static int opens, closes;
    static bool refuse;
    static char arena[1 << 16];
    static int next;
    static int ipc_open(const nexar_ipc_memory* in, void** base) {
        if (refuse) return 1;
        *base = arena + 4096 * (next++ % 16);
        open[*base] = in->buffer_id;
        ++opens;
        return 0;
    }
    static int ipc_close(void* base) {
        open.erase(base);
        ++closes;
        return 0;
    }
    static const char* error() { return "stub refused"; }
    static const nexar_device_api* api() {
        static nexar_device_api a = [] {
            nexar_device_api t;
            memset(&t, 0, sizeof t);
            t.version = NEXAR_DEVICE_API_VERSION;
            t.ipc_open_memory = ipc_open;
            t.ipc_close_memory = ipc_close;
            t.last_error = error;
            return t;
        }();
        return &a;
    }
    static void reset() { open.clear(), opens = closes = next = 0, refuse = false; }
};
std::map<void*, uint64_t> StubDriver::open;
int StubDriver::opens, StubDriver::closes, StubDriver::next;
bool StubDriver::refuse;
char StubDriver::arena[1 << 16];

nexar_ipc_memory described(uint64_t base, uint64_t id, uint64_t offset = 0, uint64_t bytes = 4096) {
    nexar_ipc_memory m;
    memset(&m, 0, sizeof m);
    m.base = base, m.buffer_id = id, m.offset = offset, m.bytes = bytes;
    return m;
}

TEST(PeerMemoryCache, OpensOnceAndServesRepeatsFromTheCache) {
    StubDriver::reset();
    std::string error;
    {
        nexar::PeerMemoryCache cache(StubDriver::api(), 8);
        char *a = nullptr, *b = nullptr;
        ASSERT_TRUE(ok(cache.map(1, described(0x10000, 7, 128), &a, &error))) << error;
        ASSERT_TRUE(ok(cache.map(1, described(0x10000, 7, 256), &b, &error))) << error;
        EXPECT_EQ(StubDriver::opens, 1);
        EXPECT_EQ(cache.hits(), 1u);
        EXPECT_EQ(b - a, 128);  // offsets within the one mapping
        // Another peer's allocation at the same address is another entry.
        ASSERT_TRUE(ok(cache.map(2, described(0x10000, 7), &a, &error)));
        EXPECT_EQ(StubDriver::opens, 2);
        EXPECT_EQ(cache.open_count(), 2u);
    }
    EXPECT_EQ(StubDriver::closes, 2);  // the cache closed what it opened
    EXPECT_TRUE(StubDriver::open.empty());
}

TEST(PeerMemoryCache, AFreedAndReusedAddressIsOpenedAgain) {
    StubDriver::reset();
    std::string error;
    nexar::PeerMemoryCache cache(StubDriver::api(), 8);
    char* p = nullptr;
    ASSERT_TRUE(ok(cache.map(1, described(0x10000, 7), &p, &error)));
    // The peer freed allocation 7; allocation 9 took its address.
    ASSERT_TRUE(ok(cache.map(1, described(0x10000, 9), &p, &error)));
    EXPECT_EQ(StubDriver::opens, 2);
    EXPECT_EQ(StubDriver::closes, 1);  // the stale mapping went
    EXPECT_EQ(cache.open_count(), 1u);
    ASSERT_EQ(StubDriver::open.size(), 1u);
    EXPECT_EQ(StubDriver::open.begin()->second, 9u);
    // A resized allocation with the same id (should not happen) is not trusted either.
    ASSERT_TRUE(ok(cache.map(1, described(0x10000, 9, 0, 8192), &p, &error)));
    EXPECT_EQ(StubDriver::opens, 3);
}

TEST(PeerMemoryCache, KeepsAtMostItsCapacityLeastRecentlyUsedGoingFirst) {
    StubDriver::reset();
    std::string error;
    nexar::PeerMemoryCache cache(StubDriver::api(), 2);
    char* p = nullptr;
    ASSERT_TRUE(ok(cache.map(1, described(0x1000, 1), &p, &error)));
    ASSERT_TRUE(ok(cache.map(1, described(0x2000, 2), &p, &error)));
    ASSERT_TRUE(ok(cache.map(1, described(0x1000, 1), &p, &error)));  // 1 is now the most recent
    ASSERT_TRUE(ok(cache.map(1, described(0x3000, 3), &p, &error)));  // evicts 2
    EXPECT_EQ(cache.open_count(), 2u);
    EXPECT_EQ(StubDriver::closes, 1);
    ASSERT_TRUE(ok(cache.map(1, described(0x1000, 1), &p, &error)));
    EXPECT_EQ(StubDriver::opens, 3);  // 1 was still open
    ASSERT_TRUE(ok(cache.map(1, described(0x2000, 2), &p, &error)));
    EXPECT_EQ(StubDriver::opens, 4);  // 2 had gone
}

TEST(PeerMemoryCache, RefusalsAndBadDescriptionsAreErrorsAndNotCached) {
    StubDriver::reset();
    std::string error;
    nexar::PeerMemoryCache cache(StubDriver::api(), 4);
    char* p = nullptr;
    StubDriver::refuse = true;
    EXPECT_EQ(cache.map(1, described(0x1000, 1), &p, &error), nexar::Status::unavailable);
    EXPECT_NE(error.find("stub refused"), std::string::npos) << error;
    EXPECT_EQ(cache.open_count(), 0u);
    StubDriver::refuse = false;
    EXPECT_EQ(cache.map(1, described(0x1000, 1, 4096, 4096), &p, &error), nexar::Status::invalid_argument);
    EXPECT_EQ(StubDriver::opens, 0);
}

TEST(PeerMemoryCache, ForgettingAPeerClosesOnlyItsAllocations) {
    StubDriver::reset();
    std::string error;
    nexar::PeerMemoryCache cache(StubDriver::api(), 8);
    char* p = nullptr;
    ASSERT_TRUE(ok(cache.map(1, described(0x1000, 1), &p, &error)));
    ASSERT_TRUE(ok(cache.map(2, described(0x1000, 1), &p, &error)));
    ASSERT_TRUE(ok(cache.map(1, described(0x2000, 2), &p, &error)));
    cache.forget_peer(1);
    EXPECT_EQ(cache.open_count(), 1u);
    EXPECT_EQ(StubDriver::closes, 2);
}

// --- the host-emulated GPU's IPC, across fork ---

// Runs `child` in a forked process; its exit status is the test's verdict
// there (0: passed).  The parent waits for it.
template <typename F>
int in_child(F child) {
    pid_t pid = fork();
    if (pid == 0) _exit(child());
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

TEST(EmulatedIpc, AnotherProcessReadsAndWritesTheExportedMemory) {
    const nexar_device_api* api = fake_device::api();
    void* buf = nullptr;
    ASSERT_EQ(api->alloc_device(&buf, 1 << 20), 0);
    auto* bytes = static_cast<unsigned char*>(buf);
    for (int i = 0; i < (1 << 20); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
    nexar_ipc_memory mem;
    ASSERT_EQ(api->ipc_export_memory(bytes + 1000, &mem), 0);
    EXPECT_EQ(mem.offset, 1000u);
    EXPECT_EQ(mem.bytes, uint64_t(1) << 20);
    EXPECT_NE(mem.buffer_id, 0u);
    int rc = in_child([&] {
        // A new mapping of the same memory, not the parent's (fork) mapping.
        nexar::PeerMemoryCache cache(api, 4);
        std::string error;
        char* p = nullptr;
        if (!ok(cache.map(0, mem, &p, &error))) return 2;
        if (p == reinterpret_cast<char*>(bytes) + 1000) return 3;
        int kind = -1, dev = -1;
        if (api->pointer_kind(p, &kind, &dev) != 0 || kind != NEXAR_MEM_DEVICE) return 4;
        for (int i = 0; i < 1000; ++i)
            if (static_cast<unsigned char>(p[i]) != static_cast<unsigned char>((i + 1000) * 7)) return 5;
        memset(p, 0xab, 64);  // written through the IPC mapping
        return 0;
    });
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(bytes[1000], 0xab);
    EXPECT_EQ(bytes[1063], 0xab);
    EXPECT_EQ(bytes[1064], static_cast<unsigned char>(1064 * 7));
    api->free_device(buf);
}

TEST(EmulatedIpc, AFreedAllocationsHandleNoLongerOpens) {
    const nexar_device_api* api = fake_device::api();
    void* buf = nullptr;
    ASSERT_EQ(api->alloc_device(&buf, 4096), 0);
    nexar_ipc_memory mem;
    ASSERT_EQ(api->ipc_export_memory(buf, &mem), 0);
    api->free_device(buf);
    void* other = nullptr;  // may take the freed memfd's number
    ASSERT_EQ(api->alloc_device(&other, 4096), 0);
    nexar_ipc_memory now;
    ASSERT_EQ(api->ipc_export_memory(other, &now), 0);
    EXPECT_NE(now.buffer_id, mem.buffer_id);
    int rc = in_child([&] {
        void* base = nullptr;
        return api->ipc_open_memory(&mem, &base) == 0 ? 1 : 0;  // stale: must fail
    });
    EXPECT_EQ(rc, 0);
    // Host memory is not exportable.
    char host[64];
    EXPECT_NE(api->ipc_export_memory(host, &mem), 0);
    api->free_device(other);
}

TEST(EmulatedIpc, AStreamWaitsForAnotherProcesssEvent) {
    const nexar_device_api* api = fake_device::api();
    void *buf = nullptr, *event = nullptr, *stream = nullptr;
    ASSERT_EQ(api->alloc_device(&buf, 4096), 0);
    memset(buf, 0, 4096);
    unsigned char handle[NEXAR_IPC_HANDLE_BYTES];
    ASSERT_EQ(api->ipc_event_create(&event, handle), 0);
    ASSERT_EQ(api->stream_create(&stream), 0);
    nexar_ipc_memory mem;
    ASSERT_EQ(api->ipc_export_memory(buf, &mem), 0);
    // Parent: keeps its stream busy with large copies (tens of ms, where the
    // child needs a few to queue its copy), writes 42, then records the
    // event; the child's stream waits for the event before copying what it
    // finds: 0 without the wait.
    const size_t big = size_t(64) << 20;
    void *from = nullptr, *to = nullptr;
    ASSERT_EQ(api->alloc_device(&from, big), 0);
    ASSERT_EQ(api->alloc_device(&to, big), 0);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(api->memcpy_async(to, from, big, stream), 0);
    static const int value = 42;
    ASSERT_EQ(api->memcpy_async(buf, &value, sizeof value, stream), 0);
    ASSERT_EQ(api->event_record(event, stream), 0);
    int rc = in_child([&] {
        void *ev = nullptr, *s = nullptr, *base = nullptr;
        if (api->ipc_event_open(handle, &ev) != 0 || api->stream_create(&s) != 0) return 2;
        if (api->ipc_open_memory(&mem, &base) != 0) return 3;
        int seen = -1;
        if (api->stream_wait_event(s, ev) != 0) return 4;
        if (api->memcpy_async(&seen, base, sizeof seen, s) != 0) return 5;
        api->stream_synchronize(s);
        api->stream_destroy(s);
        api->event_destroy(ev);
        api->ipc_close_memory(base);
        return seen == 42 ? 0 : 6;
    });
    EXPECT_EQ(rc, 0) << "6: the child's copy ran before the event it waited for";
    api->stream_synchronize(stream);
    api->stream_destroy(stream);
    api->event_destroy(event);
    api->free_device(buf);
    api->free_device(from);
    api->free_device(to);
}

}  // namespace
