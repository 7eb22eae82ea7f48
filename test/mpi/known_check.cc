// The known one-shot (call/known_one_shot.h): small blocking allreduces that
// skip their task once their communicator took them as the one-shot.
//
//   known_check [--expect-known | --fixed-threshold BYTES]
//
// Every result is compared with the MPI's own PMPI_Allreduce of the same
// inputs (own_mpi.h), exactly (integer values, also in the floating
// types).  The calls:
//   1. shapes: int, float and double with SUM, MAX and MIN, counts from 1
//      to 512 items (in the boards' head and in their slots), in place and
//      not, on MPI_COMM_WORLD, four (datatype, op) pairs in turn (as many as
//      a thread remembers: with --expect-known nearly all take the known
//      one-shot); then five in turn, PROD too (more than a thread
//      remembers: they push each other out);
//   2. two communicators in turn, one freed and made again (its context
//      goes; a remembered pointer must not be used);
//   3. (--expect-known only) rank 0 in place, the others not, call after
//      call: the keys differ, so every call goes through its task (no known
//      one-shot counted during it), with exact results.  MPI asks every rank
//      to pass MPI_IN_PLACE alike, and with the learnt threshold the ranks
//      would count such calls in different classes (in place or not) and
//      part ways; with a fixed one the task takes them as they are;
//   4. (--expect-known only: with the learnt threshold the size may have
//      settled on the MPI, whose own call with such counts may hang)
//      counts that differ between the ranks after calls of that shape went
//      the known way: MPI_ERR_COUNT on every rank, nothing written past the
//      receive buffer, and the communicator still works;
//   5. beside a live persistent allreduce of 16 KiB on the same
//      communicator, started before some of the calls and waited on after
//      them: the blocking calls complete it first, all exact (and with
//      --expect-known they still take the known one-shot);
//   6. rank 0 starts a nonblocking allreduce on another communicator,
//      makes a known call, then waits; the others start it and wait before
//      their known call: the known call's wait must move the nonblocking
//      one along (run with NEXAR_PROGRESS=calls too, where nothing else
//      would).
//   7. small persistent allreduces (1 to 512 items: their start publishes
//      the input, and MPI_Wait or MPI_Test reduces, beside nexar's engine
//      where nothing else is in flight): MPI_Start + MPI_Wait, MPI_Test
//      loops, MPI_Startall of two, a blocking allreduce and an
//      MPI_Iallreduce between a start and its wait, a late rank, and
//      MPI_Request_free of a started request; each result the MPI's own of
//      the same inputs; every start counted as a one-shot (none passed
//      through or fell back: with the learnt threshold too); a second
//      MPI_Start of an active request is an error (MPI_ERR_REQUEST).
//   8. nonblocking allreduces of 8 B to 16 KiB, one or two in flight, in
//      place and not: each result the MPI's own of the same inputs, and
//      each call one meeting on the boards with its input (a known
//      one-shot where nothing else is in flight: its start publishes, its
//      wait reduces), counted as a meeting and a one-shot (none passed
//      through or fell back), most as the known one-shot; then an
//      MPI_Test loop, a late rank, and rank 0 taking its task's meeting
//      while the others take the known one-shot (keys differ: every rank
//      meets again, no known one-shot counted).
// --fixed-threshold BYTES (with NEXAR_THRESHOLD_BYTES=BYTES): only a check
// that a nonblocking call below a fixed threshold goes to the MPI on every
// rank, also where its (communicator, datatype, op) is known and some
// ranks are busy (fixed_threshold, below).
// --expect-known (with NEXAR_THRESHOLD_BYTES=0): calls must have taken the
// known one-shot (known_one_shots grew), every one also counted as a
// one-shot and a meeting on the boards.
#include <mpi.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../own_mpi.h"
#include "nexar/nexar.h"
#include "persistent.h"

