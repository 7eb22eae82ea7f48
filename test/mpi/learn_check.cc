// The learnt threshold (NEXAR_THRESHOLD_BYTES=auto, the default), run with
// no NEXAR_* setting but the stats: for each collective and each size from
// 4 bytes up, more calls than a learning round takes, so that every size
// runs both paths (the trials) and then the one it settled on.
//
//   learn_check [--max BYTES] [--calls N] [--comm world|split] [--device]
//
// Every result is checked against values computed here (integer sums:
// exact).  After each size, every rank's path counters (nexar_get_counter)
// must have moved alike: the ranks took the same path on every call.  Below
// the floor (kAutoFloorBytes, 2 KiB, for reduce-scatters and allgathers;
// allreduces have none, kAutoAllreduceFloorBytes) no call may take the
// ring; from it, both paths must have run (the trials).  Prints the path each size settled
// on; every size must have settled by its last 4 calls.  Then the
// learner's hand-overs (a revisit, two datatypes in turn, communicators made
// and freed, MPI_COMM_SELF), and nonblocking calls, which are not learnt:
// MPI_Iallreduce takes nexar at 2 KiB only as the one-shot (one node, host
// buffers), and the ring at 16 and 128 KiB.  --comm split: on two communicators of MPI_COMM_WORLD's even and odd
// ranks' halves at once (4 ranks or more), which learn apart.  --device:
// every buffer is "device" memory of the host-emulated GPU that
// NEXAR_EMULATED_GPU_PLUGIN names (memory the plugin remembers, which the
// program may read and write as host memory), so that the device buffers'
// classes are learnt.
#include <dlfcn.h>
#include <mpi.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../own_mpi.h"
#include "memory/device_api.h"
#include "nexar/nexar.h"

