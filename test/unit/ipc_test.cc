// The IPC layer of the device path: the cache of peers' allocations (with a
// stub driver that counts opens and closes), and the host-emulated GPU's
// IPC across a real process boundary (fork): memory, stale handles, events.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include <sys/mman.h>

#include <chrono>
#include <new>
#include <vector>

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "algo/ipc_allreduce.h"
#include "fake_device.h"
#include "memory/fd_handle.h"
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

// --- taking another process's descriptor (memory/fd_handle.h) ---

// A child that holds a memfd holding "nexar" until told to go; its pid
// and the descriptor's number come back through a pipe.
struct Holder {
    pid_t pid = -1;
    int fd = -1;
    int go[2] = {-1, -1};
    explicit Holder(bool dumpable) {
        int info[2];
        if (pipe(info) != 0 || pipe(go) != 0) return;
        pid = fork();
        if (pid == 0) {
            if (!dumpable) prctl(PR_SET_DUMPABLE, 0);
            int m = memfd_create("nexar-test", 0);
            if (m < 0 || write(m, "nexar", 5) != 5) _exit(1);
            if (write(info[1], &m, sizeof m) != sizeof m) _exit(1);
            char c;
            if (read(go[0], &c, 1) < 0) _exit(1);
            _exit(0);
        }
        if (read(info[0], &fd, sizeof fd) != sizeof fd) fd = -1;
        close(info[0]), close(info[1]);
    }
    ~Holder() {
        if (write(go[1], "x", 1) < 0) {}
        if (pid > 0) waitpid(pid, nullptr, 0);
        close(go[0]), close(go[1]);
    }
};

bool reads_nexar(int fd) {
    char got[6] = {0};
    return pread(fd, got, 5, 0) == 5 && strcmp(got, "nexar") == 0;
}

TEST(FdHandle, APeerTakesAnotherProcesssDescriptor) {
    Holder holder(true);
    ASSERT_GE(holder.fd, 0);
    const int fd = nexar::take_descriptor(holder.pid, holder.fd);
    if (fd < 0 && errno == ENOSYS) GTEST_SKIP() << "pidfd_getfd needs Linux 5.6";
    ASSERT_GE(fd, 0) << strerror(errno);
    EXPECT_TRUE(reads_nexar(fd));
    close(fd);
}

// Where the ptrace rules refuse it (here: a non-dumpable owner and a
// taker without CAP_SYS_PTRACE), it fails: the IPC set-up's probe then
// keeps descriptor-exported memory on the staged ring.
TEST(FdHandle, RefusedWithoutTheRightToPtraceTheOwner) {
    Holder holder(false);
    ASSERT_GE(holder.fd, 0);
    const int rc = in_child([&] {
        __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct caps[2];
        if (syscall(SYS_capget, &header, caps) != 0) return 2;
        caps[0].effective &= ~(1u << CAP_SYS_PTRACE);
        caps[0].permitted &= ~(1u << CAP_SYS_PTRACE);
        if (syscall(SYS_capset, &header, caps) != 0) return 3;
        const int fd = nexar::take_descriptor(holder.pid, holder.fd);
        if (fd < 0 && errno == ENOSYS) return 0;  // no pidfd_getfd: refused all the same
        return fd < 0 && errno == EPERM ? 0 : 4;
    });
    if (rc == 2 || rc == 3) GTEST_SKIP() << "this process may not drop CAP_SYS_PTRACE (capget/capset refused)";
    EXPECT_EQ(rc, 0) << "the descriptor was taken";
}

// --- the IPC allreduce, between processes on the emulated GPU ---

// What the processes of one test share: their boards and event handles.
struct Shared {
    nexar::IpcBoard boards[4];
    unsigned char input[4][NEXAR_IPC_HANDLE_BYTES], done[4][NEXAR_IPC_HANDLE_BYTES];
    std::atomic<int> handles_set{0};
};

