// The nonblocking collectives' entry points, and the completion calls that
// move nexar's nonblocking calls along (call/nonblocking.h).
//
// A nonblocking call's request is a generalized request of the MPI's, which
// MPI completes only when nexar says so.  So every completion call is
// nexar's as well: while nexar has calls in flight it moves them along
// first (MPI_Test*, MPI_Request_get_status) or between tests (MPI_Wait*:
// it waits by testing, and once none of nexar's calls is left in flight,
// in MPI itself).  With none in flight each goes straight to the MPI's own.
// MPI_X and PMPI_X are both defined, for tools on either side, as for the
// collectives (shim/allreduce_shim.cc).
//
// The persistent collectives' initialization (MPI-4's MPI_X_init, Open MPI
// 4's MPIX_X_init), MPI_Start, MPI_Startall and MPI_Request_free are
// nexar's too: its persistent calls' requests are carriers that MPI_Start
// must start with the call (call/nonblocking.h).
#include <mpi.h>

#include "call/collective.h"
#include "call/nonblocking.h"
#include "mpi/pmpi.h"
#include "shim/shim.h"

namespace nexar {

namespace {

int start_here(const CollectiveCall& c, MPI_Request* request) {
    return shim_guard(c.name, c.comm, [&] { return start_nonblocking(c, request); });
}

int iallreduce_here(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                    MPI_Request* request) {
    return start_here(allreduce_call("MPI_Iallreduce", sendbuf, recvbuf, count, datatype, op, comm), request);
}

int ireduce_scatter_block_here(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                               MPI_Comm comm, MPI_Request* request) {
    return start_here(
        reduce_scatter_block_call("MPI_Ireduce_scatter_block", sendbuf, recvbuf, recvcount, datatype, op, comm),
        request);
}

int ireduce_scatter_here(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                         MPI_Comm comm, MPI_Request* request) {
    return start_here(reduce_scatter_call("MPI_Ireduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm),
                      request);
}

int iallgather_here(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
    return start_here(
        allgather_call("MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), request);
}

// Persistent collectives: nexar's, or where the ring cannot take them (on
// every rank alike), the MPI's own (`own`, with `args`); an MPI without
// them says so.
template <class Own, class... Args>
int init_here(const CollectiveCall& c, MPI_Request* request, Own own, Args... args) {
    return shim_guard(c.name, c.comm, [&] {
        return init_persistent(c, request, [&] {
            if (own) return own(args...);
            NEXAR_ERROR("%s: this MPI has no persistent collectives of its own for nexar to pass the call to",
                        c.name);
            return raise_mpi_error(c.comm, MPI_ERR_OTHER);
        });
    });
}

int allreduce_init_here(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                        MPI_Info info, MPI_Request* request) {
    return init_here(allreduce_call("MPI_Allreduce_init", sendbuf, recvbuf, count, datatype, op, comm), request,
                     pmpi::allreduce_init(), sendbuf, recvbuf, count, datatype, op, comm, info, request);
}

int reduce_scatter_block_init_here(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                                   MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
    return init_here(
        reduce_scatter_block_call("MPI_Reduce_scatter_block_init", sendbuf, recvbuf, recvcount, datatype, op, comm),
        request, pmpi::reduce_scatter_block_init(), sendbuf, recvbuf, recvcount, datatype, op, comm, info, request);
}

int allgather_init_here(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
    return init_here(
        allgather_call("MPI_Allgather_init", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm), request,
        pmpi::allgather_init(), sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
}

// A completion call: no exception crosses into the caller.
template <class Body>
int completion_guard(const char* name, const Body& body) {
    try {
        return body();
    } catch (...) {
        NEXAR_ERROR("%s: internal error", name);
    }
    return raise_mpi_error(MPI_COMM_WORLD, MPI_ERR_INTERN);
}

// A persistent call of nexar's completes its carrier request successfully
// even when it failed (call/nonblocking.h): a completion call gives the
// call's error in its place.  One request completed:
int report_one(MPI_Request request, MPI_Status* status, int rc) {
    const int error = take_persistent_error(request);
    if (error == MPI_SUCCESS) return rc;
    if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = error;
    return error;
}

// `n` requests completed, the k-th of them requests[index(k)] with its
// status in statuses[k]: MPI_ERR_IN_STATUS where one failed (the call's
// own error where the statuses are ignored).
template <class Index>
int report_many(int n, const Index& index, MPI_Request requests[], MPI_Status statuses[], int rc) {
    int first_error = MPI_SUCCESS;
    for (int k = 0; k < n; ++k) {
        const int error = take_persistent_error(requests[index(k)]);
        if (error == MPI_SUCCESS) continue;
        if (statuses != MPI_STATUSES_IGNORE) {
            // MPI fills the statuses' errors only for MPI_ERR_IN_STATUS.
            if (first_error == MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
                for (int j = 0; j < n; ++j) statuses[j].MPI_ERROR = MPI_SUCCESS;
            statuses[k].MPI_ERROR = error;
        }
        if (first_error == MPI_SUCCESS) first_error = error;
    }
    if (first_error == MPI_SUCCESS) return rc;
    return statuses != MPI_STATUSES_IGNORE ? MPI_ERR_IN_STATUS : first_error;
}

int report_all(int count, MPI_Request requests[], MPI_Status statuses[], int rc) {
    return report_many(count, [](int k) { return k; }, requests, statuses, rc);
}

int report_some(const int* outcount, const int indices[], MPI_Request requests[], MPI_Status statuses[], int rc) {
    if (*outcount == MPI_UNDEFINED) return rc;
    return report_many(*outcount, [&](int k) { return indices[k]; }, requests, statuses, rc);
}

int report_any(const int* index, MPI_Request requests[], MPI_Status* status, int rc) {
    return *index == MPI_UNDEFINED ? rc : report_one(requests[*index], status, rc);
}

int wait_here(MPI_Request* request, MPI_Status* status) {
    return completion_guard("MPI_Wait", [&] {
        if (request) complete_alone(*request, true);  // a persistent one-shot alone: done, its request inactive in the MPI
        const int rc = wait_progressing([&](int* done) { return pmpi::test(request, done, status); },
                                        [&] { return pmpi::wait(request, status); });
        return report_one(*request, status, rc);
    });
}

int waitall_here(int count, MPI_Request requests[], MPI_Status statuses[]) {
    return completion_guard("MPI_Waitall", [&] {
        const int rc = wait_progressing([&](int* done) { return pmpi::testall(count, requests, done, statuses); },
                                        [&] { return pmpi::waitall(count, requests, statuses); });
        return report_all(count, requests, statuses, rc);
    });
}

int waitany_here(int count, MPI_Request requests[], int* index, MPI_Status* status) {
    return completion_guard("MPI_Waitany", [&] {
        const int rc =
            wait_progressing([&](int* done) { return pmpi::testany(count, requests, index, done, status); },
                             [&] { return pmpi::waitany(count, requests, index, status); });
        return report_any(index, requests, status, rc);
    });
}

int waitsome_here(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
    return completion_guard("MPI_Waitsome", [&] {
        const int rc = wait_progressing(
            [&](int* done) {
                const int rc = pmpi::testsome(incount, requests, outcount, indices, statuses);
                *done = *outcount != 0;  // some completed, or MPI_UNDEFINED: none active
                return rc;
            },
            [&] { return pmpi::waitsome(incount, requests, outcount, indices, statuses); });
        return report_some(outcount, indices, requests, statuses, rc);
    });
}

// The tests move nexar's calls along once, then ask MPI.  (A persistent
// one-shot that runs alone is moved by its own MPI_Test alone.)
template <class Test>
int test_here(const char* name, const Test& test, MPI_Request* one = nullptr) {
    return completion_guard(name, [&] {
        if (!one || !complete_alone(*one, false)) progress_nonblocking(true);
        return test();
    });
}

int test_one_here(MPI_Request* request, int* flag, MPI_Status* status) {
    return test_here(
        "MPI_Test",
        [&] {
            const int rc = pmpi::test(request, flag, status);
            return *flag ? report_one(*request, status, rc) : rc;
        },
        request);
}

int testall_here(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
    return test_here("MPI_Testall", [&] {
        const int rc = pmpi::testall(count, requests, flag, statuses);
        return *flag ? report_all(count, requests, statuses, rc) : rc;
    });
}

int testany_here(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
    return test_here("MPI_Testany", [&] {
        const int rc = pmpi::testany(count, requests, index, flag, status);
        return *flag ? report_any(index, requests, status, rc) : rc;
    });
}

int testsome_here(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
    return test_here("MPI_Testsome", [&] {
        const int rc = pmpi::testsome(incount, requests, outcount, indices, statuses);
        return report_some(outcount, indices, requests, statuses, rc);
    });
}

// (The request stays active: its error is reported by the call that
// completes it.)
int request_get_status_here(MPI_Request request, int* flag, MPI_Status* status) {
    return test_here("MPI_Request_get_status", [&] { return pmpi::request_get_status(request, flag, status); });
}

int start_request_here(MPI_Request* request) {
    return completion_guard("MPI_Start", [&] { return start_request(request); });
}

int startall_here(int count, MPI_Request requests[]) {
    return completion_guard("MPI_Startall", [&] {
        for (int i = 0; i < count; ++i) {
            const int rc = start_request(&requests[i]);
            if (rc != MPI_SUCCESS) return rc;
        }
        return MPI_SUCCESS;
    });
}

int request_free_here(MPI_Request* request) {
    return completion_guard("MPI_Request_free", [&] { return free_request(request); });
}

using IallreduceFn = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
using IreduceScatterBlockFn = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
using IreduceScatterFn = int (*)(const void*, void*, const int[], MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*);
using IallgatherFn = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Request*);
using WaitFn = int (*)(MPI_Request*, MPI_Status*);
using WaitallFn = int (*)(int, MPI_Request[], MPI_Status[]);
using WaitanyFn = int (*)(int, MPI_Request[], int*, MPI_Status*);
using WaitsomeFn = int (*)(int, MPI_Request[], int*, int[], MPI_Status[]);
using TestFn = int (*)(MPI_Request*, int*, MPI_Status*);
using TestallFn = int (*)(int, MPI_Request[], int*, MPI_Status[]);
using TestanyFn = int (*)(int, MPI_Request[], int*, int*, MPI_Status*);
using TestsomeFn = int (*)(int, MPI_Request[], int*, int[], MPI_Status[]);
using RequestGetStatusFn = int (*)(MPI_Request, int*, MPI_Status*);
using StartFn = int (*)(MPI_Request*);
using StartallFn = int (*)(int, MPI_Request[]);
using RequestFreeFn = int (*)(MPI_Request*);

}  // namespace
}  // namespace nexar

using namespace nexar;

extern "C" {

// ---------------------------------------------------------------- nonblocking collectives
NEXAR_SHIM_ENTRY(Iallreduce, IallreduceFn, iallreduce_here,
            (const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
             MPI_Request* request),
            (sendbuf, recvbuf, count, datatype, op, comm, request))
NEXAR_SHIM_ENTRY(Ireduce_scatter_block, IreduceScatterBlockFn, ireduce_scatter_block_here,
            (const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
             MPI_Request* request),
            (sendbuf, recvbuf, recvcount, datatype, op, comm, request))
NEXAR_SHIM_ENTRY(Ireduce_scatter, IreduceScatterFn, ireduce_scatter_here,
            (const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm, MPI_Request* request),
            (sendbuf, recvbuf, recvcounts, datatype, op, comm, request))
NEXAR_SHIM_ENTRY(Iallgather, IallgatherFn, iallgather_here,
            (const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
             MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request),
            (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request))

// ---------------------------------------------------------------- completion calls
NEXAR_SHIM_ENTRY(Wait, WaitFn, wait_here, (MPI_Request * request, MPI_Status* status), (request, status))
NEXAR_SHIM_ENTRY(Waitall, WaitallFn, waitall_here, (int count, MPI_Request requests[], MPI_Status statuses[]),
            (count, requests, statuses))
NEXAR_SHIM_ENTRY(Waitany, WaitanyFn, waitany_here, (int count, MPI_Request requests[], int* index, MPI_Status* status),
            (count, requests, index, status))
NEXAR_SHIM_ENTRY(Waitsome, WaitsomeFn, waitsome_here,
            (int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]),
            (incount, requests, outcount, indices, statuses))
NEXAR_SHIM_ENTRY(Test, TestFn, test_one_here, (MPI_Request * request, int* flag, MPI_Status* status),
            (request, flag, status))
NEXAR_SHIM_ENTRY(Testall, TestallFn, testall_here, (int count, MPI_Request requests[], int* flag, MPI_Status statuses[]),
            (count, requests, flag, statuses))
NEXAR_SHIM_ENTRY(Testany, TestanyFn, testany_here,
            (int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status),
            (count, requests, index, flag, status))
NEXAR_SHIM_ENTRY(Testsome, TestsomeFn, testsome_here,
            (int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]),
            (incount, requests, outcount, indices, statuses))
NEXAR_SHIM_ENTRY(Request_get_status, RequestGetStatusFn, request_get_status_here,
            (MPI_Request request, int* flag, MPI_Status* status), (request, flag, status))

// ---------------------------------------------------------------- persistent collectives
// MPI-4's names, and Open MPI 4's MPIX_ ones (mpi-ext.h).
#define NEXAR_PERSISTENT(Name, Fn, Here, Params, Args) \
    NEXAR_SHIM_ENTRY_AS(MPI, Name, Fn, Here, Params, Args) \
    NEXAR_SHIM_ENTRY_AS(MPIX, Name, Fn, Here, Params, Args)
NEXAR_PERSISTENT(Allreduce_init, pmpi::AllreduceInitFn, allreduce_init_here,
                 (const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                  MPI_Info info, MPI_Request* request),
                 (sendbuf, recvbuf, count, datatype, op, comm, info, request))
NEXAR_PERSISTENT(Reduce_scatter_block_init, pmpi::ReduceScatterBlockInitFn, reduce_scatter_block_init_here,
                 (const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm, MPI_Info info, MPI_Request* request),
                 (sendbuf, recvbuf, recvcount, datatype, op, comm, info, request))
NEXAR_PERSISTENT(Allgather_init, pmpi::AllgatherInitFn, allgather_init_here,
                 (const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request),
                 (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request))
NEXAR_SHIM_ENTRY(Start, StartFn, start_request_here, (MPI_Request * request), (request))
NEXAR_SHIM_ENTRY(Startall, StartallFn, startall_here, (int count, MPI_Request requests[]), (count, requests))
NEXAR_SHIM_ENTRY(Request_free, RequestFreeFn, request_free_here, (MPI_Request * request), (request))

}  // extern "C"
