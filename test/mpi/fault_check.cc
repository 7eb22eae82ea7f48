// MPI fault and semantics checks, one mode per run (linked with -lnexar_pmpi,
// run with NEXAR_HOST_BUFFERS=1 and NEXAR_THRESHOLD_BYTES=0 so that nexar's
// dispatch sees every call):
//
//   errors          bad arguments: MPI_Allreduce (nexar) must return the
//                   same error class as PMPI_Allreduce under MPI_ERRORS_RETURN
//   count-mismatch  ranks pass different counts: every rank gets
//                   MPI_ERR_COUNT, nothing is written past a buffer, and the
//                   communicator still works afterwards
//   kill            rank 1 dies (SIGKILL) in the middle of a ring: rank 0
//                   gets an error within NEXAR_TIMEOUT_S instead of hanging,
//                   reports it and aborts the job
//   stall           the same with rank 1 stopped (SIGSTOP), which no
//                   transport notices: only NEXAR_TIMEOUT_S can catch it
//   kill-node       a whole node fails: every rank on the node of the last
//                   world rank (MPI_COMM_TYPE_SHARED) dies (SIGKILL) in the
//                   middle of a ring; rank 0, on another node, gets an error
//                   within NEXAR_TIMEOUT_S, reports it and aborts the job.
//                   Also checks that the shared-memory split agrees with the
//                   processor names (test/cluster/run-cluster-tests.sh)
//   stall-node      the same with the node's ranks stopped (SIGSTOP): a hung
//                   node, whose connections stay open, so that only
//                   NEXAR_TIMEOUT_S can catch it
//   oom             ring scratch cannot be allocated (run under a small
//                   `ulimit -v`): a warning, the call passes through, the
//                   result is right
//   threads         MPI_THREAD_MULTIPLE: threads run allreduces on their own
//                   communicators at the same time, all results exact
//   ikill, istall   kill and stall for an MPI_Iallreduce, pstall for a
//                   persistent allreduce: the request completes with the
//                   error within NEXAR_TIMEOUT_S, and the other requests of
//                   the same MPI_Waitall complete; istall-node and
//                   pstall-node the same for a stalled node
//   kill-small      a persistent one-shot allreduce whose peer died
//   kill-meet, stall-meet, kill-known, stall-known
//                   a small blocking allreduce whose peer died or stopped
//                   before its meeting on the boards, or before a known
//                   one-shot; ikill-known, istall-known the same for a
//                   known MPI_Iallreduce (published at its start, reduced
//                   in its MPI_Wait)
//
// Every victim says when it stops itself, and rank 0 when it called and got
// its error (test/fault_clock.h): test/lib.sh's check_fault_report measures
// the error from the stall.
#include <mpi.h>

#include "../fault_clock.h"
#include "../own_mpi.h"
#include <algorithm>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nexar/nexar.h"
#include "persistent.h"