namespace {

int g_rank = 0, g_size = 0, g_errors = 0;

void fail(const std::string& what) {
    fprintf(stderr, "FAIL [rank %d]: %s\n", g_rank, what.c_str());
    ++g_errors;
}

uint64_t counter(const char* name) {
    uint64_t v = 0;
    if (nexar_get_counter(name, &v) != 0) {
        fprintf(stderr, "FAIL: nexar_get_counter(%s) failed: is libnexar_pmpi loaded?\n", name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return v;
}

// Small integer values, so that sums, products, minima and maxima are
// exact in every type and in any order.
template <class T>
void fill(std::vector<T>& v, int n, int call, int rank) {
    for (int i = 0; i < n; ++i) v[size_t(i)] = T((i * 7 + call * 3 + rank * 5) % 11 - 5 + (i % 3 == 0 ? 2 : 0));
}

// One call of `n` items of T with `op` on `comm`, checked against the MPI's
// own reduction of the same inputs.  `in_place` as this rank passes it.
template <class T>
void checked_call(MPI_Datatype dt, MPI_Op op, const char* name, int n, int call, bool in_place, MPI_Comm comm) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    const int guard = 8;
    const size_t items = static_cast<size_t>(n);
    std::vector<T> in(items + guard), out(items + guard, T(-99)), want(items);
    // PROD of many small values overflows a float's exact range: keep it to ±1, 2.
    fill(in, n, call, rank);
    if (op == MPI_PROD)
        for (int i = 0; i < n; ++i) in[size_t(i)] = T(i % 5 == 0 ? 2 : (i + rank) % 2 ? 1 : -1);
    own_mpi(PMPI_Allreduce)(in.data(), want.data(), n, dt, op, comm);
    int rc;
    if (in_place) {
        std::copy(in.begin(), in.begin() + n, out.begin());
        rc = MPI_Allreduce(MPI_IN_PLACE, out.data(), n, dt, op, comm);
    } else {
        rc = MPI_Allreduce(in.data(), out.data(), n, dt, op, comm);
    }
    if (rc != MPI_SUCCESS) return fail(std::string(name) + " of " + std::to_string(n) + " items: error " + std::to_string(rc));
    for (int i = 0; i < n; ++i)
        if (out[size_t(i)] != want[size_t(i)])
            return fail(std::string(name) + " of " + std::to_string(n) + " items" + (in_place ? " in place" : "") +
                        ", call " + std::to_string(call) + ": item " + std::to_string(i) + " is " +
                        std::to_string(double(out[size_t(i)])) + ", the MPI's " + std::to_string(double(want[size_t(i)])));
    for (int i = n; i < n + guard; ++i)
        if (out[size_t(i)] != T(-99)) return fail(std::string(name) + ": written past the receive buffer");
}

void shapes(MPI_Comm comm, int rounds, int pairs) {
    const int counts[] = {1, 2, 3, 6, 7, 64, 512};
    for (int call = 0; call < rounds; ++call) {
        const int n = counts[call % 7];
        const bool in_place = (call / 7) % 2 == 1;
        switch (call % pairs) {
            case 0: checked_call<double>(MPI_DOUBLE, MPI_SUM, "double SUM", n, call, in_place, comm); break;
            case 1: checked_call<int>(MPI_INT, MPI_MAX, "int MAX", n, call, in_place, comm); break;
            case 2: checked_call<float>(MPI_FLOAT, MPI_MIN, "float MIN", n, call, in_place, comm); break;
            case 3: checked_call<int>(MPI_INT, MPI_SUM, "int SUM", n, call, in_place, comm); break;
            default: checked_call<double>(MPI_DOUBLE, MPI_PROD, "double PROD", n, call, in_place, comm); break;
        }
    }
}

#ifdef NB_ALLREDUCE_INIT
// A persistent double SUM of n items on `comm` (in place or not): its
// input for round `round` is filled before each start, and its result
// checked against the MPI's own reduction of the same input.
struct Persistent {
    int n;
    bool in_place;
    MPI_Comm comm;
    std::vector<double> in, out, want;
    MPI_Request req = MPI_REQUEST_NULL;
    Persistent(int n_, bool in_place_, MPI_Comm comm_)
        : n(n_), in_place(in_place_), comm(comm_), in(size_t(n_)), out(size_t(n_)), want(size_t(n_)) {
        if (NB_ALLREDUCE_INIT(in_place ? MPI_IN_PLACE : in.data(), out.data(), n, MPI_DOUBLE, MPI_SUM, comm,
                              MPI_INFO_NULL, &req) != MPI_SUCCESS)
            fail("MPI_Allreduce_init of " + std::to_string(n) + " doubles failed");
    }
    ~Persistent() {
        if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
    }
    // Before MPI_Start: the round's input, and the MPI's result of it.
    void fill_round(int round) {
        int rank = 0;
        MPI_Comm_rank(comm, &rank);
        fill(in, n, round, rank);
        own_mpi(PMPI_Allreduce)(in.data(), want.data(), n, MPI_DOUBLE, MPI_SUM, comm);
        if (in_place) out = in;
        else std::fill(out.begin(), out.end(), -99.0);
    }
    void check(const char* what, int round) {
        for (int i = 0; i < n; ++i)
            if (out[size_t(i)] != want[size_t(i)]) {
                fail(std::string(what) + ": persistent double SUM of " + std::to_string(n) + " items" +
                     (in_place ? " in place" : "") + ", round " + std::to_string(round) + ": item " +
                     std::to_string(i) + " is " + std::to_string(out[size_t(i)]) + ", the MPI's " +
                     std::to_string(want[size_t(i)]));
                return;
            }
    }
};

void small_persistent() {
    const int counts[] = {1, 6, 64, 512};
    for (int n : counts) {
        for (int in_place = 0; in_place < 2; ++in_place) {
            Persistent a(n, in_place != 0, MPI_COMM_WORLD), b(n, in_place == 0, MPI_COMM_WORLD);
            const uint64_t one_shots0 = counter("one_shot_calls"), passed0 = counter("passthrough_calls"),
                           fell0 = counter("fallback_calls");
            int round = 0;
            // Start + Wait.
            for (int k = 0; k < 10; ++k, ++round) {
                a.fill_round(round);
                MPI_Start(&a.req);
                MPI_Wait(&a.req, MPI_STATUS_IGNORE);
                a.check("MPI_Start + MPI_Wait", round);
            }
            // Start, then MPI_Test until done.
            for (int k = 0; k < 5; ++k, ++round) {
                a.fill_round(round);
                MPI_Start(&a.req);
                int flag = 0;
                while (!flag) MPI_Test(&a.req, &flag, MPI_STATUS_IGNORE);
                a.check("MPI_Test loop", round);
            }
            // Two at once.
            for (int k = 0; k < 5; ++k, ++round) {
                a.fill_round(round), b.fill_round(round + 100);
                MPI_Request both[2] = {a.req, b.req};
                MPI_Startall(2, both);
                MPI_Waitall(2, both, MPI_STATUSES_IGNORE);
                a.check("MPI_Startall + MPI_Waitall, the first", round);
                b.check("MPI_Startall + MPI_Waitall, the second", round + 100);
            }
            // (Below, the blocking calls may take either path.)
            const uint64_t one_shots = counter("one_shot_calls") - one_shots0,
                           passed = counter("passthrough_calls") - passed0, fell = counter("fallback_calls") - fell0;
            if (one_shots != 25 || passed || fell)
                fail("persistent double SUM of " + std::to_string(n) + " items: 25 starts counted " +
                     std::to_string(one_shots) + " one-shots, " + std::to_string(passed) + " passed through, " +
                     std::to_string(fell) + " fell back (each must be a one-shot)");
            // A blocking allreduce, then a nonblocking one, between a start and its wait.
            for (int k = 0; k < 5; ++k, ++round) {
                a.fill_round(round);
                MPI_Start(&a.req);
                checked_call<double>(MPI_DOUBLE, MPI_SUM, "double SUM after a persistent start", 3, round, false,
                                     MPI_COMM_WORLD);
                std::vector<float> x(4096, float(g_rank + 1)), y(4096);
                MPI_Request ireq;
                MPI_Iallreduce(x.data(), y.data(), 4096, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &ireq);
                MPI_Request both[2] = {ireq, a.req};
                MPI_Waitall(2, both, MPI_STATUSES_IGNORE);
                a.check("a blocking and a nonblocking call between start and wait", round);
                if (y[4095] != float(g_size * (g_size + 1) / 2)) fail("the Iallreduce after a persistent start");
            }
            // A late rank: the others wait (and test) for its input.
            for (int k = 0; k < 2; ++k, ++round) {
                a.fill_round(round);
                if (g_rank == 0) {
                    const double t0 = MPI_Wtime();
                    while (MPI_Wtime() - t0 < 0.02) {
                    }
                }
                MPI_Start(&a.req);
                if (k == 0) {
                    MPI_Wait(&a.req, MPI_STATUS_IGNORE);
                } else {
                    int flag = 0;
                    while (!flag) MPI_Test(&a.req, &flag, MPI_STATUS_IGNORE);
                }
                a.check("a late rank", round);
            }
            // Freed while started: it completes first.
            a.fill_round(round);
            MPI_Start(&a.req);
            MPI_Request_free(&a.req);
            a.check("MPI_Request_free of a started request", round);
        }
    }

    // A second start of an active request is an error, on every path.
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    {
        Persistent a(2, false, c);
        a.fill_round(0);
        MPI_Start(&a.req);
        int cls = MPI_SUCCESS;
        MPI_Error_class(MPI_Start(&a.req), &cls);
        if (cls != MPI_ERR_REQUEST) fail("MPI_Start of an active request gave error class " + std::to_string(cls));
        MPI_Wait(&a.req, MPI_STATUS_IGNORE);
        a.check("after a second MPI_Start", 0);
    }
    MPI_Comm_free(&c);
}
#endif

// 8. Nonblocking allreduces small enough for the one-shot, of every size
// (below 4 KiB too: with the learnt threshold such calls are nexar's where
// they meet on the boards): one or two in flight, in place and not, each
// result the MPI's own of the same inputs; each call meets the other ranks
// once, on the boards, with its input (a known one-shot alone, or its
// task's meeting: counted as a meeting and a one-shot; none passed
// through or fell back), most as the known one-shot (the calls started
// while nothing else was in flight).  Then the ways out of the known
// one-shot alone: an MPI_Test loop, a late rank, and keys that differ
// (rank 0 has another call in flight and takes its task's meeting while
// the others publish their known key: every rank meets again, with exact
// results, and no known one-shot is counted).  (MPI_Request_free of a
// nonblocking collective's request is erroneous: not tried.)
struct NonblockingSum {
    int n;
    bool in_place;
    std::vector<double> in, out, want;
    NonblockingSum(int n_, bool in_place_, int call)
        : n(n_), in_place(in_place_), in(size_t(n_)), out(size_t(n_), -99), want(size_t(n_)) {
        fill(in, n, call, g_rank);
        own_mpi(PMPI_Allreduce)(in.data(), want.data(), n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (in_place) out = in;
    }
    void start(MPI_Request* req, MPI_Comm comm = MPI_COMM_WORLD) {
        MPI_Iallreduce(in_place ? MPI_IN_PLACE : in.data(), out.data(), n, MPI_DOUBLE, MPI_SUM, comm, req);
    }
    void check(const std::string& what) {
        if (out != want)
            fail("MPI_Iallreduce double SUM of " + std::to_string(n) + " items" + (in_place ? " in place" : "") +
                 ", " + what + ": not the MPI's result");
    }
};

// `a` on MPI_COMM_WORLD while rank 0 is busy: rank 0 starts `b` on
// `other` first (its `a` then finds a call in flight), the other ranks
// start `b` once `a` is done (theirs find nothing in flight).
void with_rank0_busy(NonblockingSum& a, NonblockingSum& b, MPI_Comm other, const std::string& what_a,
                     const std::string& what_b) {
    MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (g_rank == 0) b.start(&reqs[1], other);
    a.start(&reqs[0]);
    MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
    a.check(what_a);
    if (g_rank != 0) b.start(&reqs[1], other);
    MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);
    b.check(what_b);
}

void small_nonblocking() {
    const int counts[] = {1, 6, 64, 512, 2048};  // 8 B (the slot's head) to 16 KiB
    for (int n : counts)
        for (int in_place = 0; in_place < 2; ++in_place) {
            const uint64_t one_shots0 = counter("one_shot_calls"), met0 = counter("board_agreements"),
                           passed0 = counter("passthrough_calls"), fell0 = counter("fallback_calls"),
                           known0 = counter("known_one_shots");
            int calls = 0, alone = 0;
            for (int round = 0; round < 10; ++round) {
                const int at_once = round % 2 + 1;
                std::vector<NonblockingSum> sums;
                for (int k = 0; k < at_once; ++k) sums.emplace_back(n, in_place != 0, round * 2 + k);
                MPI_Request reqs[2];
                for (int k = 0; k < at_once; ++k, ++calls) sums[size_t(k)].start(&reqs[k]);
                ++alone;  // (the first of each round starts with nothing in flight)
                if (at_once == 1) MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
                else MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
                for (int k = 0; k < at_once; ++k)
                    sums[size_t(k)].check("round " + std::to_string(round) + " (" + std::to_string(at_once) +
                                          " in flight)");
            }
            const uint64_t one_shots = counter("one_shot_calls") - one_shots0, met = counter("board_agreements") - met0,
                           passed = counter("passthrough_calls") - passed0, fell = counter("fallback_calls") - fell0;
            if (one_shots != uint64_t(calls) || met != uint64_t(calls) || passed || fell)
                fail("MPI_Iallreduce double SUM of " + std::to_string(n) + " items" + (in_place ? " in place" : "") +
                     ": " + std::to_string(calls) + " calls counted " + std::to_string(one_shots) + " one-shots, " +
                     std::to_string(met) + " meetings on the boards, " + std::to_string(passed) +
                     " passed through, " + std::to_string(fell) + " fell back (each must be one meeting, the one-shot)");
            // Every call started with nothing in flight takes the known
            // one-shot (its start publishes), but perhaps the first: a
            // communicator made or freed since the thread's last like it
            // makes it plan again.
            const uint64_t known = counter("known_one_shots") - known0;
            if (known + 1 < uint64_t(alone) || known > uint64_t(alone))
                fail("MPI_Iallreduce double SUM of " + std::to_string(n) + " items" + (in_place ? " in place" : "") +
                     ": " + std::to_string(known) + " known one-shots, not " + std::to_string(alone) +
                     " (one per call started with nothing in flight, perhaps but the first)");
        }

    for (int n : {1, 64}) {
        int call = 100;
        // An MPI_Test loop.
        for (int k = 0; k < 3; ++k) {
            NonblockingSum a(n, false, call++);
            MPI_Request req;
            a.start(&req);
            int flag = 0;
            while (!flag) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            a.check("an MPI_Test loop");
        }
        // A late rank: the others wait (or test) for its input.
        for (int k = 0; k < 2; ++k) {
            NonblockingSum a(n, true, call++);
            if (g_rank == 0) {
                const double t0 = MPI_Wtime();
                while (MPI_Wtime() - t0 < 0.02) {
                }
            }
            MPI_Request req;
            a.start(&req);
            int flag = 0;
            if (k == 0) MPI_Wait(&req, MPI_STATUS_IGNORE);
            else while (!flag) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
            a.check("a late rank");
        }
        // Keys that differ: rank 0 has a call in flight on another
        // communicator, so its call goes through its task's meeting.
        MPI_Comm other;
        MPI_Comm_dup(MPI_COMM_WORLD, &other);
        const uint64_t known0 = counter("known_one_shots"), one_shots0 = counter("one_shot_calls");
        for (int k = 0; k < 3; ++k) {
            NonblockingSum a(n, k % 2 == 1, call++), b(8, false, call++);
            with_rank0_busy(a, b, other, "with rank 0 taking its task's meeting and the others the known one-shot",
                            "the Iallreduce on the other communicator, started in different places");
        }
        // No `a` counts as a known one-shot (each met through its task; only
        // the `b`s may: 3 at most); 6 one-shots.
        const uint64_t known = counter("known_one_shots") - known0, one_shots = counter("one_shot_calls") - one_shots0;
        if (known > 3)
            fail("keys that differ: " + std::to_string(known) + " known one-shots counted");
        if (one_shots != 6) fail("keys that differ: " + std::to_string(one_shots) + " one-shots, not 6");
        MPI_Comm_free(&other);
    }
}

}  // namespace

// --fixed-threshold BYTES (run with NEXAR_THRESHOLD_BYTES=BYTES): an
// MPI_Iallreduce below the threshold, of a (communicator, datatype, op)
// known from a larger blocking call, with rank 0 busy with another call
// (its start goes through its task) and the others idle (their starts may
// look for the known one-shot): every rank must pass it to the MPI, with
// exact results, none counted as a one-shot.
int fixed_threshold(size_t threshold) {
    const int big = int(2 * threshold / sizeof(double)), small = 1;
    checked_call<double>(MPI_DOUBLE, MPI_SUM, "double SUM above the threshold", big, 0, false, MPI_COMM_WORLD);
    checked_call<double>(MPI_DOUBLE, MPI_SUM, "double SUM above the threshold", big, 1, false, MPI_COMM_WORLD);
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    const uint64_t one_shots0 = counter("one_shot_calls");
    for (int k = 0; k < 5; ++k) {
        NonblockingSum a(small, k % 2 == 1, 10 + k), b(big, false, 20 + k);
        with_rank0_busy(a, b, other, "below the fixed threshold, rank 0 busy",
                        "above the fixed threshold, on another communicator");
    }
    // Only the 5 `b`s (above the threshold) may be nexar's.
    const uint64_t one_shots = counter("one_shot_calls") - one_shots0;
    if (one_shots > 5) fail("below the fixed threshold: " + std::to_string(one_shots) + " one-shots, more than the 5 above it");
    MPI_Comm_free(&other);
    int total = 0;
    own_mpi(PMPI_Allreduce)(&g_errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("known_check: %d ranks, fixed threshold %zu bytes, failures=%d\n", g_size, threshold, total);
    MPI_Finalize();
    return total ? 1 : 0;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (argc > 2 && strcmp(argv[1], "--fixed-threshold") == 0) return fixed_threshold(size_t(atol(argv[2])));
    const bool expect_known = argc > 1 && strcmp(argv[1], "--expect-known") == 0;

    // 1. Shapes on the world: four pairs in turn, then five.
    const uint64_t known0 = counter("known_one_shots"), one_shot0 = counter("one_shot_calls");
    shapes(MPI_COMM_WORLD, 350, 4);
    const uint64_t known1 = counter("known_one_shots"), one_shot1 = counter("one_shot_calls");
    if (expect_known && known1 - known0 < 300)
        fail("only " + std::to_string(known1 - known0) + " of 350 calls of four shapes took the known one-shot");
    if (known1 - known0 > one_shot1 - one_shot0) fail("known one-shots not counted as one-shots");
    shapes(MPI_COMM_WORLD, 350, 5);

    // 2. Two communicators in turn; one freed and made again.
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    for (int k = 0; k < 3; ++k) {
        for (int call = 0; call < 40; ++call) {
            checked_call<double>(MPI_DOUBLE, MPI_SUM, "double SUM on a", 2, call, false, a);
            checked_call<double>(MPI_DOUBLE, MPI_SUM, "double SUM on b", 3, call, false, b);
        }
        MPI_Comm_free(&b);
        MPI_Comm_dup(MPI_COMM_WORLD, &b);
    }
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);

    // 3. Rank 0 in place, the others not: every call goes through its task.
    if (expect_known) {
        for (int call = 0; call < 20; ++call)
            checked_call<int>(MPI_INT, MPI_SUM, "int SUM", 4, call, false, MPI_COMM_WORLD);
        const uint64_t known2 = counter("known_one_shots");
        for (int call = 0; call < 50; ++call)
            checked_call<int>(MPI_INT, MPI_SUM, "int SUM, rank 0 in place", 4, call, g_rank == 0, MPI_COMM_WORLD);
        if (counter("known_one_shots") != known2)
            fail("a call whose ranks passed MPI_IN_PLACE unlike took the known one-shot");
    }

    // 4. Counts that differ, after calls of that shape.
    if (expect_known) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        for (int call = 0; call < 30; ++call) checked_call<int>(MPI_INT, MPI_SUM, "int SUM on c", 3, call, false, c);
        {
            const int n = g_rank == 0 ? 3 : 2;
            std::vector<int> in(8, 1), out(8, -7);
            int rc = MPI_Allreduce(in.data(), out.data(), n, MPI_INT, MPI_SUM, c);
            int cls = -1;
            MPI_Error_class(rc, &cls);
            if (cls != MPI_ERR_COUNT) fail("counts that differ gave error class " + std::to_string(cls) + ", not MPI_ERR_COUNT");
            for (size_t i = size_t(n); i < out.size(); ++i)
                if (out[i] != -7) fail("counts that differ: written past the receive buffer");
        }
        for (int call = 0; call < 30; ++call) checked_call<int>(MPI_INT, MPI_SUM, "int SUM on c after", 3, call, false, c);
        MPI_Comm_free(&c);
    }