// Rank `me` of `n`: three calls (out of place, out of place with new values,
// in place) of `count` items, each checked against sums it computes itself.
// Returns 0 when every item of every call was right.  `halves`: each call
// as the hierarchical allreduce's node phases run it, the reduce-scatter,
// then this rank's chunk doubled late through the stream (a stand-in for
// the ring across nodes), then the allgather, which must carry the doubled
// chunk.
int ipc_rank(Shared* sh, int n, int me, size_t count, nexar::DataType type, nexar::ReduceOp op, bool halves) {
    const nexar_device_api* api = fake_device::api();
    const size_t elem = nexar::datatype_size(type);
    void *send = nullptr, *recv = nullptr, *stream = nullptr, *finished = nullptr;
    nexar::IpcPeers peers;
    peers.api = api, peers.me = me;
    nexar::PeerMemoryCache cache(api, 16);
    peers.cache = &cache;
    if (api->alloc_device(&send, count * elem) || api->alloc_device(&recv, count * elem)) return 10;
    if (api->stream_create(&stream) || api->event_create(&finished)) return 11;
    peers.stream = stream, peers.finished = finished;
    peers.events.resize(size_t(n));
    for (int r = 0; r < n; ++r) peers.boards.push_back(&sh->boards[r]);
    if (api->ipc_event_create(&peers.events[size_t(me)].input, sh->input[me]) ||
        api->ipc_event_create(&peers.events[size_t(me)].done, sh->done[me]))
        return 12;
    sh->handles_set.fetch_add(1);
    while (sh->handles_set.load() < n) usleep(100);
    for (int r = 0; r < n; ++r)
        if (r != me && (api->ipc_event_open(sh->input[r], &peers.events[size_t(r)].input) ||
                        api->ipc_event_open(sh->done[r], &peers.events[size_t(r)].done)))
            return 13;
    // value(rank, i, call): small integers, exact in every type.
    auto value = [](int rank, size_t i, int call) { return int64_t((rank + 1) * (call + 2) + int64_t(i % 13)); };
    auto put = [&](void* buf, size_t i, int64_t v) {
        if (type == nexar::DataType::f32) static_cast<float*>(buf)[i] = float(v);
        else if (type == nexar::DataType::f64) static_cast<double*>(buf)[i] = double(v);
        else static_cast<int32_t*>(buf)[i] = int32_t(v);
    };
    auto get = [&](const void* buf, size_t i) -> int64_t {
        if (type == nexar::DataType::f32) return int64_t(static_cast<const float*>(buf)[i]);
        if (type == nexar::DataType::f64) return int64_t(static_cast<const double*>(buf)[i]);
        return static_cast<const int32_t*>(buf)[i];
    };
    // The input reaches the "GPU" through the stream, late (after a large
    // copy): a peer that read it without waiting for this rank's input
    // event would read the previous call's values.
    std::vector<char> staging(count * elem);
    void *slow_from = nullptr, *slow_to = nullptr;
    const size_t slow = size_t(8) << 20;
    if (api->alloc_device(&slow_from, slow) || api->alloc_device(&slow_to, slow)) return 18;
    for (int call = 0; call < 3; ++call) {
        const bool in_place = call == 2;
        void* input = in_place ? recv : send;
        for (size_t i = 0; i < count; ++i) put(staging.data(), i, value(me, i, call));
        if (!in_place) memset(recv, 0xff, count * elem);
        if (api->memcpy_async(slow_to, slow_from, slow, stream) ||
            api->memcpy_async(input, staging.data(), count * elem, stream))
            return 19;
        nexar_ipc_memory input_ipc, recv_ipc;
        if (api->ipc_export_memory(input, &input_ipc) || api->ipc_export_memory(recv, &recv_ipc)) return 20;
        std::string error;
        auto run_to_end = [&](nexar::IpcAllreduce& run) {
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
            while (!run.finished()) {
                bool moved = false;
                if (!ok(run.poll(&moved, &error))) return fprintf(stderr, "rank %d: %s\n", me, error.c_str()), 14;
                if (std::chrono::steady_clock::now() > deadline)
                    return fprintf(stderr, "rank %d: call %d stuck waiting for rank %d\n", me, call,
                                   run.waiting_for()), 15;
            }
            return 0;
        };
        auto want = [&](size_t i) {
            int64_t w = value(0, i, call);
            for (int r = 1; r < n; ++r)
                w = op == nexar::ReduceOp::max ? std::max(w, value(r, i, call)) : w + value(r, i, call);
            return w;
        };
        const int scale = halves ? 2 : 1;
        if (!halves) {
            nexar::IpcAllreduce run(peers, uint64_t(call + 1), input, recv, input_ipc, recv_ipc, count, type, op);
            if (int rc = run_to_end(run)) return rc;
        } else {
            nexar::IpcAllreduce scatter(peers, uint64_t(2 * call + 1), input, recv, input_ipc, recv_ipc, count, type,
                                        op, nexar::IpcPart::reduce_scatter);
            if (int rc = run_to_end(scatter)) return rc;
            const size_t begin = nexar::IpcAllreduce::chunk_begin(count, me, n);
            const size_t end = nexar::IpcAllreduce::chunk_begin(count, me + 1, n);
            for (size_t i = 0; i < count; ++i) {
                const bool mine = i >= begin && i < end;
                // Out of place, the others' chunks are not written here (0xff bytes).
                if (!mine && !in_place) {
                    if (static_cast<unsigned char*>(recv)[i * elem] != 0xff)
                        return fprintf(stderr, "rank %d call %d item %zu: written by the reduce-scatter\n", me, call,
                                       i), 22;
                    continue;
                }
                const int64_t expected = mine ? want(i) : value(me, i, call);
                if (get(recv, i) != expected)
                    return fprintf(stderr, "rank %d call %d item %zu after the reduce-scatter: %lld, want %lld\n", me,
                                   call, i, (long long)get(recv, i), (long long)expected), 21;
            }
            for (size_t i = begin; i < end; ++i) put(staging.data(), i - begin, 2 * want(i));
            if (api->memcpy_async(slow_to, slow_from, slow, stream) ||
                api->memcpy_async(static_cast<char*>(recv) + begin * elem, staging.data(), (end - begin) * elem,
                                  stream))
                return 19;
            nexar::IpcAllreduce gather(peers, uint64_t(2 * call + 2), recv, recv, recv_ipc, recv_ipc, count, type, op,
                                       nexar::IpcPart::allgather);
            if (int rc = run_to_end(gather)) return rc;
        }
        for (size_t i = 0; i < count; ++i)
            if (get(recv, i) != scale * want(i))
                return fprintf(stderr, "rank %d call %d item %zu: %lld, want %lld\n", me, call, i,
                               (long long)get(recv, i), (long long)(scale * want(i))), 16;
    }
    // Three calls, each rank's two buffers: each peer's allocation opened once.
    if (cache.opens() != uint64_t(2 * (n - 1))) return fprintf(stderr, "rank %d: %llu opens\n", me, (unsigned long long)cache.opens()), 17;
    return 0;
}

