// NEXAR_REPORT: what nexar did for the whole job, printed once by rank 0
// at MPI_Finalize (docs/user-guide.md, "The job report").
//
// Each process counts its calls by collective, mode (blocking, nonblocking,
// persistent), size class and path (runtime/report_table.h), and times the
// blocking calls nexar runs.  The MPI's estimate comes from the learner's
// trials (decide/path_learner.h), which time both paths on the same
// communicator and size in this very job: each blocking call nexar ran is
// given the mean time of this rank's warm MPI trials of its collective,
// buffers (in place or not, host or device) and size class, and the
// estimates are reduced with MAX over the ranks (the slowest rank's), as
// the times are.
//
// Cost: off (the default), a call loads a pointer (or two).  On, a call adds to a
// few counters, and nexar's blocking calls read the clock twice (a
// learner's trial reuses its own readings); the MPI's path reads no clock.
// Every rank reduces its counts once, at finalize.
#pragma once

#include <atomic>
#include <cstdint>

#include "algo/collective_kind.h"
#include "runtime/config.h"
#include "runtime/report_table.h"

namespace nexar {

class JobReport {
public:
    // A call the MPI ran; `bytes`: the vector's, sized as the learner sizes
    // calls (the whole vector for the reduce-scatter and the allgather).
    // (Its buffers' shape is not looked at: counted in shape 0.)
    void add_mpi(Collective kind, CallMode mode, uint64_t bytes);
    // A call nexar ran, its buffers of `shape` (ReportCounts::shape):
    // `seconds` its time on this rank (< 0: not timed).
    void add_nexar(Collective kind, CallMode mode, int shape, uint64_t bytes, ReportPath path, double seconds);
    // A learner's warm trial of the MPI (a blocking call, also counted by
    // add_mpi) of buffers of `shape` took `seconds` on this rank.
    void add_mpi_trial(Collective kind, int shape, uint64_t bytes, double seconds);
    // This process's counts so far.
    void snapshot(ReportCounts* out) const;

private:
    void add(size_t at, uint64_t value) { values_[at].fetch_add(value, std::memory_order_relaxed); }
    std::atomic<uint64_t> values_[ReportCounts::kValues] = {};
};

// The process's report, or null when NEXAR_REPORT is off.
inline std::atomic<JobReport*>& job_report_slot() {
    static std::atomic<JobReport*> report{nullptr};
    return report;
}
inline JobReport* job_report() { return job_report_slot().load(std::memory_order_acquire); }

// At start-up, with the job's settings (alike on every rank): counting
// begins where NEXAR_REPORT is on.
void start_job_report(const Config& cfg);
// At finalize, collective over MPI_COMM_WORLD where the report is on: the
// counts reduced to rank 0, which prints the table to stderr and, where
// NEXAR_REPORT names a file, writes it there as CSV.
void finish_job_report(const Config& cfg, int world_rank);

}  // namespace nexar