    // 5. Beside a live persistent call.
#ifdef NB_ALLREDUCE_INIT
    {
        const int n = 4096;
        std::vector<float> pin(n), pout(n);
        MPI_Request req;
        if (NB_ALLREDUCE_INIT(pin.data(), pout.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req) !=
            MPI_SUCCESS)
            fail("MPI_Allreduce_init failed");
        const uint64_t known3 = counter("known_one_shots");
        for (int round = 0; round < 20; ++round) {
            for (int i = 0; i < n; ++i) pin[size_t(i)] = float(i % 7 + g_rank + round);
            MPI_Start(&req);
            for (int call = 0; call < 10; ++call)
                checked_call<double>(MPI_DOUBLE, MPI_SUM, "double SUM beside a persistent call", 2, call, false,
                                     MPI_COMM_WORLD);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            for (int i = 0; i < n; ++i)
                if (pout[size_t(i)] != float(g_size * (i % 7 + round) + g_size * (g_size - 1) / 2)) {
                    fail("the persistent allreduce beside the calls: item " + std::to_string(i) + " is " +
                         std::to_string(pout[size_t(i)]));
                    break;
                }
        }
        if (expect_known && counter("known_one_shots") - known3 < 100)
            fail("beside a live persistent call only " + std::to_string(counter("known_one_shots") - known3) +
                 " of 200 calls took the known one-shot");
        MPI_Request_free(&req);
    }
#endif

