// Shared by the C and Fortran entry points.
#pragma once

#include <dlfcn.h>
#include <mpi.h>

#include <atomic>
#include <exception>

#include "base/log.h"
#include "call/collective.h"
#include "mpi/pmpi.h"
#include "runtime/runtime.h"

namespace nexar {

// Starts the runtime after MPI is initialized; never throws, never fails the job.
void shim_start_runtime();
// Stops it before MPI is finalized; never throws.
void shim_stop_runtime();

// Runs `dispatch` (call/collective.h); an internal error (only allocation
// failures throw) goes to the communicator's error handler, as any MPI
// error would, and never crosses into the caller.
template <class Dispatch>
int shim_guard(const char* name, MPI_Comm comm, const Dispatch& dispatch) {
    try {
        return dispatch();
    } catch (const std::exception& e) {
        NEXAR_ERROR("%s: internal error (%s)", name, e.what());
    } catch (...) {
        NEXAR_ERROR("%s: internal error", name);
    }
    return raise_mpi_error(comm, MPI_ERR_INTERN);
}
// The definition of `name` in a library loaded after this one, when it is
// not the MPI's own: a tool's.  Null when the next one is the MPI's.
template <class F>
F tool_after_us(const char* name) {
    void* next = dlsym(RTLD_NEXT, name);
    Dl_info info;
    if (!next || !dladdr(next, &info) || info.dli_fbase == pmpi::mpi_library_base()) return nullptr;
    return reinterpret_cast<F>(next);
}

// Set while a tool's MPI_X runs for nexar's MPI_X; its PMPI_X clears it.
inline thread_local bool t_awaiting_pmpi = false;

inline void reached_pmpi() { t_awaiting_pmpi = false; }

// Calls a tool's MPI_X, and says once if the call never came back through
// PMPI_X: the tool reaches the MPI some other way, and nexar cannot see it.
template <class F, class... Args>
int through_tool(F tool, const char* name, Args... args) {
    t_awaiting_pmpi = true;
    const int rc = tool(args...);
    if (t_awaiting_pmpi) {
        static std::atomic<bool> said{false};
        Dl_info info;
        if (!said.exchange(true))
            NEXAR_WARN("%s of %s, loaded after libnexar_pmpi, did not call P%s: nexar cannot take these calls. "
                       "Preload the tool first (LD_PRELOAD=\"tool.so libnexar_pmpi.so\")",
                       name, dladdr(reinterpret_cast<void*>(tool), &info) && info.dli_fname ? info.dli_fname : "a tool",
                       name);
    }
    t_awaiting_pmpi = false;
    return rc;
}

// Defines PMPI_<Name> (nexar's handling, `Here Args`) and MPI_<Name> (a
// tool after nexar sees the call first and comes back through PMPI_<Name>)
// for a call of type `Fn` with parameters `Params`; _AS(MPIX, ...) the
// same for MPIX_<Name> and PMPIX_<Name>.  Inside extern "C".
#define NEXAR_SHIM_ENTRY_AS(Prefix, Name, Fn, Here, Params, Args)                        \
    int P##Prefix##_##Name Params {                                                       \
        nexar::reached_pmpi();                                                            \
        return Here Args;                                                                 \
    }                                                                                     \
    int Prefix##_##Name Params {                                                          \
        static const auto tool = nexar::tool_after_us<Fn>(#Prefix "_" #Name);             \
        if (tool) return nexar::through_tool(tool, #Prefix "_" #Name, NEXAR_SHIM_UNPAREN Args); \
        return Here Args;                                                                 \
    }
#define NEXAR_SHIM_ENTRY(Name, Fn, Here, Params, Args) NEXAR_SHIM_ENTRY_AS(MPI, Name, Fn, Here, Params, Args)
#define NEXAR_SHIM_UNPAREN(...) __VA_ARGS__

// (The Fortran entries' way in.  An allreduce goes through its own entry,
// as the C one does: its small calls pass through, or take the known
// one-shot, before a task is built.)
inline int shim_intercept(const CollectiveCall& call) {
    return shim_guard(call.name, call.comm, [&] {
        if (call.kind == Collective::allreduce)
            return intercept_allreduce(call.sendbuf, call.recvbuf, call.count, call.datatype, call.op, call.comm,
                                       call.large_count, call.name);
        return intercept_collective(call);
    });
}

}  // namespace nexar
