// MPI test of nexar's nonblocking collectives (MPI_Iallreduce,
// MPI_Ireduce_scatter_block, MPI_Ireduce_scatter, MPI_Iallgather): every
// result against the MPI's own blocking call on the same input
// (own_mpi(PMPI_*)) and against a local reference (inputs are small
// integers, so every sum is exact).  Linked with -lnexar_pmpi; run with
// NEXAR_HOST_BUFFERS=1 NEXAR_THRESHOLD_BYTES=0 so that every call may take
// the ring.
//
//   nonblocking_check [--rounds N] [--seed S] [--threads] [--expect-ring 0|1|mpi] [--idle S]
//
// Each round starts a batch of nexar's calls on two communicators (a dup of
// MPI_COMM_WORLD and another one, both set up by a blocking call first),
// with MPI's own requests (a ring of MPI_Isend/MPI_Irecv, an MPI_Ibarrier)
// in the same array, and completes the array with one of the completion
// calls, in turn: MPI_Wait one by one (last first), MPI_Waitall,
// MPI_Waitany, MPI_Waitsome, MPI_Test, MPI_Testall, MPI_Testany,
// MPI_Testsome, MPI_Request_get_status then MPI_Wait, and MPI_Request_free
// for one of nexar's (its result is checked after a blocking collective on
// the same communicator, which nexar orders after it; only with
// --expect-ring 1: MPI calls it erroneous).  Odd ranks start the
// two communicators' calls in the opposite order to even ranks.  Then:
// many calls in flight on one communicator; calls started and waited on in a
// tight loop; calls on a communicator MPI_Comm_split made (nexar sets its
// ring up then) and on one MPI_Comm_create_group made (no ring: they pass
// through); persistent calls (MPI_Allreduce_init, or Open MPI 4's
// MPIX_Allreduce_init, and the like) started many times with new input.
// Each of these phases counts the calls that took nexar's ring
// (nexar_get_counter): all of them (--expect-ring 1, the default) or none.
// --threads: MPI_THREAD_MULTIPLE, two threads each running rounds on
// communicators of their own at the same time.  --idle S: at the end, with
// nothing in flight for S seconds, nexar's progress thread (the thread named
// nexar-progress) must use less than 1 % of a core
// (/proc/self/task/*/stat).
//
// Prints "nonblocking_check: rank R: checks=N errors=E" and exits non-zero
// on any error.
#include <mpi.h>

#include "../own_mpi.h"
#include "nexar/nexar.h"
#include "persistent.h"

#include <atomic>
#include <cstdint>
#include <dirent.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_rank = 0, g_size = 1;