    // 6. A known call while a nonblocking one waits for it.
    {
        const int n = 4096;
        std::vector<float> xin(n), xout(n);
        MPI_Comm other;
        MPI_Comm_dup(MPI_COMM_WORLD, &other);
        for (int call = 0; call < 10; ++call)
            checked_call<double>(MPI_DOUBLE, MPI_SUM, "double SUM before", 2, call, false, MPI_COMM_WORLD);
        for (int round = 0; round < 5; ++round) {
            for (int i = 0; i < n; ++i) xin[size_t(i)] = float(i % 5 + g_rank + round);
            MPI_Request req;
            MPI_Iallreduce(xin.data(), xout.data(), n, MPI_FLOAT, MPI_SUM, other, &req);
            if (g_rank != 0) MPI_Wait(&req, MPI_STATUS_IGNORE);
            // (No PMPI reference here: the MPI's own collective would not
            // move nexar's Iallreduce along under NEXAR_PROGRESS=calls; the
            // sum is computed from every rank's input instead.)
            std::vector<double> in(2), out(2, -1), want(2, 0);
            fill(in, 2, round, g_rank);
            for (int r = 0; r < g_size; ++r) {
                std::vector<double> theirs(2);
                fill(theirs, 2, round, r);
                want[0] += theirs[0], want[1] += theirs[1];
            }
            if (MPI_Allreduce(in.data(), out.data(), 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS ||
                out != want)
                fail("double SUM beside a waiting Iallreduce: " + std::to_string(out[0]) + ", not " +
                     std::to_string(want[0]));
            if (g_rank == 0) MPI_Wait(&req, MPI_STATUS_IGNORE);
            for (int i = 0; i < n; ++i)
                if (xout[size_t(i)] != float(g_size * (i % 5 + round) + g_size * (g_size - 1) / 2)) {
                    fail("the Iallreduce beside the known call: item " + std::to_string(i));
                    break;
                }
        }
        MPI_Comm_free(&other);
    }

    // 7. Small persistent allreduces.
#ifdef NB_ALLREDUCE_INIT
    small_persistent();
#endif
    // 8. Small nonblocking allreduces.
    small_nonblocking();

    int total = 0;
    own_mpi(PMPI_Allreduce)(&g_errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("known_check: %d ranks, %" PRIu64 " known one-shots on rank 0, failures=%d\n", g_size,
               counter("known_one_shots"), total);
    MPI_Finalize();
    return total ? 1 : 0;
}