// Runs ranks 0..n-1 as processes; the test passes when all exit 0.
void run_ipc_ranks(int n, size_t count, nexar::DataType type, nexar::ReduceOp op, bool halves = false) {
    void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    Shared* sh = new (mem) Shared;
    std::vector<pid_t> pids;
    for (int r = 0; r < n; ++r) {
        pid_t pid = fork();
        if (pid == 0) _exit(ipc_rank(sh, n, r, count, type, op, halves));
        pids.push_back(pid);
    }
    for (int r = 0; r < n; ++r) {
        int status = 0;
        waitpid(pids[size_t(r)], &status, 0);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
            << "rank " << r << " of " << n << ": " << (WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
    }
    munmap(mem, sizeof(Shared));
}

TEST(IpcAllreduce, TwoRanksFloatSum) { run_ipc_ranks(2, 100003, nexar::DataType::f32, nexar::ReduceOp::sum); }
TEST(IpcAllreduce, ThreeRanksDoubleSum) { run_ipc_ranks(3, 65537, nexar::DataType::f64, nexar::ReduceOp::sum); }
TEST(IpcAllreduce, FourRanksIntMax) { run_ipc_ranks(4, 4099, nexar::DataType::i32, nexar::ReduceOp::max); }
TEST(IpcAllreduce, FewerItemsThanRanks) { run_ipc_ranks(3, 2, nexar::DataType::f32, nexar::ReduceOp::sum); }
// The hierarchical allreduce's node phases: each half alone.
TEST(IpcAllreduce, HalvesTwoRanksFloatSum) {
    run_ipc_ranks(2, 100003, nexar::DataType::f32, nexar::ReduceOp::sum, true);
}
TEST(IpcAllreduce, HalvesThreeRanksIntMax) { run_ipc_ranks(3, 4099, nexar::DataType::i32, nexar::ReduceOp::max, true); }
TEST(IpcAllreduce, HalvesFewerItemsThanRanks) {
    run_ipc_ranks(3, 2, nexar::DataType::f64, nexar::ReduceOp::sum, true);
}

}  // namespace