uint64_t mix(uint64_t x) {  // splitmix64
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Rank r's input element i of call `id`: a small integer, so sums are exact.
int32_t value(uint64_t id, int r, size_t i) { return int32_t(mix(id * 1000003u + uint64_t(r) * 7919u + i) % 201) - 100; }

enum Kind { ALLREDUCE, REDUCE_SCATTER_BLOCK, REDUCE_SCATTER, ALLGATHER, KINDS };
const char* const kKindNames[] = {"MPI_Iallreduce", "MPI_Ireduce_scatter_block", "MPI_Ireduce_scatter",
                                  "MPI_Iallgather"};

// One nonblocking call, its buffers and what it must produce.
struct Call {
    Kind kind = ALLREDUCE;
    uint64_t id = 0;
    bool in_place = false;
    bool is_float = false;
    size_t per_rank = 0;        // items per rank's block (allreduce: the count is per_rank * size)
    std::vector<int> counts;    // MPI_Ireduce_scatter's
    std::vector<char> send, recv;
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Request request = MPI_REQUEST_NULL;
    bool freed = false;

    MPI_Datatype type() const { return is_float ? MPI_FLOAT : MPI_INT32_T; }
    size_t items_total() const {
        if (kind != REDUCE_SCATTER) return per_rank * size_t(g_size);
        size_t n = 0;
        for (int c : counts) n += size_t(c);
        return n;
    }
    size_t own_offset() const {
        if (kind != REDUCE_SCATTER) return per_rank * size_t(g_rank);
        size_t n = 0;
        for (int r = 0; r < g_rank; ++r) n += size_t(counts[size_t(r)]);
        return n;
    }
    size_t own_count() const { return kind == REDUCE_SCATTER ? size_t(counts[size_t(g_rank)]) : per_rank; }
};

void put(const Call& c, char* at, size_t i, int32_t v) {
    if (c.is_float) {
        float f = float(v);
        memcpy(at + i * 4, &f, 4);
    } else {
        memcpy(at + i * 4, &v, 4);
    }
}
int32_t get(const Call& c, const char* at, size_t i) {
    if (c.is_float) {
        float f;
        memcpy(&f, at + i * 4, 4);
        return int32_t(f);
    }
    int32_t v;
    memcpy(&v, at + i * 4, 4);
    return v;
}

// Fills the input of `c` for this rank: the send buffer, or in place the
// receive buffer (the allgather's own block of it).
void fill(Call& c) {
    const size_t total = c.items_total();
    c.recv.assign(4 * (c.kind == ALLREDUCE || c.kind == ALLGATHER || c.in_place ? total : c.own_count()), char(0x5a));
    if (c.kind == ALLGATHER) {
        c.send.assign(4 * c.per_rank, 0);
        char* at = c.in_place ? c.recv.data() + 4 * c.own_offset() : c.send.data();
        for (size_t i = 0; i < c.per_rank; ++i) put(c, at, i, value(c.id, g_rank, i));
        return;
    }
    c.send.assign(c.in_place ? 0 : 4 * total, 0);
    char* at = c.in_place ? c.recv.data() : c.send.data();
    for (size_t i = 0; i < total; ++i) put(c, at, i, value(c.id, g_rank, i));
}

int start(Call& c) {
    const void* sb = c.in_place ? MPI_IN_PLACE : c.send.data();
    switch (c.kind) {
        case ALLREDUCE:
            return MPI_Iallreduce(sb, c.recv.data(), int(c.items_total()), c.type(), MPI_SUM, c.comm, &c.request);
        case REDUCE_SCATTER_BLOCK:
            return MPI_Ireduce_scatter_block(sb, c.recv.data(), int(c.per_rank), c.type(), MPI_SUM, c.comm,
                                             &c.request);
        case REDUCE_SCATTER:
            return MPI_Ireduce_scatter(sb, c.recv.data(), c.counts.data(), c.type(), MPI_SUM, c.comm, &c.request);
        case ALLGATHER:
            return MPI_Iallgather(sb, int(c.per_rank), c.type(), c.recv.data(), int(c.per_rank), c.type(), c.comm,
                                  &c.request);
        default: return MPI_ERR_OTHER;
    }
}

// The MPI's own blocking call on a fresh copy of the input.
std::vector<char> mpi_reference(const Call& c) {
    Call copy = c;
    fill(copy);
    const void* sb = copy.in_place ? MPI_IN_PLACE : copy.send.data();
    switch (c.kind) {
        case ALLREDUCE:
            own_mpi(PMPI_Allreduce)(sb, copy.recv.data(), int(c.items_total()), c.type(), MPI_SUM, c.comm);
            break;
        case REDUCE_SCATTER_BLOCK:
            own_mpi(PMPI_Reduce_scatter_block)(sb, copy.recv.data(), int(c.per_rank), c.type(), MPI_SUM, c.comm);
            break;
        case REDUCE_SCATTER:
            // In place, MPICH 4.0.2 moves a rank's block to the front of
            // recvbuf with memcpy, which aborts ("memcpy argument memory
            // ranges overlap") where the block is longer than its offset
            // (at 6 ranks or more): the reference runs out of place on the
            // same input, whose result is the in-place call's.
            if (copy.in_place) {
                std::vector<char> out(4 * c.own_count() + 4);
                own_mpi(PMPI_Reduce_scatter)(copy.recv.data(), out.data(), copy.counts.data(), c.type(), MPI_SUM,
                                             c.comm);
                return out;
            }
            own_mpi(PMPI_Reduce_scatter)(sb, copy.recv.data(), copy.counts.data(), c.type(), MPI_SUM, c.comm);
            break;
        case ALLGATHER:
            own_mpi(PMPI_Allgather)(sb, int(c.per_rank), c.type(), copy.recv.data(), int(c.per_rank), c.type(),
                                    c.comm);
            break;
        default: break;
    }
    return copy.recv;
}

std::atomic<long> g_checks{0}, g_errors{0};

void report(const Call& c, const char* what, size_t i, long got, long want) {
    if (++g_errors <= 10)
        fprintf(stderr, "nonblocking_check: rank %d: %s id %llu (%s, %zu per rank, %s): %s at %zu: got %ld, want %ld\n",
                g_rank, kKindNames[c.kind], (unsigned long long)c.id, c.is_float ? "float" : "int32", c.per_rank,
                c.in_place ? "in place" : "out of place", what, i, got, want);
}

// The result against the local reference and the MPI's (a collective: every
// rank checks its calls in the same order).
void check(const Call& c) {
    ++g_checks;
    const std::vector<char> mpi = mpi_reference(c);
    const bool whole = c.kind == ALLREDUCE || c.kind == ALLGATHER;
    const size_t n = whole ? c.items_total() : c.own_count();
    const size_t base = whole ? 0 : c.own_offset();
    for (size_t i = 0; i < n; ++i) {
        long want = 0;
        if (c.kind == ALLGATHER) {
            const size_t r = (base + i) / c.per_rank;
            want = value(c.id, int(r), (base + i) % c.per_rank);
        } else {
            for (int r = 0; r < g_size; ++r) want += value(c.id, r, base + i);
        }
        const long got = get(c, c.recv.data(), i);
        if (got != want) return report(c, "against the local reference", i, got, want);
        if (get(c, mpi.data(), i) != want) return report(c, "the MPI's own result (not nexar's) against the reference", i,
                                                         get(c, mpi.data(), i), want);
    }
}

// A call of kind `kind` on `comm`: sizes from 1 KiB to 1 MiB, odd counts.
Call make_call(Kind kind, uint64_t id, MPI_Comm comm) {
    Call c;
    c.kind = kind;
    c.id = id;
    c.comm = comm;
    c.in_place = mix(id ^ 0x1) % 2;
    c.is_float = mix(id ^ 0x2) % 2;
    c.per_rank = 1 + mix(id ^ 0x3) % (size_t(1) << (8 + mix(id ^ 0x4) % 9));
    if (kind == REDUCE_SCATTER) {
        for (int r = 0; r < g_size; ++r) c.counts.push_back(int(mix(id + uint64_t(r)) % (c.per_rank + 1)));
    }
    fill(c);
    return c;
}

// The MPI's own requests beside nexar's: a ring of sends and receives and a barrier.
struct OwnRequests {
    int out = 0, in = -1;
    MPI_Request req[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    void start(MPI_Comm comm, int tag) {
        out = g_rank * 1000 + tag;
        in = -1;
        MPI_Irecv(&in, 1, MPI_INT, (g_rank + g_size - 1) % g_size, tag, comm, &req[0]);
        MPI_Isend(&out, 1, MPI_INT, (g_rank + 1) % g_size, tag, comm, &req[1]);
        MPI_Ibarrier(comm, &req[2]);
    }
    void check(int tag) {
        ++g_checks;
        const int want = ((g_rank + g_size - 1) % g_size) * 1000 + tag;
        if (in != want && ++g_errors <= 10)
            fprintf(stderr, "nonblocking_check: rank %d: MPI's own receive got %d, want %d\n", g_rank, in, want);
    }
};

enum Completion { WAIT_EACH, WAITALL, WAITANY, WAITSOME, TEST, TESTALL, TESTANY, TESTSOME, GET_STATUS, FREE_ONE,
                  COMPLETIONS };
const char* const kCompletionNames[] = {"MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test",
                                        "MPI_Testall", "MPI_Testany", "MPI_Testsome", "MPI_Request_get_status",
                                        "MPI_Request_free"};

void fail_call(const char* what, int rc) {
    ++g_errors;
    fprintf(stderr, "nonblocking_check: rank %d: %s returned %d\n", g_rank, what, rc);
}

// Completes every request of the array with `how`.
void complete(std::vector<MPI_Request>& reqs, Completion how) {
    const int n = int(reqs.size());
    int rc = MPI_SUCCESS, flag = 0, index = 0, outcount = 0;
    std::vector<int> indices(reqs.size());
    auto all_null = [&] {
        for (MPI_Request r : reqs)
            if (r != MPI_REQUEST_NULL) return false;
        return true;
    };
    switch (how) {
        case WAIT_EACH:
        case FREE_ONE:
            for (int i = n - 1; i >= 0; --i)
                if ((rc = MPI_Wait(&reqs[size_t(i)], MPI_STATUS_IGNORE)) != MPI_SUCCESS) fail_call("MPI_Wait", rc);
            break;
        case WAITALL:
            if ((rc = MPI_Waitall(n, reqs.data(), MPI_STATUSES_IGNORE)) != MPI_SUCCESS) fail_call("MPI_Waitall", rc);
            break;
        case WAITANY:
            for (int k = 0; k < n; ++k)
                if ((rc = MPI_Waitany(n, reqs.data(), &index, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
                    fail_call("MPI_Waitany", rc);
            break;
        case WAITSOME:
            while (!all_null())
                if ((rc = MPI_Waitsome(n, reqs.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE)) !=
                    MPI_SUCCESS)
                    return fail_call("MPI_Waitsome", rc);
            break;
        case TEST:
            for (int i = 0; i < n; ++i)
                do {
                    if ((rc = MPI_Test(&reqs[size_t(i)], &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
                        return fail_call("MPI_Test", rc);
                } while (!flag);
            break;
        case TESTALL:
            do {
                if ((rc = MPI_Testall(n, reqs.data(), &flag, MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
                    return fail_call("MPI_Testall", rc);
            } while (!flag);
            break;
        case TESTANY:
            while (!all_null())
                if ((rc = MPI_Testany(n, reqs.data(), &index, &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
                    return fail_call("MPI_Testany", rc);
            break;
        case TESTSOME:
            while (!all_null())
                if ((rc = MPI_Testsome(n, reqs.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE)) !=
                    MPI_SUCCESS)
                    return fail_call("MPI_Testsome", rc);
            break;
        case GET_STATUS:
            // MPI_Request_get_status leaves the request alone: every one must
            // come to say complete, then MPI_Wait frees them.
            for (int i = 0; i < n; ++i) {
                do {
                    if ((rc = MPI_Request_get_status(reqs[size_t(i)], &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
                        return fail_call("MPI_Request_get_status", rc);
                } while (!flag);
                if ((rc = MPI_Wait(&reqs[size_t(i)], MPI_STATUS_IGNORE)) != MPI_SUCCESS) fail_call("MPI_Wait", rc);
            }
            break;
        default: break;
    }
    if (!all_null()) {
        ++g_errors;
        fprintf(stderr, "nonblocking_check: rank %d: %s left a request active\n", g_rank, kCompletionNames[how]);
    }
}

bool g_expect_ring = true;
// --expect-ring mpi: no call takes the ring, yet each is agreed by nexar
// before it goes to the MPI (a ring over the MPI's point-to-point that
// nexar's progress thread may not drive): refusals count as fallbacks.
bool g_agreed_fallbacks = false;
// Rounds count their ring calls (not with --threads: the counter is the
// process's).
bool g_count_rings = true;

uint64_t ring_calls() {
    uint64_t v = 0;
    nexar_get_counter("ring_calls", &v);
    return v;
}

// The phase's nonblocking calls took the ring (want > 0), or none did.
void expect_ring_calls(const char* phase, uint64_t before, uint64_t want) {
    ++g_checks;
    const uint64_t got = ring_calls() - before;
    if (got != want && ++g_errors <= 10)
        fprintf(stderr, "nonblocking_check: rank %d: %s: %llu calls took nexar's ring, want %llu\n", g_rank, phase,
                (unsigned long long)got, (unsigned long long)want);
}

// MPI calls MPI_Request_free on a nonblocking collective's request
// erroneous (MPI-3.1 5.12); nexar's requests take it (a generalized
// request's free), so it is tried only where nexar takes the calls.
// One round: a batch on comms a and b (in opposite orders on odd ranks),
// MPI's own requests, one completion call.
void round_of(MPI_Comm a, MPI_Comm b, uint64_t round, Completion how) {
    std::vector<Call> calls;
    const int per_comm = 2 + int(mix(round) % 3);
    for (int k = 0; k < per_comm; ++k) {
        calls.push_back(make_call(Kind(mix(round * 31 + uint64_t(k)) % KINDS), round * 64 + uint64_t(k), a));
        calls.push_back(make_call(Kind(mix(round * 37 + uint64_t(k)) % KINDS), round * 64 + 32 + uint64_t(k), b));
    }
    const uint64_t before = ring_calls();
    // Even ranks start a's calls first, odd ranks b's: each communicator's
    // calls are still started in the same order on every rank.
    for (int pass = 0; pass < 2; ++pass) {
        const bool a_pass = (pass == 0) == (g_rank % 2 == 0);
        for (size_t i = a_pass ? 0 : 1; i < calls.size(); i += 2) {
            const int rc = start(calls[i]);
            if (rc != MPI_SUCCESS) fail_call(kKindNames[calls[i].kind], rc);
        }
    }
    OwnRequests own;
    own.start(a, int(round % 1000));
    std::vector<MPI_Request> reqs;
    for (Call& c : calls) reqs.push_back(c.request);
    for (MPI_Request r : own.req) reqs.push_back(r);
    if (how == FREE_ONE) {
        MPI_Request_free(&reqs[0]);  // a's first call: its result is checked after a blocking call on a
        calls[0].freed = true;
    }
    complete(reqs, how);
    if (how == FREE_ONE) {
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, a);  // ordered after the freed call
    }
    if (g_count_rings)  // every nexar call of the round (and the blocking one) took the ring
        expect_ring_calls(kCompletionNames[how], before, g_expect_ring ? calls.size() + (how == FREE_ONE) : 0);
    own.check(int(round % 1000));
    for (const Call& c : calls) check(c);
}

// Many calls in flight on one communicator, waited on all at once.
void many_in_flight(MPI_Comm comm, uint64_t first_id, int n) {
    std::vector<Call> calls;
    for (int k = 0; k < n; ++k) calls.push_back(make_call(Kind(k % KINDS), first_id + uint64_t(k), comm));
    std::vector<MPI_Request> reqs;
    for (Call& c : calls) {
        const int rc = start(c);
        if (rc != MPI_SUCCESS) fail_call(kKindNames[c.kind], rc);
        reqs.push_back(c.request);
    }
    const int rc = MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) fail_call("MPI_Waitall", rc);
    for (const Call& c : calls) check(c);
}

// A blocking call that takes the ring sets the communicator's context up.
void set_up(MPI_Comm comm) {
    std::vector<int32_t> v(1 << 16, 1), out(v.size());
    MPI_Allreduce(v.data(), out.data(), int(v.size()), MPI_INT32_T, MPI_SUM, comm);
}

#ifdef NB_ALLREDUCE_INIT
// A persistent call of each kind (but the varying reduce-scatter, which MPI
// has no persistent form of here), started `starts` times with new input
// each time, completed with MPI_Wait, MPI_Test or (all three at once after
// MPI_Startall) MPI_Waitall, then freed.
//
// MPICH 4.0's own persistent MPI_Allgather_init fills the other ranks'
// blocks at the first MPI_Start only (later starts leave them as they were;
// shown by hand with MPICH 4.0.2): where the calls go to the MPI's own
// (--expect-ring 0), MPICH 4.0 runs no persistent allgather.
void persistent_rounds(MPI_Comm comm, uint64_t seed, int starts) {
    std::vector<Kind> kinds = {ALLREDUCE, REDUCE_SCATTER_BLOCK, ALLGATHER};
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40100000
    if (!g_expect_ring) kinds.pop_back();
#endif
    std::vector<Call> calls;
    for (Kind k : kinds) calls.push_back(make_call(k, seed * 13000 + uint64_t(k), comm));
    std::vector<MPI_Request> reqs(calls.size());
    for (size_t i = 0; i < calls.size(); ++i) {
        Call& c = calls[i];
        const void* sb = c.in_place ? MPI_IN_PLACE : c.send.data();
        int rc = MPI_SUCCESS;
        if (c.kind == ALLREDUCE)
            rc = NB_ALLREDUCE_INIT(sb, c.recv.data(), int(c.items_total()), c.type(), MPI_SUM, comm, MPI_INFO_NULL,
                                   &reqs[i]);
        else if (c.kind == REDUCE_SCATTER_BLOCK)
            rc = NB_REDUCE_SCATTER_BLOCK_INIT(sb, c.recv.data(), int(c.per_rank), c.type(), MPI_SUM, comm,
                                              MPI_INFO_NULL, &reqs[i]);
        else
            rc = NB_ALLGATHER_INIT(sb, int(c.per_rank), c.type(), c.recv.data(), int(c.per_rank), c.type(), comm,
                                   MPI_INFO_NULL, &reqs[i]);
        if (rc != MPI_SUCCESS) fail_call("a persistent collective's initialization", rc);
    }
    for (int k = 0; k < starts; ++k) {
        // New input in the same buffers: the call's id changes the values.
        for (Call& c : calls) {
            c.id += 1000;
            const char *send = c.send.data(), *recv = c.recv.data();
            fill(c);  // the same sizes: assign() keeps the buffers the requests hold
            if (c.send.data() != send || c.recv.data() != recv) {
                fprintf(stderr, "nonblocking_check: the test moved a persistent call's buffers\n");
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
        int rc = MPI_SUCCESS, flag = 0;
        switch (k % 3) {
            case 0:
                for (MPI_Request& r : reqs) {
                    if ((rc = MPI_Start(&r)) != MPI_SUCCESS) fail_call("MPI_Start", rc);
                    if ((rc = MPI_Wait(&r, MPI_STATUS_IGNORE)) != MPI_SUCCESS) fail_call("MPI_Wait", rc);
                }
                break;
            case 1:
                for (MPI_Request& r : reqs) {
                    if ((rc = MPI_Start(&r)) != MPI_SUCCESS) fail_call("MPI_Start", rc);
                    do {
                        if ((rc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS) {
                            fail_call("MPI_Test", rc);
                            break;
                        }
                    } while (!flag);
                }
                break;
            default:
                if ((rc = MPI_Startall(int(reqs.size()), reqs.data())) != MPI_SUCCESS) fail_call("MPI_Startall", rc);
                if ((rc = MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE)) != MPI_SUCCESS)
                    fail_call("MPI_Waitall", rc);
        }
        for (MPI_Request r : reqs)
            if (r == MPI_REQUEST_NULL && ++g_errors <= 10)
                fprintf(stderr, "nonblocking_check: rank %d: a persistent request was freed by its completion\n",
                        g_rank);
        for (const Call& c : calls) check(c);
    }
    for (MPI_Request& r : reqs) {
        const int rc = MPI_Request_free(&r);
        if (rc != MPI_SUCCESS) fail_call("MPI_Request_free", rc);
    }
}
#endif

// CPU seconds (user + system) of this process's threads named
// "nexar-progress"; -1 when there is none.
double progress_thread_cpu() {
    double total = -1;
    DIR* dir = opendir("/proc/self/task");
    if (!dir) return -1;
    while (dirent* e = readdir(dir)) {
        if (e->d_name[0] == '.') continue;
        const std::string base = std::string("/proc/self/task/") + e->d_name;
        char name[64] = "";
        if (FILE* f = fopen((base + "/comm").c_str(), "r")) {
            if (!fgets(name, sizeof name, f)) name[0] = 0;
            fclose(f);
        }
        if (strncmp(name, "nexar-progress", 14) != 0) continue;
        if (FILE* f = fopen((base + "/stat").c_str(), "r")) {
            char buf[1024];
            const size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = 0;
            // Fields after the name (which may hold spaces): state is field 3,
            // utime and stime fields 14 and 15.
            const char* p = strrchr(buf, ')');
            unsigned long utime = 0, stime = 0;
            if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) == 2)
                total = (total < 0 ? 0 : total) + double(utime + stime) / double(sysconf(_SC_CLK_TCK));
        }
    }
    closedir(dir);
    return total;
}

uint64_t fallback_calls() {
    uint64_t v = 0;
    nexar_get_counter("fallback_calls", &v);
    return v;
}

// An allgather of a derived datatype, which the ring does not take: every
// rank agrees and then falls back to the MPI's own, posted later than the
// call was made.  The application frees the type (and makes others) as
// soon as the call is started, as MPI lets it.
void derived_type_allgather(MPI_Comm comm, uint64_t id) {
    const int per = 4096;  // ints per rank
    MPI_Datatype quad;
    MPI_Type_contiguous(4, MPI_INT, &quad);
    MPI_Type_commit(&quad);
    std::vector<int32_t> send(per), recv(size_t(per) * size_t(g_size), 0);
    for (int i = 0; i < per; ++i) send[size_t(i)] = value(id, g_rank, size_t(i));
    const uint64_t before = fallback_calls();
    // Rank 0 starts late: the others' agreement cannot end inside their
    // MPI_Iallgather, so their fallback is posted after the type is freed.
    if (g_rank == 0) usleep(50000);
    MPI_Request req;
    int rc = MPI_Iallgather(send.data(), per / 4, quad, recv.data(), per / 4, quad, comm, &req);
    if (rc != MPI_SUCCESS) fail_call("MPI_Iallgather of a derived datatype", rc);
    MPI_Type_free(&quad);
    MPI_Datatype others[8];
    for (MPI_Datatype& t : others) {
        MPI_Type_vector(3, 2, 5, MPI_DOUBLE, &t);
        MPI_Type_commit(&t);
    }
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) fail_call("MPI_Wait on an allgather of a freed derived datatype", rc);
    for (MPI_Datatype& t : others) MPI_Type_free(&t);
    for (int r = 0; r < g_size; ++r)
        for (int i = 0; i < per; ++i) {
            ++g_checks;
            const int32_t got = recv[size_t(r) * size_t(per) + size_t(i)], want = value(id, r, size_t(i));
            if (got != want && ++g_errors <= 10)
                fprintf(stderr, "nonblocking_check: rank %d: allgather of a freed derived datatype: block %d item %d "
                        "is %d, want %d\n", g_rank, r, i, got, want);
        }
    ++g_checks;
    const uint64_t fell_back = fallback_calls() - before;
    const unsigned want_fallbacks = g_expect_ring || g_agreed_fallbacks ? 1u : 0u;
    if (fell_back != want_fallbacks && ++g_errors <= 10)
        fprintf(stderr, "nonblocking_check: rank %d: allgather of a derived datatype: %llu fallbacks, want %d\n",
                g_rank, (unsigned long long)fell_back, int(want_fallbacks));
}

// --idle S: with nothing in flight for S seconds, nexar's progress thread
// must sleep (less than 1 % of a core).
void check_idle(double seconds) {
    ++g_checks;
    const double before = progress_thread_cpu();
    if (before < 0) {
        ++g_errors;
        fprintf(stderr, "nonblocking_check: rank %d: --idle: no nexar-progress thread in this process\n", g_rank);
        return;
    }
    usleep(useconds_t(seconds * 1e6));
    const double used = progress_thread_cpu() - before;
    printf("nonblocking_check: rank %d: idle %.0f s: the progress thread used %.3f s of CPU (%.2f %% of a core)\n",
           g_rank, seconds, used, 100 * used / seconds);
    if (used > 0.01 * seconds && ++g_errors <= 10)
        fprintf(stderr, "nonblocking_check: rank %d: the idle progress thread used more than 1 %% of a core\n",
                g_rank);
}

void rounds(MPI_Comm a, MPI_Comm b, int n, uint64_t seed) {
    for (int r = 0; r < n; ++r) {
        Completion how = Completion(r % COMPLETIONS);
        if (how == FREE_ONE && !g_expect_ring) how = WAIT_EACH;
        round_of(a, b, seed * 100000 + uint64_t(r), how);
    }
}

}  // namespace

int main(int argc, char** argv) {
    int n_rounds = 20;
    uint64_t seed = 1;
    bool threads = false, expect_ring = true;
    double idle_s = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) n_rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--threads")) threads = true, g_count_rings = false;
        else if (!strcmp(argv[i], "--idle") && i + 1 < argc) idle_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--expect-ring") && i + 1 < argc) {
            g_agreed_fallbacks = !strcmp(argv[++i], "mpi");
            expect_ring = g_expect_ring = !g_agreed_fallbacks && atoi(argv[i]) != 0;
        }
        else {
            fprintf(stderr, "usage: %s [--rounds N] [--seed S] [--threads] [--expect-ring 0|1|mpi] [--idle S]\n", argv[0]);
            return 2;
        }
    }
    int provided = MPI_THREAD_SINGLE;
    if (threads) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "nonblocking_check: the MPI gives no MPI_THREAD_MULTIPLE\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm a, b, c, d, fresh;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    set_up(a);
    set_up(b);
    if (!threads) {
        rounds(a, b, n_rounds, seed);
        // MPI_COMM_WORLD's context is set up at MPI_Init.
        rounds(MPI_COMM_WORLD, a, 2, seed + 1);
        // (The checks call the MPI's own functions: they take no ring.)
        uint64_t before = ring_calls();
        many_in_flight(a, seed * 7000, 24);
        expect_ring_calls("24 calls in flight", before, expect_ring ? 24 : 0);
        // MPI_Comm_split sets the new communicator's ring up: its first
        // calls are nonblocking and take it.
        MPI_Comm_split(MPI_COMM_WORLD, 0, g_rank, &fresh);  // the checks take world ranks for its ranks
        before = ring_calls();
        many_in_flight(fresh, seed * 9000, 4);
        expect_ring_calls("a new communicator from MPI_Comm_split", before, expect_ring ? 4 : 0);
        MPI_Comm_free(&fresh);
        // So do MPI_Comm_create_group (collective over the group only) and
        // the topologies.
        MPI_Group world_group;
        MPI_Comm_group(MPI_COMM_WORLD, &world_group);
        MPI_Comm_create_group(MPI_COMM_WORLD, world_group, 7, &fresh);
        MPI_Group_free(&world_group);
        before = ring_calls();
        many_in_flight(fresh, seed * 9500, 4);
        expect_ring_calls("a new communicator from MPI_Comm_create_group", before, expect_ring ? 4 : 0);
        MPI_Comm_free(&fresh);
        const int dims[1] = {g_size}, periods[1] = {0}, remain[1] = {1};
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &fresh);  // not reordered: world ranks
        MPI_Comm sub;
        MPI_Cart_sub(fresh, remain, &sub);
        before = ring_calls();
        many_in_flight(fresh, seed * 9600, 4);
        many_in_flight(sub, seed * 9700, 4);
        expect_ring_calls("new communicators from MPI_Cart_create and MPI_Cart_sub", before, expect_ring ? 8 : 0);
        MPI_Comm_free(&sub);
        MPI_Comm_free(&fresh);
        // MPI_Comm_idup returns before the communicator exists: its
        // nonblocking calls pass through until a blocking collective has
        // set its ring up.
        MPI_Request idup;
        MPI_Comm_idup(MPI_COMM_WORLD, &fresh, &idup);
        MPI_Wait(&idup, MPI_STATUS_IGNORE);
        before = ring_calls();
        many_in_flight(fresh, seed * 9800, 4);
        expect_ring_calls("a communicator from MPI_Comm_idup, before a blocking call", before, 0);
        std::vector<float> ones(1 << 14, 1.0f), sums(1 << 14);
        MPI_Allreduce(ones.data(), sums.data(), int(ones.size()), MPI_FLOAT, MPI_SUM, fresh);
        ++g_checks;
        if (sums[0] != float(g_size) || sums.back() != float(g_size)) ++g_errors;
        before = ring_calls();
        many_in_flight(fresh, seed * 9900, 4);
        expect_ring_calls("a communicator from MPI_Comm_idup, after a blocking call", before, expect_ring ? 4 : 0);
        MPI_Comm_free(&fresh);
        derived_type_allgather(a, seed * 13000);
        // Started and waited on at once, as a blocking call.
        before = ring_calls();
        for (int k = 0; k < 50; ++k) {
            Call one = make_call(Kind(k % KINDS), seed * 11000 + uint64_t(k), a);
            start(one);
            MPI_Wait(&one.request, MPI_STATUS_IGNORE);
            check(one);
        }
        expect_ring_calls("50 calls waited on at once", before, expect_ring ? 50 : 0);
#ifdef NB_ALLREDUCE_INIT
        // Persistent: 3 calls started 12 times each.
        before = ring_calls();
        persistent_rounds(a, seed, 12);
        expect_ring_calls("persistent calls", before, expect_ring ? 36 : 0);
        // On a communicator without a ring: initialization sets it up.
        MPI_Group world_group2;
        MPI_Comm_group(MPI_COMM_WORLD, &world_group2);
        MPI_Comm_create_group(MPI_COMM_WORLD, world_group2, 8, &fresh);
        MPI_Group_free(&world_group2);
        before = ring_calls();
        persistent_rounds(fresh, seed + 7, 3);
        expect_ring_calls("persistent calls on a new communicator", before, expect_ring ? 9 : 0);
        MPI_Comm_free(&fresh);
        // A persistent request outlives its communicator: freed after it.
        MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
        Call kept = make_call(ALLREDUCE, seed * 17000, fresh);
        MPI_Request kept_req;
        NB_ALLREDUCE_INIT(kept.in_place ? MPI_IN_PLACE : kept.send.data(), kept.recv.data(),
                          int(kept.items_total()), kept.type(), MPI_SUM, fresh, MPI_INFO_NULL, &kept_req);
        MPI_Start(&kept_req);
        MPI_Wait(&kept_req, MPI_STATUS_IGNORE);
        check(kept);
        MPI_Comm_free(&fresh);
        const int rc = MPI_Request_free(&kept_req);
        if (rc != MPI_SUCCESS) fail_call("MPI_Request_free after MPI_Comm_free", rc);
#else
        if (g_rank == 0) printf("nonblocking_check: this MPI has no persistent collectives: not checked\n");
#endif
    } else {
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        set_up(c);
        set_up(d);
        // Checks use the MPI's own blocking calls on each thread's communicators.
        std::thread other([&] { rounds(c, d, n_rounds, seed + 50); });
        rounds(a, b, n_rounds, seed);
        other.join();
        MPI_Comm_free(&c);
        MPI_Comm_free(&d);
    }
    if (idle_s > 0) check_idle(idle_s);
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    long errors = g_errors;
    printf("nonblocking_check: rank %d: checks=%ld errors=%ld\n", g_rank, g_checks.load(), errors);
    MPI_Finalize();
    return errors ? 1 : 0;
}