namespace {

// The calls' buffers: host memory, or with --device the emulated GPU's.
class Buffer {
public:
    Buffer(size_t n, const nexar_device_api* device) : n_(n), device_(device) {
        void* p = nullptr;
        if (device ? device->alloc_device(&p, n * sizeof(int)) != 0 : !(p = calloc(n, sizeof(int)))) {
            fprintf(stderr, "FAIL: cannot allocate %zu ints\n", n);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        p_ = static_cast<int*>(p);
    }
    ~Buffer() { device_ ? device_->free_device(p_) : free(p_); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    int* data() { return p_; }
    int& operator[](size_t i) { return p_[i]; }
    void swap(Buffer& o) { std::swap(p_, o.p_); }

private:
    int* p_ = nullptr;
    size_t n_;
    const nexar_device_api* device_;
};

// --device: the emulated GPU's plugin, as nexar loads it.
const nexar_device_api* emulated_gpu() {
    const char* path = getenv("NEXAR_EMULATED_GPU_PLUGIN");
    void* h = path && *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    auto entry = h ? reinterpret_cast<nexar_device_api_entry>(dlsym(h, NEXAR_DEVICE_API_ENTRY)) : nullptr;
    if (!entry) {
        fprintf(stderr, "FAIL: --device: NEXAR_EMULATED_GPU_PLUGIN does not name the emulated GPU plugin\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return entry();
}

enum Coll { allreduce, allreduce_in_place, reduce_scatter_block, allgather, kColls };
const char* const kNames[] = {"MPI_Allreduce", "MPI_Allreduce (in place)", "MPI_Reduce_scatter_block",
                              "MPI_Allgather"};

struct Paths {
    uint64_t v[5] = {};  // ring, one-shot, hier, passed through, fallen back
};
const char* const kCounters[] = {"ring_calls", "one_shot_calls", "hier_calls", "passthrough_calls", "fallback_calls"};

Paths read_paths() {
    Paths p;
    for (int i = 0; i < 5; ++i)
        if (nexar_get_counter(kCounters[i], &p.v[i]) != 0) {
            fprintf(stderr, "FAIL: nexar_get_counter(%s) failed: is libnexar_pmpi loaded?\n", kCounters[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    return p;
}

int g_errors = 0;

// One call of `coll` with `n` ints per rank's block (allreduce: the whole
// vector), call number `k`; checks the result.
void one_call(Coll coll, MPI_Comm comm, size_t n, int k, Buffer& a, Buffer& b) {
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const size_t total = coll == allreduce || coll == allreduce_in_place ? n : n * size_t(size);
    const auto input = [&](int r, size_t i) { return int(r * 7 + int(i % 13) + k); };
    const auto sum = [&](size_t i) { return 7 * size * (size - 1) / 2 + size * (int(i % 13) + k); };
    int rc = MPI_SUCCESS;
    switch (coll) {
        case allreduce:
        case allreduce_in_place:
            for (size_t i = 0; i < total; ++i) a[i] = input(rank, i);
            if (coll == allreduce)
                rc = MPI_Allreduce(a.data(), b.data(), int(n), MPI_INT, MPI_SUM, comm);
            else
                rc = MPI_Allreduce(MPI_IN_PLACE, a.data(), int(n), MPI_INT, MPI_SUM, comm), b.swap(a);
            for (size_t i = 0; i < n && g_errors < 5; ++i)
                if (b[i] != sum(i)) {
                    fprintf(stderr, "FAIL [rank %d]: %s of %zu ints, call %d: [%zu] = %d, expected %d\n", rank,
                            kNames[coll], n, k, i, b[i], sum(i));
                    ++g_errors;
                    break;
                }
            if (coll == allreduce_in_place) b.swap(a);
            break;
        case reduce_scatter_block:
            for (size_t i = 0; i < total; ++i) a[i] = input(rank, i);
            rc = MPI_Reduce_scatter_block(a.data(), b.data(), int(n), MPI_INT, MPI_SUM, comm);
            for (size_t i = 0; i < n && g_errors < 5; ++i)
                if (b[i] != sum(size_t(rank) * n + i)) {
                    fprintf(stderr, "FAIL [rank %d]: %s of %zu ints, call %d: [%zu] = %d, expected %d\n", rank,
                            kNames[coll], n, k, i, b[i], sum(size_t(rank) * n + i));
                    ++g_errors;
                    break;
                }
            break;
        case allgather:
            for (size_t i = 0; i < n; ++i) a[i] = input(rank, i);
            rc = MPI_Allgather(a.data(), int(n), MPI_INT, b.data(), int(n), MPI_INT, comm);
            for (size_t i = 0; i < total && g_errors < 5; ++i)
                if (b[i] != input(int(i / n), i % n)) {
                    fprintf(stderr, "FAIL [rank %d]: %s of %zu ints, call %d: [%zu] = %d, expected %d\n", rank,
                            kNames[coll], n, k, i, b[i], input(int(i / n), i % n));
                    ++g_errors;
                    break;
                }
            break;
        default: break;
    }
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "FAIL [rank %d]: %s of %zu ints returned %d\n", rank, kNames[coll], n, rc);
        ++g_errors;
    }
}

// MPI_Allreduce of `n` items of MPI_INT or MPI_FLOAT (small integers: exact
// sums) on `comm`, call number `k`, checked.
void checked_allreduce(MPI_Comm comm, size_t n, int k, bool as_float, Buffer& a, Buffer& b) {
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    float* fa = reinterpret_cast<float*>(a.data());
    float* fb = reinterpret_cast<float*>(b.data());
    for (size_t i = 0; i < n; ++i) {
        const int v = rank * 7 + int(i % 13) + k % 100;
        if (as_float) fa[i] = float(v); else a[i] = v;
    }
    MPI_Allreduce(a.data(), b.data(), int(n), as_float ? MPI_FLOAT : MPI_INT, MPI_SUM, comm);
    for (size_t i = 0; i < n; ++i) {
        const int want = 7 * size * (size - 1) / 2 + size * (int(i % 13) + k % 100);
        const int got = as_float ? int(fb[i]) : b[i];
        if (got != want || (as_float && fb[i] != float(want))) {
            fprintf(stderr, "FAIL: MPI_Allreduce of %zu %s on a communicator of %d, call %d: [%zu] = %d, expected %d\n",
                    n, as_float ? "floats" : "ints", size, k, i, got, want);
            ++g_errors;
            return;
        }
    }
}

// Every rank of `comm` moved its path counters alike since `before`.
Paths same_paths_since(const Paths& before, MPI_Comm comm, const char* what) {
    static auto own_allreduce = own_mpi(PMPI_Allreduce);
    const Paths after = read_paths();
    Paths d, lo, hi;
    for (int i = 0; i < 5; ++i) d.v[i] = after.v[i] - before.v[i];
    own_allreduce(d.v, lo.v, 5, MPI_UINT64_T, MPI_MIN, comm);
    own_allreduce(d.v, hi.v, 5, MPI_UINT64_T, MPI_MAX, comm);
    for (int i = 0; i < 5; ++i)
        if (lo.v[i] != hi.v[i]) {
            fprintf(stderr, "FAIL: %s: ranks took different paths: %s from %" PRIu64 " to %" PRIu64 "\n", what,
                    kCounters[i], lo.v[i], hi.v[i]);
            ++g_errors;
        }
    return d;
}

std::string describe(const Paths& d) {
    std::string s;
    for (int i = 0; i < 5; ++i)
        if (d.v[i]) s += (s.empty() ? "" : "+") + std::string(kCounters[i]).substr(0, std::string(kCounters[i]).find("_calls"));
    return s.empty() ? "-" : s;
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    size_t max_bytes = 4u << 20;
    int calls = 24;
    bool split = false;
    const nexar_device_api* device = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--max") && i + 1 < argc) max_bytes = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--comm") && i + 1 < argc) split = !strcmp(argv[++i], "split");
        else if (!strcmp(argv[i], "--device")) device = emulated_gpu();
        else {
            fprintf(stderr, "usage: learn_check [--max BYTES] [--calls N] [--comm world|split] [--device]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    auto own_allreduce = own_mpi(PMPI_Allreduce);
    int world_rank = 0, world_size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm comm = MPI_COMM_WORLD;
    if (split) MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &comm);
    int size = 0, rank = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    const size_t floor_bytes = 2048;  // kAutoFloorBytes (allreduces: none)
    const size_t ints = max_bytes / sizeof(int) * size_t(size) + 16;
    Buffer a(ints, device), b(ints, device);
    for (int c = 0; c < kColls; ++c) {
        for (size_t bytes = 4; bytes <= max_bytes; bytes *= 4) {
            // The learner sizes a call by its whole vector.
            const bool is_allreduce = c == allreduce || c == allreduce_in_place;
            const size_t n = bytes / sizeof(int), vector = is_allreduce ? bytes : bytes * size_t(size);
            const size_t floor = is_allreduce ? 0 : floor_bytes;
            const Paths before = read_paths();
            Paths settled_from;
            for (int k = 0; k < calls; ++k) {
                if (k == calls - 4) settled_from = read_paths();
                one_call(Coll(c), comm, n, k, a, b);
            }
            const Paths after = read_paths();
            Paths all, last, lo, hi;
            for (int i = 0; i < 5; ++i) {
                all.v[i] = after.v[i] - before.v[i];
                last.v[i] = after.v[i] - settled_from.v[i];
            }
            // Every rank of the communicator alike (two halves learn apart).
            own_allreduce(all.v, lo.v, 5, MPI_UINT64_T, MPI_MIN, comm);
            own_allreduce(all.v, hi.v, 5, MPI_UINT64_T, MPI_MAX, comm);
            for (int i = 0; i < 5; ++i)
                if (lo.v[i] != hi.v[i]) {
                    fprintf(stderr, "FAIL [rank %d]: %s of %zu bytes: ranks took different paths: %s from %" PRIu64
                            " to %" PRIu64 " calls\n", world_rank, kNames[c], bytes, kCounters[i], lo.v[i], hi.v[i]);
                    ++g_errors;
                }
            const uint64_t to_ring = all.v[0], passed = all.v[3] + all.v[4];
            if (vector < floor && to_ring != 0) {
                fprintf(stderr, "FAIL [rank %d]: %s of %zu bytes, below the floor, took the ring %" PRIu64 " times\n",
                        world_rank, kNames[c], bytes, to_ring);
                ++g_errors;
            }
            if (vector >= floor && calls >= 16 && (to_ring == 0 || passed == 0)) {
                fprintf(stderr, "FAIL [rank %d]: %s of %zu bytes: the learner's trials did not run both paths "
                        "(ring %" PRIu64 ", MPI %" PRIu64 ")\n", world_rank, kNames[c], bytes, to_ring, passed);
                ++g_errors;
            }
            // A round is at most 16 calls: the last 4 went one way.
            if (calls >= 20 && (last.v[0] > 0) == (last.v[3] + last.v[4] > 0)) {
                fprintf(stderr, "FAIL [rank %d]: %s of %zu bytes: the last 4 calls did not settle on one path (%s)\n",
                        world_rank, kNames[c], bytes, describe(last).c_str());
                ++g_errors;
            }
            if (world_rank == 0)
                printf("%-26s %9zu bytes (vector %9zu): all calls %-24s last 4 calls %s\n", kNames[c], bytes, vector,
                       describe(all).c_str(), describe(last).c_str());
        }
    }
    // The learner's hand-overs: a class past its first revisit (the fast
    // path hands it back to the learner for a second round of trials,
    // with a second reduction), two datatypes in turn in one class (the
    // fast path's memory changes every call), a communicator made and freed
    // twice (a context goes, its pointer must not be used again), and
    // MPI_COMM_SELF (one rank: passes through at once).
    if (max_bytes >= (8u << 10)) {
        const size_t n = (8u << 10) / sizeof(int);
        Paths before = read_paths(), window_start;
        for (int k = 0; k < 330; ++k) {
            if (k == 256) window_start = read_paths();
            checked_allreduce(comm, n, 1000 + k, false, a, b);
        }
        const Paths all = same_paths_since(before, comm, "8 KiB, 330 calls");
        const Paths window = same_paths_since(window_start, comm, "8 KiB, calls 256-329");
        if (window.v[0] == 0 || window.v[3] + window.v[4] == 0) {
            fprintf(stderr, "FAIL [rank %d]: 8 KiB, calls 256-329: no second round of trials (%s)\n", world_rank,
                    describe(window).c_str());
            ++g_errors;
        }
        if (world_rank == 0)
            printf("%-26s %9u bytes, 330 calls: %s; calls 256-329 (the revisit): %s\n", "MPI_Allreduce", 8u << 10,
                   describe(all).c_str(), describe(window).c_str());
        before = read_paths();
        for (int k = 0; k < 40; ++k) checked_allreduce(comm, n, k, k % 2 == 1, a, b);
        same_paths_since(before, comm, "8 KiB, MPI_INT and MPI_FLOAT in turn");
        for (int round = 0; round < 2; ++round) {
            MPI_Comm dup;
            MPI_Comm_dup(comm, &dup);
            before = read_paths();
            for (int k = 0; k < 30; ++k) checked_allreduce(dup, n, k, false, a, b);
            same_paths_since(before, dup, "8 KiB on a new communicator");
            MPI_Comm_free(&dup);
        }
        before = read_paths();
        for (int k = 0; k < 30; ++k) checked_allreduce(MPI_COMM_SELF, n, k, false, a, b);
        const Paths self = same_paths_since(before, MPI_COMM_SELF, "MPI_COMM_SELF");
        if (self.v[0] != 0) {
            fprintf(stderr, "FAIL [rank %d]: MPI_COMM_SELF took the ring\n", world_rank);
            ++g_errors;
        }
    }
    // Nonblocking calls are not timed: under auto they take the ring from
    // 4 KiB (kAutoNonblockingBytes), and below only as the one-shot (host
    // buffers on a communicator of one node with its boards, at most
    // kMaxOneShotRanks, 16; within its limit: kOneShotBytes, 32 KiB, over
    // the ranks that read each input; both defaults: no NEXAR_* is set).
    MPI_Comm node_comm;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_comm);
    int node_size = 0;
    MPI_Comm_size(node_comm, &node_size);
    MPI_Comm_free(&node_comm);
    for (size_t bytes : {size_t(2) << 10, size_t(16) << 10, size_t(128) << 10}) {
        if (bytes > max_bytes) continue;
        const size_t n = bytes / sizeof(int);
        const Paths before = read_paths();
        for (int k = 0; k < 3; ++k) {
            for (size_t i = 0; i < n; ++i) a[i] = rank * 7 + int(i % 13) + k;
            MPI_Request req;
            MPI_Iallreduce(a.data(), b.data(), int(n), MPI_INT, MPI_SUM, comm, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            for (size_t i = 0; i < n; ++i)
                if (b[i] != 7 * size * (size - 1) / 2 + size * (int(i % 13) + k)) {
                    fprintf(stderr, "FAIL [rank %d]: MPI_Iallreduce of %zu bytes, call %d: [%zu] = %d\n", world_rank,
                            bytes, k, i, b[i]);
                    ++g_errors;
                    break;
                }
        }
        const bool one_shot = !device && node_size == size && size <= 16 && bytes * size_t(size - 1) <= (32u << 10);
        const uint64_t ring = read_paths().v[0] - before.v[0], want = bytes >= (4u << 10) || one_shot ? 3 : 0;
        if (ring != want) {
            fprintf(stderr, "FAIL [rank %d]: MPI_Iallreduce of %zu bytes: %" PRIu64 " of 3 calls took the ring, "
                    "expected %" PRIu64 "\n", world_rank, bytes, ring, want);
            ++g_errors;
        }
        if (world_rank == 0) printf("%-26s %9zu bytes: %" PRIu64 " of 3 calls took the ring\n", "MPI_Iallreduce", bytes, ring);
    }
    int errors = 0;
    own_allreduce(&g_errors, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (world_rank == 0)
        printf("learn_check: %d ranks%s%s, %d errors\n", world_size, split ? " (split)" : "",
               device ? " (device buffers)" : "", errors);
    if (split) MPI_Comm_free(&comm);
    MPI_Finalize();
    return errors ? 1 : 0;
}
