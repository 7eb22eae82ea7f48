#include "runtime/job_report.h"

#include <mpi.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "base/log.h"
#include "decide/path_learner.h"
#include "mpi/mpi_family.h"
#include "mpi/pmpi.h"
#include "nexar/nexar.h"

namespace nexar {

namespace {

int size_class_of(uint64_t bytes) { return PathLearner::size_class(bytes); }
uint64_t nanos(double seconds) { return seconds > 0 ? uint64_t(seconds * 1e9 + 0.5) : 0; }

// The MPI's job id for "%j": the batch system's (with Slurm's step, as
// one allocation runs many jobs), else the MPI launcher's, else none
// (rank 0's process id stands in).  Only [A-Za-z0-9._-] kept.
std::string job_id(long pid) {
    static const char* const names[] = {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID",
                                        "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"};
    for (const char* name : names) {
        const char* v = getenv(name);
        if (!v || !*v) continue;
        std::string id(v);
        const char* step = getenv("SLURM_STEP_ID");
        if (!strcmp(name, "SLURM_JOB_ID") && step && *step) id += std::string(".") + step;
        for (char& c : id)
            if (!isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
        return id;
    }
    return "pid" + std::to_string(pid);
}

// "Open MPI 4.1.4", from the MPI the job runs on.
std::string running_mpi() {
    const MpiIdentity id = mpi_running();
    return id.family.empty() ? "an unknown MPI" : id.family + " " + id.version;
}

// Nodes of the job: ranks that are first on their node, summed.
int count_nodes() {
    MPI_Comm local = MPI_COMM_NULL;
    int local_rank = 0, first = 1, nodes = 0;
    if (pmpi::comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS &&
        local != MPI_COMM_NULL) {
        PMPI_Comm_rank(local, &local_rank);
        PMPI_Comm_free(&local);
        first = local_rank == 0;
    }
    pmpi::allreduce(&first, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return nodes;
}

void write_csv(const std::string& csv) {
    const char* setting = getenv("NEXAR_REPORT");  // rank 0's: its settings are the job's
    if (!setting) return;
    const std::string path = expand_report_path(setting, job_id(long(getpid())), long(getpid()));
    FILE* f = fopen(path.c_str(), "w");
    if (!f) {
        NEXAR_ERROR("NEXAR_REPORT: cannot write the report to %s: %s (the table above is all there is)", path.c_str(),
                    strerror(errno));
        return;
    }
    const bool written = fwrite(csv.data(), 1, csv.size(), f) == csv.size();
    if (fclose(f) != 0 || !written)
        NEXAR_ERROR("NEXAR_REPORT: writing %s failed: %s", path.c_str(), strerror(errno));
    else
        fprintf(stderr, "nexar report: written to %s\n", path.c_str());
}

}  // namespace

void JobReport::add_mpi(Collective kind, CallMode mode, uint64_t bytes) {
    const size_t at = ReportCounts::cell(kind, mode, 0, size_class_of(bytes), ReportPath::mpi);
    add(at + ReportCounts::calls, 1);
    add(at + ReportCounts::bytes, bytes);
}

void JobReport::add_nexar(Collective kind, CallMode mode, int shape, uint64_t bytes, ReportPath path,
                          double seconds) {
    const size_t at = ReportCounts::cell(kind, mode, shape, size_class_of(bytes), path);
    add(at + ReportCounts::calls, 1);
    add(at + ReportCounts::bytes, bytes);
    if (seconds >= 0) add(at + ReportCounts::nanos, nanos(seconds));
}

void JobReport::add_mpi_trial(Collective kind, int shape, uint64_t bytes, double seconds) {
    const size_t at = ReportCounts::trials(kind, shape, size_class_of(bytes));
    add(at + ReportCounts::mpi_trials, 1);
    add(at + ReportCounts::mpi_trial_nanos, nanos(seconds));
}

void JobReport::snapshot(ReportCounts* out) const {
    for (size_t i = 0; i < ReportCounts::kValues; ++i) out->values[i] = values_[i].load(std::memory_order_relaxed);
}

void start_job_report(const Config& cfg) {
    if (cfg.report == ReportSetting::off || job_report()) return;
    job_report_slot().store(new JobReport(), std::memory_order_release);  // lives as long as the process
}

void finish_job_report(const Config& cfg, int world_rank) {
    JobReport* report = job_report();
    if (cfg.report == ReportSetting::off || !report) return;
    auto mine = std::make_unique<ReportCounts>();
    auto job = std::make_unique<ReportCounts>();
    report->snapshot(mine.get());
    fill_estimates(*mine);  // this rank's trials, before the MAX
    const int nodes = count_nodes();
    if (PMPI_Reduce(mine->values, job->values, int(ReportCounts::kValues), MPI_UINT64_T, MPI_MAX, 0,
                    MPI_COMM_WORLD) != MPI_SUCCESS) {
        if (world_rank == 0) NEXAR_ERROR("NEXAR_REPORT: reducing the job's counts failed: no report");
        return;
    }
    if (world_rank != 0) return;
    ReportJob about;
    PMPI_Comm_size(MPI_COMM_WORLD, &about.ranks);
    about.nodes = nodes;
    about.nexar_version = NEXAR_VERSION;
    about.mpi = running_mpi();
    about.enabled = cfg.enable;
    about.learnt = cfg.learn;
    const std::vector<ReportRow> rows = report_rows(*job);
    fputs(report_text(rows, about).c_str(), stderr);
    if (cfg.report == ReportSetting::file) write_csv(report_csv(report_rows(*job, false), about));
}

}  // namespace nexar
