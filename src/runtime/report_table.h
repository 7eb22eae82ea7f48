// NEXAR_REPORT's table (runtime/job_report.h): from the job's counts,
// reduced over its ranks, to rows merged over size classes, and from rows
// to the text rank 0 prints and the CSV it writes.  Pure: no MPI, no clock
// (test/unit/report_table_test.cc drives it with counts of its own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algo/collective_kind.h"

namespace nexar {

// Which way a call went.  nexar's paths are its algorithms (algo/); the
// hierarchical allreduce of device buffers through IPC counts as ipc.
enum class ReportPath : uint8_t { mpi = 0, ring = 1, one_shot = 2, hierarchical = 3, ipc = 4, halving_doubling = 5 };
constexpr int kReportPaths = 6;
// "MPI", "ring", "one-shot", "hierarchical", "IPC", "halving-doubling"
const char* report_path_name(ReportPath p);

// How the application called it.
enum class CallMode : uint8_t { blocking = 0, nonblocking = 1, persistent = 2 };
constexpr int kCallModes = 3;
// "MPI_Allreduce", "MPI_Iallreduce", "MPI_Allreduce_init" (the reduce-scatter's
// rows stand for MPI_Reduce_scatter and MPI_Reduce_scatter_block alike).
std::string report_call_name(Collective kind, CallMode mode);

// One process's counts, or the job's (each value reduced with MAX over the
// ranks: for calls on MPI_COMM_WORLD every rank's counts are the same, and
// a time or an estimate is the slowest rank's).  Flat, so that one
// MPI_Reduce takes it.  Calls are told apart by the buffers' shape too (in
// place or not, host or device memory: what the learner tells apart), so
// that each call's estimate comes from trials of its own kind.
struct ReportCounts {
    static constexpr int kClasses = 64;  // size classes: floor(log2(bytes)), as the learner's
    static constexpr int kShapes = 4;
    static int shape(bool in_place, bool device) { return int(in_place) * 2 + int(device); }
    // Per cell (collective, mode, shape, size class, path): calls, bytes,
    // and the nanoseconds of those calls (nexar's blocking calls only: nexar
    // reads no clock on the MPI's path, and a nonblocking call's time is the
    // application's too).  The estimate fields are filled on each rank
    // before the reduction (fill_estimates): of nexar's blocking calls, those
    // whose shape and class had warm MPI trials, their time on nexar, and
    // the MPI's estimated time for them.
    enum CellField : size_t {
        calls = 0, bytes = 1, nanos = 2, estimated_calls = 3, estimated_nanos = 4, estimate_nanos = 5, kCellFields = 6
    };
    static constexpr size_t kCells = size_t(kCollectives) * kCallModes * kShapes * kClasses * kReportPaths;
    // Per (collective, shape, size class): the learner's warm trials of the
    // MPI (decide/path_learner.h) on this rank, and their time.
    enum TrialField : size_t { mpi_trials = 0, mpi_trial_nanos = 1, kTrialFields = 2 };
    static constexpr size_t kTrialCells = size_t(kCollectives) * kShapes * kClasses;
    static constexpr size_t kValues = kCells * kCellFields + kTrialCells * kTrialFields;

    static size_t cell(Collective kind, CallMode mode, int shape, int size_class, ReportPath path) {
        return ((((size_t(kind) * kCallModes + size_t(mode)) * kShapes + size_t(shape)) * kClasses +
                 size_t(size_class)) * kReportPaths + size_t(path)) * kCellFields;
    }
    static size_t trials(Collective kind, int shape, int size_class) {
        return kCells * kCellFields + ((size_t(kind) * kShapes + size_t(shape)) * kClasses + size_t(size_class)) *
                                          kTrialFields;
    }

    uint64_t values[kValues] = {};
};

// One rank's counts, before the reduction: each blocking call nexar ran is
// given the mean of this rank's warm MPI trials of its collective, shape
// and size class, where there were any (the estimate fields).
void fill_estimates(ReportCounts& rank);

// One line of the table: calls of one collective and mode, in the size
// classes from..to, that took one path.
struct ReportRow {
    Collective kind = Collective::allreduce;
    CallMode mode = CallMode::blocking;
    int from = 0, to = 0;  // size classes (the row's sizes: 2^from up to below 2^(to+1))
    ReportPath path = ReportPath::mpi;
    uint64_t calls = 0, bytes = 0;
    double seconds = -1;   // < 0: not timed
    // Of these calls, those with an MPI estimate (their buffers' kind and
    // size had warm MPI trials), their time on nexar, and the MPI's
    // estimated time for them (< 0: none has one).
    uint64_t estimated_calls = 0;
    double estimated_seconds = 0;
    double estimate = -1;
};

// The rows, by collective, mode and size (the shapes summed); consecutive
// classes merge where they took the same paths and each path's calls are
// estimated alike (all, some or none of them).  `merge` false: a row per
// size class and path (the CSV's).
std::vector<ReportRow> report_rows(const ReportCounts& job, bool merge = true);

// What the text says of the job besides its rows.
struct ReportJob {
    int ranks = 0, nodes = 0;
    std::string nexar_version, mpi;  // "0.2.0", "Open MPI 4.1.4"
    bool enabled = true;             // NEXAR_ENABLE
    bool learnt = true;              // NEXAR_THRESHOLD_BYTES=auto (else a fixed threshold: no trials)
};

// The job's totals, from its rows.
struct ReportTotals {
    uint64_t calls = 0, bytes = 0;              // every call
    uint64_t nexar_calls = 0, nexar_bytes = 0;  // those nexar ran
    // nexar's calls with an estimate: their time, and the MPI's estimate
    uint64_t estimated_calls = 0;
    double nexar_seconds = 0, estimate_seconds = 0;
    // nexar's calls without one: nonblocking or persistent; blocking ones
    // whose kind and size had no warm MPI trial
    uint64_t unmeasured_nonblocking = 0, unmeasured_blocking = 0;
    bool partial = false;  // some row's estimate is for part of its calls
};
ReportTotals report_totals(const std::vector<ReportRow>& rows);

// The table and its closing line, for stderr ("nexar report: ..." lines).
std::string report_text(const std::vector<ReportRow>& rows, const ReportJob& job);
// The rows as CSV (a row per size class: report_rows(job, false)), with a
// header line:
// collective,mode,size_from,size_to,calls,bytes,path,seconds,mpi_estimate_seconds,estimated_calls,estimated_seconds,note
// (size_from, size_to: the class's lower bound; empty seconds: not timed;
// empty estimate: not measured, the note says why; estimated_calls and
// estimated_seconds: the calls the estimate is for, and their time on nexar).
std::string report_csv(const std::vector<ReportRow>& rows, const ReportJob& job);

// NEXAR_REPORT=FILE's name: "%j" becomes the job's id, "%p" rank 0's
// process id, "%%" a percent sign; anything else stays as it is.
std::string expand_report_path(const std::string& pattern, const std::string& job_id, long pid);

// "12.3 ms", "1.05 s", "830 us"
std::string format_seconds(double seconds);

}  // namespace nexar