namespace {

int g_rank = 0, g_size = 1, g_failures = 0;

void expect(bool ok, const std::string& what) {
    if (!ok) {
        fprintf(stderr, "FAIL [rank %d]: %s\n", g_rank, what.c_str());
        ++g_failures;
    }
}

int error_class(int rc) {
    int cls = rc;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    return cls;
}

// Rank 0's report of a fault run, the line test/lib.sh's check_fault_report
// reads: the class, the call's time, and when it was called and returned
// (test/fault_clock.h), to be set against the victims' stop times.
void report_error(const char* name, int rc, double took, const FaultClock& called, const FaultClock& returned) {
    fprintf(stderr, "fault_check %s: rank 0 got class %d after %.2f s (called at %s, error at %s)\n", name,
            error_class(rc), took, called.text, returned.text);
}

void mode_errors() {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::vector<float> a(1024, 1.0f), b(1024);
    struct Case {
        const char* name;
        const void* s;
        void* r;
        int count;
        MPI_Datatype dt;
        MPI_Op op;
        MPI_Comm comm;
        int expect_class;  // -1: whatever MPI returns
    };
    const Case cases[] = {
        // MPICH 4.0 does not check this one and crashes; nexar reports it.
        {"negative count", a.data(), b.data(), -1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_ERR_COUNT},
        {"sendbuf == recvbuf without MPI_IN_PLACE", a.data(), a.data(), 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, -1},
        // Open MPI 4.1 does not check this one and crashes; nexar reports it.
        {"null receive buffer", a.data(), nullptr, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_ERR_BUFFER},
        {"null send buffer", nullptr, b.data(), 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_ERR_BUFFER},
        {"MPI_DATATYPE_NULL", a.data(), b.data(), 1024, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD, -1},
        {"MPI_OP_NULL", a.data(), b.data(), 1024, MPI_FLOAT, MPI_OP_NULL, MPI_COMM_WORLD, -1},
        // MPICH 4.0 (Debian's build) aborts on an op its type does not
        // take; nexar reports it, with Open MPI's class.
        {"MPI_LAND on MPI_FLOAT", a.data(), b.data(), 1024, MPI_FLOAT, MPI_LAND, MPI_COMM_WORLD, MPI_ERR_OP},
        {"MPI_BAND on MPI_DOUBLE", a.data(), b.data(), 512, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD, MPI_ERR_OP},
        {"MPI_SUM on MPI_C_BOOL", a.data(), b.data(), 1024, MPI_C_BOOL, MPI_SUM, MPI_COMM_WORLD, MPI_ERR_OP},
        {"MPI_COMM_NULL", a.data(), b.data(), 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_NULL, -1},
    };
    for (const Case& c : cases) {
        int mine = MPI_Allreduce(c.s, c.r, c.count, c.dt, c.op, c.comm);
        if (c.expect_class >= 0) {
            expect(error_class(mine) == c.expect_class, std::string(c.name) + ": expected class " +
                                                            std::to_string(c.expect_class) + ", got " +
                                                            std::to_string(error_class(mine)));
            continue;
        }
        int theirs = own_mpi(PMPI_Allreduce)(c.s, c.r, c.count, c.dt, c.op, c.comm);
        char buf[200];
        snprintf(buf, sizeof buf, "%s: nexar returned class %d, MPI returned class %d", c.name, error_class(mine),
                 error_class(theirs));
        expect(theirs != MPI_SUCCESS, std::string(c.name) + ": MPI accepted it (is MPI's parameter checking off?)");
        expect(error_class(mine) == error_class(theirs), buf);
    }
    // A valid call still works afterwards.
    int rc = MPI_Allreduce(a.data(), b.data(), 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    expect(rc == MPI_SUCCESS && b[0] == float(g_size), "a valid call after the errors");
}

void mode_count_mismatch() {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    const int base = 1 << 20, count = base + (g_rank == 0 ? 0 : 7), guard = 64;
    // The `guard` elements after a receive buffer of `n` still hold -7.
    auto untouched_after = [](const std::vector<int>& v, int n, const char* what) {
        for (int i = n; i < n + guard; ++i)
            if (v[size_t(i)] != -7) return expect(false, what);
    };
    std::vector<int> in(size_t(count) + guard, 1), out(size_t(count) + guard, -7);
    int rc = MPI_Allreduce(in.data(), out.data(), count, MPI_INT, MPI_SUM, comm);
    expect(error_class(rc) == MPI_ERR_COUNT, "mismatched counts must give MPI_ERR_COUNT, got class " +
                                                 std::to_string(error_class(rc)));
    untouched_after(out, count, "written past the receive buffer");
    // The communicator is still usable.
    rc = MPI_Allreduce(in.data(), out.data(), base, MPI_INT, MPI_SUM, comm);
    expect(rc == MPI_SUCCESS && out[0] == g_size && out[size_t(base) - 1] == g_size, "an allreduce after the mismatch");
    // The same for the reduce-scatter and the allgather: a block count that
    // differs, and (MPI_Reduce_scatter) recvcounts arrays that differ.
    const int block = base / 4 + (g_rank == 0 ? 0 : 3);
    std::vector<int> big(size_t(block + 3) * size_t(g_size) + guard, 1), small(size_t(block) + guard, -7);
    rc = MPI_Reduce_scatter_block(big.data(), small.data(), block, MPI_INT, MPI_SUM, comm);
    expect(error_class(rc) == MPI_ERR_COUNT, "MPI_Reduce_scatter_block with mismatched counts: class " +
                                                 std::to_string(error_class(rc)));
    std::vector<int> counts(size_t(g_size), base / 4);
    counts[size_t(g_size - 1)] += g_rank == 0 ? 0 : 5;
    rc = MPI_Reduce_scatter(big.data(), small.data(), counts.data(), MPI_INT, MPI_SUM, comm);
    expect(error_class(rc) == MPI_ERR_COUNT, "MPI_Reduce_scatter with mismatched recvcounts: class " +
                                                 std::to_string(error_class(rc)));
    rc = MPI_Allgather(small.data(), block, MPI_INT, big.data(), block, MPI_INT, comm);
    expect(error_class(rc) == MPI_ERR_COUNT, "MPI_Allgather with mismatched counts: class " +
                                                 std::to_string(error_class(rc)));
    untouched_after(small, block, "the reduce-scatter wrote past the receive buffer");
    // A NULL receive buffer on one rank only: MPI_ERR_BUFFER on every rank
    // (agreed), never one rank in PMPI while the others wait in the ring.
    rc = MPI_Allgather(small.data(), base / 4, MPI_INT, g_rank == 1 ? nullptr : big.data(), base / 4, MPI_INT, comm);
    expect(error_class(rc) == MPI_ERR_BUFFER, "MPI_Allgather with a NULL receive buffer on rank 1: class " +
                                                  std::to_string(error_class(rc)));
    // Still usable: a reduce-scatter with matching counts takes the ring.
    rc = MPI_Reduce_scatter_block(big.data(), small.data(), base / 4, MPI_INT, MPI_SUM, comm);
    expect(rc == MPI_SUCCESS && small[0] == g_size && small[size_t(base / 4) - 1] == g_size,
           "a reduce-scatter after the mismatches");
    nexar_stats_t st;
    nexar_get_stats(&st);
    expect(st.ring_calls >= 2, "the calls after the mismatches must take the ring");
    MPI_Comm_free(&comm);
}

// A ring that fails on one communicator closes the endpoints it shares
// with the others (one per peer process); another communicator's next call
// must still take the ring, on fresh endpoints, with the right result.
// The failure: an erroneous call whose ranks pass types of different sizes
// with the same count (the per-call agreement checks counts, not types),
// so the ring sees segments of the wrong length.
void mode_shared_endpoint() {
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    MPI_Comm_set_errhandler(a, MPI_ERRORS_RETURN);
    const int n = 1 << 20;
    std::vector<double> x(size_t(n), 1.0), y(size_t(n), 0.0);
    int rc = MPI_Allreduce(x.data(), y.data(), n, MPI_DOUBLE, MPI_SUM, a);  // both contexts up
    expect(rc == MPI_SUCCESS && y[0] == g_size, "a first call on communicator a");
    rc = MPI_Allreduce(x.data(), y.data(), n, MPI_DOUBLE, MPI_SUM, b);
    expect(rc == MPI_SUCCESS && y[0] == g_size, "a first call on communicator b");
    rc = MPI_Allreduce(x.data(), y.data(), n, g_rank == 0 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, a);
    // The rank with the smaller type may see a complete (wrong) ring; the
    // other one waits for segments that never come and fails.
    int failed = rc != MPI_SUCCESS, any_failed = 0;
    own_mpi(PMPI_Allreduce)(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    expect(any_failed, "types of different sizes on communicator a must fail somewhere");
    nexar_stats_t before;
    nexar_get_stats(&before);
    std::fill(y.begin(), y.end(), 0.0);
    rc = MPI_Allreduce(x.data(), y.data(), n, MPI_DOUBLE, MPI_SUM, b);
    nexar_stats_t after;
    nexar_get_stats(&after);
    expect(rc == MPI_SUCCESS && y[0] == g_size && y[size_t(n) - 1] == g_size,
           "communicator b must still work after a's failure");
    expect(after.ring_calls == before.ring_calls + 1, "communicator b's call must take the ring");
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
}

// A 256 MiB in-place ring (a good fraction of a second) in the middle of
// which the ranks with `victim` set get `sig`; rank 0 reports the class it
// got and how long it took, and aborts the job as an application would.
//
// A victim is hit once its own ring has reduced a segment into the buffer
// (a sampled element is no longer 1): by then every rank has passed the
// agreement before the ring.  That agreement is a plain MPI collective,
// which hangs on a stopped peer as MPI's own collectives do, and no
// timeout may end it (ranks may arrive at a collective any time apart).
// A fixed delay of 20 ms raced with rank 0, which under load could reach
// the agreement after the victims had stopped.
//
// `how`: the ring as a blocking MPI_Allreduce, an MPI_Iallreduce or a
// persistent allreduce started once; the last two are completed by an
// MPI_Waitall that also holds a send and a receive of rank 0 to itself,
// which must complete while the ring's request reports the error.
enum class How { blocking, nonblocking, persistent };

int failed_ring(How how, float* a, int n, const char* name) {
    if (how == How::blocking) return MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Request reqs[3];
    int rc = MPI_SUCCESS;
    if (how == How::nonblocking) {
        rc = MPI_Iallreduce(MPI_IN_PLACE, a, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &reqs[0]);
    } else {
#ifdef NB_ALLREDUCE_INIT
        rc = NB_ALLREDUCE_INIT(MPI_IN_PLACE, a, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &reqs[0]);
        if (rc == MPI_SUCCESS) rc = MPI_Start(&reqs[0]);
#else
        fprintf(stderr, "fault_check %s: this MPI has no persistent collectives\n", name);
        return MPI_SUCCESS;
#endif
    }
    if (rc != MPI_SUCCESS) return rc;
    int in = 0, out = 7;
    MPI_Irecv(&in, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &reqs[1]);
    MPI_Isend(&out, 1, MPI_INT, 0, 5, MPI_COMM_SELF, &reqs[2]);
    MPI_Status st[3];
    for (MPI_Status& x : st) x.MPI_ERROR = MPI_SUCCESS;
    rc = MPI_Waitall(3, reqs, st);
    // The ring's own error, in its status; the others must have completed.
    // Anything else is reported as success, which the check fails.  (A
    // persistent request of nexar's is a carrier that MPI completes
    // successfully: nexar's MPI_Waitall reports the call's own error.)
    if (rc != MPI_ERR_IN_STATUS) {
        fprintf(stderr, "fault_check %s: MPI_Waitall returned %d, not MPI_ERR_IN_STATUS\n", name, rc);
        return MPI_SUCCESS;
    }
    if (error_class(st[1].MPI_ERROR) != MPI_SUCCESS || error_class(st[2].MPI_ERROR) != MPI_SUCCESS || in != 7) {
        fprintf(stderr, "fault_check %s: the other requests of the MPI_Waitall did not complete\n", name);
        return MPI_SUCCESS;
    }
    if (error_class(st[0].MPI_ERROR) != MPI_ERR_OTHER) {
        fprintf(stderr, "fault_check %s: the ring's request failed with class %d, not MPI_ERR_OTHER\n", name,
                error_class(st[0].MPI_ERROR));
        return MPI_SUCCESS;
    }
    if (how == How::persistent) {
        // Waited on again, inactive: it completes at once, with no error.
        const int again = MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
        if (again != MPI_SUCCESS) {
            fprintf(stderr, "fault_check %s: the inactive persistent request reported %d again\n", name, again);
            return MPI_SUCCESS;
        }
    }
    return st[0].MPI_ERROR;
}

void ring_with_victims(bool victim, int sig, const char* name, How how = How::blocking) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const size_t n = size_t(64) << 20;
    std::vector<float> a(n, 1.0f);
    MPI_Allreduce(MPI_IN_PLACE, a.data(), 1 << 20, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);  // contexts up
    std::fill(a.begin(), a.begin() + (1 << 20), 1.0f);
    if (victim) {
        // Every chunk's first segment is among the samples.  The ring writes
        // the buffer meanwhile: atomic loads of the elements' bits.
        std::thread([&a, n, sig] {
            auto stop = [sig] {
                fault_report_stop(g_rank, sig);
                raise(sig);  // SIGSTOP and SIGKILL act on the whole process
            };
            uint32_t one;
            const float f = 1.0f;
            memcpy(&one, &f, sizeof one);
            for (int waited_ms = 0; waited_ms < 20000; ++waited_ms) {  // at most 20 s
                for (size_t k = 0; k < 64; ++k)
                    if (__atomic_load_n(reinterpret_cast<const uint32_t*>(&a[k * (n / 64)]), __ATOMIC_RELAXED) != one)
                        return stop();
                usleep(1000);
            }
            stop();
        }).detach();
    }
    const FaultClock called;
    double t0 = MPI_Wtime();
    int rc = failed_ring(how, a.data(), int(n), name);
    double took = MPI_Wtime() - t0;
    const FaultClock returned;
    if (g_rank == 0) {
        // MPICH's launcher drops what it has not forwarded yet once
        // MPI_Abort starts killing: give it a moment.
        report_error(name, rc, took, called, returned);
        fflush(stderr);
        usleep(1000000);  // 0.3 s lost a report now and then under load
        MPI_Abort(MPI_COMM_WORLD, rc == MPI_SUCCESS ? 3 : 42);
    }
    pause();
}

// A one-shot allreduce (a small vector on one node, algo/one_shot.h) whose
// peer dies before its part: a persistent call, so that no agreement comes
// before the one-shot's wait.
void mode_kill_small() {
    const char* name = "kill-small";
#ifdef NB_ALLREDUCE_INIT
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::vector<float> a(1024, 1.0f);
    MPI_Request req;
    int rc = NB_ALLREDUCE_INIT(MPI_IN_PLACE, a.data(), int(a.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               MPI_INFO_NULL, &req);
    if (rc == MPI_SUCCESS && g_rank == 1) {
        fault_report_stop(g_rank, SIGKILL);
        raise(SIGKILL);
    }
    const FaultClock called;
    const double t0 = MPI_Wtime();
    if (rc == MPI_SUCCESS) rc = MPI_Start(&req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS && error_class(rc) != MPI_ERR_OTHER) {
        // Reported as success, which the check fails.
        fprintf(stderr, "fault_check %s: MPI_Wait returned class %d, not MPI_ERR_OTHER\n", name, error_class(rc));
        rc = MPI_SUCCESS;
    }
    if (g_rank == 0) {
        const double took = MPI_Wtime() - t0;
        report_error(name, rc, took, called, FaultClock());
        fflush(stderr);
        usleep(1000000);  // 0.3 s lost a report now and then under load
        MPI_Abort(MPI_COMM_WORLD, rc == MPI_SUCCESS ? 3 : 42);
    }
    pause();
#else
    if (g_rank == 0) fprintf(stderr, "fault_check %s: this MPI has no persistent collectives\n", name);
    ++g_failures;
#endif
}

// A blocking small allreduce on one node whose peer died or stopped
// before it: the call's agreement meets on the one-shot's boards
// (BoardMeeting), and no PMPI collective comes before the wait.  `known`:
// the same call as the one before, which every rank then takes as a known
// one-shot (call/known_one_shot.h, no meeting); else another op (MAX),
// which nothing remembers, so that its task meets.
// `nonblocking`: both calls are MPI_Iallreduce + MPI_Wait (the second, known,
// publishes at its start and waits in MPI_Wait: Engine::complete_alone).
int allreduce_now(const float* a, float* b, int n, MPI_Op op, bool nonblocking) {
    if (!nonblocking) return MPI_Allreduce(a, b, n, MPI_FLOAT, op, MPI_COMM_WORLD);
    MPI_Request req;
    int rc = MPI_Iallreduce(a, b, n, MPI_FLOAT, op, MPI_COMM_WORLD, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    return rc;
}

void mode_meet(int sig, const char* name, bool known, bool nonblocking = false) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::vector<float> a(256, 1.0f), b(256, 0.0f);
    // One call that both ranks make: the boards are in use and in step.
    int rc = allreduce_now(a.data(), b.data(), int(a.size()), MPI_SUM, nonblocking);
    if (rc == MPI_SUCCESS && b[0] != float(g_size)) {
        fprintf(stderr, "fault_check %s: rank %d: the first allreduce gave %g, not %d\n", name, g_rank, double(b[0]),
                g_size);
        rc = MPI_ERR_OTHER;
        ++g_failures;
    }
    if (g_rank == 1) {
        fault_report_stop(g_rank, sig);
        raise(sig);
    }
    const FaultClock called;
    const double t0 = MPI_Wtime();
    if (rc == MPI_SUCCESS)
        rc = allreduce_now(a.data(), b.data(), int(a.size()), known ? MPI_SUM : MPI_MAX, nonblocking);
    if (g_rank == 0) {
        report_error(name, rc, MPI_Wtime() - t0, called, FaultClock());
        fflush(stderr);
        usleep(1000000);  // 0.3 s lost a report now and then under load
        MPI_Abort(MPI_COMM_WORLD, rc == MPI_SUCCESS ? 3 : 42);
    }
    pause();
}

void mode_kill(int sig) { ring_with_victims(g_rank == 1, sig, sig == SIGKILL ? "kill" : "stall"); }
void mode_nonblocking_kill(int sig, How how, const char* name) { ring_with_victims(g_rank == 1, sig, name, how); }

// Which node each world rank is on: the world rank of its node's leader
// (rank 0 of its MPI_COMM_TYPE_SHARED communicator).  Ranks with the same
// leader must have the same processor name, others different ones.
std::vector<int> node_leaders() {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int leader = g_rank;
    MPI_Bcast(&leader, 1, MPI_INT, 0, node);
    MPI_Comm_free(&node);
    std::vector<int> leaders(size_t(g_size), 0);
    MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, MPI_COMM_WORLD);

    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    std::vector<char> names(size_t(g_size) * MPI_MAX_PROCESSOR_NAME);
    MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                  MPI_COMM_WORLD);
    auto name_of = [&](int r) { return std::string(&names[size_t(r) * MPI_MAX_PROCESSOR_NAME]); };
    for (int r = 0; r < g_size; ++r)
        expect((leaders[size_t(r)] == leaders[size_t(g_rank)]) == (name_of(r) == name_of(g_rank)),
               "MPI_COMM_TYPE_SHARED puts world ranks " + std::to_string(g_rank) + " (" + name_of(g_rank) + ") and " +
                   std::to_string(r) + " (" + name_of(r) + ") " +
                   (leaders[size_t(r)] == leaders[size_t(g_rank)] ? "together" : "apart"));
    if (g_rank == 0) {
        std::string layout;
        for (int r = 0; r < g_size; ++r) layout += " " + std::to_string(r) + ":" + name_of(r);
        printf("fault_check: ranks on nodes:%s\n", layout.c_str());
        fflush(stdout);
    }
    return leaders;
}

void mode_kill_node(int sig, How how = How::blocking, const char* name = nullptr) {
    if (!name) name = sig == SIGKILL ? "kill-node" : "stall-node";
    std::vector<int> leaders = node_leaders();
    const int victim = leaders[size_t(g_size) - 1];  // the last world rank's node
    if (leaders[0] == victim) {
        if (g_rank == 0) printf("fault_check %s: rank 0 shares the last rank's node; it needs two nodes\n", name);
        ++g_failures;
    }
    // Nothing is killed when the layout is wrong: main() reports the failures.
    int any = 0;
    own_mpi(PMPI_Allreduce)(&g_failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) return;
    ring_with_victims(leaders[size_t(g_rank)] == victim, sig, name, how);
}

void mode_oom() {
    const size_t n = size_t(16) << 20;  // 64 MiB of float
    std::vector<float> a(n), b(n);
    for (size_t i = 0; i < n; ++i) a[i] = float(i % 5 + size_t(g_rank));
    // In place: only then does the UCX ring need receive slots.
    b = a;
    int rc = MPI_Allreduce(MPI_IN_PLACE, b.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    expect(rc == MPI_SUCCESS, "the call must succeed through MPI");
    for (size_t i = 0; i < n; ++i)
        if (b[i] != float(g_size * int(i % 5) + g_size * (g_size - 1) / 2)) {
            expect(false, "wrong result at " + std::to_string(i));
            break;
        }
    nexar_stats_t st;
    nexar_get_stats(&st);
    expect(st.ring_calls == 0 && st.fallback_calls == 1, "the call must fall back, not take the ring");
}

void mode_threads() {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided != MPI_THREAD_MULTIPLE) {
        if (g_rank == 0) printf("fault_check threads: MPI gives thread level %d, not MPI_THREAD_MULTIPLE\n", provided);
        ++g_failures;
        return;
    }
    const int nthreads = 3, iters = 30;
    std::vector<MPI_Comm> comms(nthreads);
    for (auto& c : comms) MPI_Comm_dup(MPI_COMM_WORLD, &c);
    std::vector<int> bad(nthreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < nthreads; ++t)
        threads.emplace_back([&, t] {
            for (int it = 0; it < iters; ++it) {
                size_t n = size_t(1000 + 7919 * (it + 1) * (t + 1) % 200000);
                std::vector<double> x(n), y(n);
                for (size_t i = 0; i < n; ++i) x[i] = double((i + size_t(g_rank) + size_t(t)) % 11);
                MPI_Allreduce(x.data(), y.data(), int(n), MPI_DOUBLE, MPI_SUM, comms[size_t(t)]);
                for (size_t i = 0; i < n; ++i) {
                    double want = 0;
                    for (int r = 0; r < g_size; ++r) want += double((i + size_t(r) + size_t(t)) % 11);
                    if (y[i] != want) {
                        ++bad[size_t(t)];
                        break;
                    }
                }
            }
        });
    for (auto& th : threads) th.join();
    for (int t = 0; t < nthreads; ++t) expect(bad[size_t(t)] == 0, "thread " + std::to_string(t) + " got wrong results");
    nexar_stats_t st;
    nexar_get_stats(&st);
    expect(st.ring_calls >= uint64_t(nthreads * iters), "every threaded call must take the ring");
    for (auto& c : comms) MPI_Comm_free(&c);
}

}  // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "threads") {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (mode == "errors") mode_errors();
    else if (mode == "count-mismatch") mode_count_mismatch();
    else if (mode == "kill") mode_kill(SIGKILL);
    else if (mode == "stall") mode_kill(SIGSTOP);
    else if (mode == "kill-node") mode_kill_node(SIGKILL);
    else if (mode == "stall-node") mode_kill_node(SIGSTOP);
    else if (mode == "istall-node") mode_kill_node(SIGSTOP, How::nonblocking, "istall-node");
    else if (mode == "pstall-node") mode_kill_node(SIGSTOP, How::persistent, "pstall-node");
    else if (mode == "threads") mode_threads();
    else if (mode == "shared-endpoint") mode_shared_endpoint();
    else if (mode == "oom") mode_oom();
    else if (mode == "ikill") mode_nonblocking_kill(SIGKILL, How::nonblocking, "ikill");
    else if (mode == "istall") mode_nonblocking_kill(SIGSTOP, How::nonblocking, "istall");
    else if (mode == "pstall") mode_nonblocking_kill(SIGSTOP, How::persistent, "pstall");
    else if (mode == "kill-small") mode_kill_small();
    else if (mode == "kill-meet") mode_meet(SIGKILL, "kill-meet", false);
    else if (mode == "stall-meet") mode_meet(SIGSTOP, "stall-meet", false);
    else if (mode == "kill-known") mode_meet(SIGKILL, "kill-known", true);
    else if (mode == "stall-known") mode_meet(SIGSTOP, "stall-known", true);
    else if (mode == "ikill-known") mode_meet(SIGKILL, "ikill-known", true, true);
    else if (mode == "istall-known") mode_meet(SIGSTOP, "istall-known", true, true);
    else {
        if (g_rank == 0) fprintf(stderr, "usage: fault_check errors|count-mismatch|kill|stall|kill-node|stall-node|istall-node|pstall-node|oom|threads|shared-endpoint|ikill|istall|pstall|kill-small|kill-meet|stall-meet|kill-known|stall-known|ikill-known|istall-known\n");
        ++g_failures;
    }
    int total = 0;
    own_mpi(PMPI_Allreduce)(&g_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("fault_check %s: failures=%d\n", mode.c_str(), total);
    MPI_Finalize();
    return total ? 1 : 0;
}
