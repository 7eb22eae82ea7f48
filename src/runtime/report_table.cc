#include "runtime/report_table.h"

#include <cstdio>

#include "base/log.h"

namespace nexar {

const char* report_path_name(ReportPath p) {
    switch (p) {
        case ReportPath::mpi: return "MPI";
        case ReportPath::ring: return "ring";
        case ReportPath::one_shot: return "one-shot";
        case ReportPath::hierarchical: return "hierarchical";
        case ReportPath::ipc: return "IPC";
        case ReportPath::halving_doubling: return "halving-doubling";
    }
    return "?";
}

std::string report_call_name(Collective kind, CallMode mode) {
    static const char* const names[kCollectives][kCallModes] = {
        {"MPI_Allreduce", "MPI_Iallreduce", "MPI_Allreduce_init"},
        {"MPI_Reduce_scatter", "MPI_Ireduce_scatter", "MPI_Reduce_scatter_init"},
        {"MPI_Allgather", "MPI_Iallgather", "MPI_Allgather_init"},
    };
    return names[int(kind)][int(mode)];
}

void fill_estimates(ReportCounts& rank) {
    uint64_t* v = rank.values;
    for (int k = 0; k < kCollectives; ++k)
        for (int shape = 0; shape < ReportCounts::kShapes; ++shape)
            for (int sc = 0; sc < ReportCounts::kClasses; ++sc) {
                const size_t t = ReportCounts::trials(Collective(k), shape, sc);
                const uint64_t trials = v[t + ReportCounts::mpi_trials];
                for (int p = 1; p < kReportPaths; ++p) {  // nexar's paths
                    const size_t at = ReportCounts::cell(Collective(k), CallMode::blocking, shape, sc, ReportPath(p));
                    const uint64_t calls = v[at + ReportCounts::calls];
                    const bool estimated = trials && calls;
                    v[at + ReportCounts::estimated_calls] = estimated ? calls : 0;
                    v[at + ReportCounts::estimated_nanos] = estimated ? v[at + ReportCounts::nanos] : 0;
                    v[at + ReportCounts::estimate_nanos] =
                        estimated ? uint64_t(double(v[t + ReportCounts::mpi_trial_nanos]) / double(trials) *
                                                 double(calls) + 0.5)
                                  : 0;
                }
            }
}

namespace {

constexpr int kClasses = ReportCounts::kClasses;

// One size class of one collective and mode, its shapes summed: what each
// path did.
struct ClassCounts {
    uint64_t calls[kReportPaths] = {}, bytes[kReportPaths] = {}, nanos[kReportPaths] = {};
    uint64_t estimated_calls[kReportPaths] = {}, estimated_nanos[kReportPaths] = {}, estimate_nanos[kReportPaths] = {};
    bool any() const {
        for (int p = 0; p < kReportPaths; ++p)
            if (calls[p]) return true;
        return false;
    }
    // Which paths it took, and how much of each path's calls has an
    // estimate (none, some, all): consecutive classes alike in this merge
    // into one range.
    unsigned signature() const {
        unsigned s = 0;
        for (int p = 0; p < kReportPaths; ++p) {
            const unsigned estimated = !estimated_calls[p] ? 0 : estimated_calls[p] < calls[p] ? 1 : 2;
            s |= ((calls[p] ? 1u : 0u) | estimated << 1) << (3 * p);
        }
        return s;
    }
};

ClassCounts class_counts(const ReportCounts& job, Collective kind, CallMode mode, int size_class) {
    ClassCounts c;
    for (int shape = 0; shape < ReportCounts::kShapes; ++shape)
        for (int p = 0; p < kReportPaths; ++p) {
            const uint64_t* v = job.values + ReportCounts::cell(kind, mode, shape, size_class, ReportPath(p));
            c.calls[p] += v[ReportCounts::calls];
            c.bytes[p] += v[ReportCounts::bytes];
            c.nanos[p] += v[ReportCounts::nanos];
            c.estimated_calls[p] += v[ReportCounts::estimated_calls];
            c.estimated_nanos[p] += v[ReportCounts::estimated_nanos];
            c.estimate_nanos[p] += v[ReportCounts::estimate_nanos];
        }
    return c;
}

// "1.5 GiB", "12.0 KiB", "900 B"
std::string format_volume(uint64_t b) {
    static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = double(b);
    int u = 0;
    while (v >= 1024 && u < 5) v /= 1024, ++u;
    char buf[32];
    snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

std::string size_range(const ReportRow& r) {
    std::string s = format_bytes(uint64_t(1) << r.from);
    if (r.to > r.from) s += "-" + format_bytes(uint64_t(1) << r.to);
    return s;
}

// Why a row has no time or no estimate ("" where it has both, or is the MPI's).
std::string row_note(const ReportRow& r, const ReportJob& job) {
    if (r.path == ReportPath::mpi) return "";
    if (r.mode != CallMode::blocking) return "nonblocking: its time is the application's too";
    if (!job.learnt) return "a fixed threshold: no trials";
    if (r.estimated_calls == r.calls) return "";
    return r.estimated_calls ? "estimate for part of the calls: the others' kind of buffers had no warm MPI trial"
                             : "no warm trial of the MPI for these buffers and sizes";
}

}  // namespace

std::vector<ReportRow> report_rows(const ReportCounts& job, bool merge) {
    std::vector<ReportRow> rows;
    for (int k = 0; k < kCollectives; ++k)
        for (int m = 0; m < kCallModes; ++m) {
            const Collective kind = Collective(k);
            const CallMode mode = CallMode(m);
            size_t open = rows.size();  // the range's first row
            unsigned open_signature = 0;
            for (int sc = 0; sc < kClasses; ++sc) {
                const ClassCounts c = class_counts(job, kind, mode, sc);
                if (!c.any()) continue;
                const bool extend = merge && open < rows.size() && c.signature() == open_signature;
                if (!extend) open = rows.size(), open_signature = c.signature();
                size_t at = open;
                for (int p = 0; p < kReportPaths; ++p) {
                    if (!c.calls[p]) continue;
                    if (!extend) {
                        ReportRow r;
                        r.kind = kind, r.mode = mode, r.path = ReportPath(p), r.from = sc;
                        rows.push_back(r);
                        at = rows.size() - 1;
                    } else {
                        while (rows[at].path != ReportPath(p)) ++at;  // the range has a row of each of its paths
                    }
                    ReportRow& r = rows[at];
                    r.to = sc;
                    r.calls += c.calls[p];
                    r.bytes += c.bytes[p];
                    if (ReportPath(p) != ReportPath::mpi && mode == CallMode::blocking)
                        r.seconds = (r.seconds < 0 ? 0 : r.seconds) + double(c.nanos[p]) * 1e-9;
                    if (c.estimated_calls[p]) {
                        r.estimated_calls += c.estimated_calls[p];
                        r.estimated_seconds += double(c.estimated_nanos[p]) * 1e-9;
                        r.estimate = (r.estimate < 0 ? 0 : r.estimate) + double(c.estimate_nanos[p]) * 1e-9;
                    }
                }
            }
        }
    return rows;
}

ReportTotals report_totals(const std::vector<ReportRow>& rows) {
    ReportTotals t;
    for (const ReportRow& r : rows) {
        t.calls += r.calls, t.bytes += r.bytes;
        if (r.path == ReportPath::mpi) continue;
        t.nexar_calls += r.calls, t.nexar_bytes += r.bytes;
        if (r.mode != CallMode::blocking) {
            t.unmeasured_nonblocking += r.calls;
            continue;
        }
        t.unmeasured_blocking += r.calls - r.estimated_calls;
        if (!r.estimated_calls) continue;
        t.estimated_calls += r.estimated_calls, t.nexar_seconds += r.estimated_seconds, t.estimate_seconds += r.estimate;
        t.partial |= r.estimated_calls < r.calls;
    }
    return t;
}

std::string format_seconds(double s) {
    char buf[32];
    if (s >= 1)
        snprintf(buf, sizeof buf, "%.2f s", s);
    else if (s >= 1e-3)
        snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
    else
        snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
    return buf;
}

std::string report_text(const std::vector<ReportRow>& rows, const ReportJob& job) {
    std::string out;
    char line[320];
    snprintf(line, sizeof line, "nexar report: %d rank%s on %d node%s, nexar %s on %s; times are the slowest rank's\n",
             job.ranks, job.ranks == 1 ? "" : "s", job.nodes, job.nodes == 1 ? "" : "s", job.nexar_version.c_str(),
             job.mpi.c_str());
    out += line;
    const ReportTotals t = report_totals(rows);
    if (!rows.empty()) {
        snprintf(line, sizeof line, "nexar report:   %-26s %-14s %9s %11s %-12s %11s %13s\n", "collective", "sizes",
                 "calls", "bytes", "path", "time", "MPI estimate");
        out += line;
    }
    for (const ReportRow& r : rows) {
        const bool mpi = r.path == ReportPath::mpi;
        const std::string time = r.seconds >= 0 ? format_seconds(r.seconds) : mpi ? "-" : "not timed";
        const std::string estimate = r.estimate < 0               ? (mpi ? "-" : "not measured")
                                     : r.estimated_calls < r.calls ? format_seconds(r.estimate) + "*"
                                                                   : format_seconds(r.estimate);
        snprintf(line, sizeof line, "nexar report:   %-26s %-14s %9llu %11s %-12s %11s %13s\n",
                 report_call_name(r.kind, r.mode).c_str(), size_range(r).c_str(), (unsigned long long)r.calls,
                 format_volume(r.bytes).c_str(), report_path_name(r.path), time.c_str(), estimate.c_str());
        out += line;
    }
    // The closing line.
    if (t.nexar_calls == 0) {
        snprintf(line, sizeof line, "nexar report: nexar took nothing%s: all %llu calls (%s) went to the MPI\n",
                 job.enabled ? "" : " (NEXAR_ENABLE=0)", (unsigned long long)t.calls, format_volume(t.bytes).c_str());
        return out + line;
    }
    if (t.partial)
        out += "nexar report: * for part of the row's calls: the others' kind of buffers (in place or not, host or "
               "device) had no warm MPI trial at their size\n";
    snprintf(line, sizeof line, "nexar report: nexar took %llu of %llu calls (%s of %s)",
             (unsigned long long)t.nexar_calls, (unsigned long long)t.calls, format_volume(t.nexar_bytes).c_str(),
             format_volume(t.bytes).c_str());
    out += line;
    if (t.estimated_calls) {
        const double saved = t.estimate_seconds - t.nexar_seconds;
        snprintf(line, sizeof line,
                 "; the %llu of them with an MPI estimate: %s on nexar, %s estimated for the MPI: %s %s (%.2fx)",
                 (unsigned long long)t.estimated_calls, format_seconds(t.nexar_seconds).c_str(),
                 format_seconds(t.estimate_seconds).c_str(), format_seconds(saved < 0 ? -saved : saved).c_str(),
                 saved < 0 ? "lost" : "saved", t.nexar_seconds > 0 ? t.estimate_seconds / t.nexar_seconds : 0.0);
        out += line;
    }
    if (t.unmeasured_nonblocking || t.unmeasured_blocking) {
        out += "; not measured: ";
        if (t.unmeasured_nonblocking) {
            snprintf(line, sizeof line, "%llu nonblocking or persistent calls (their time is the application's too)",
                     (unsigned long long)t.unmeasured_nonblocking);
            out += line;
        }
        if (t.unmeasured_blocking) {
            snprintf(line, sizeof line, "%s%llu calls %s", t.unmeasured_nonblocking ? ", " : "",
                     (unsigned long long)t.unmeasured_blocking,
                     job.learnt ? "whose buffers and sizes had no warm MPI trial" : "(a fixed threshold: no trials)");
            out += line;
        }
    }
    out += "\n";
    return out;
}

std::string report_csv(const std::vector<ReportRow>& rows, const ReportJob& job) {
    std::string out =
        "collective,mode,size_from,size_to,calls,bytes,path,seconds,mpi_estimate_seconds,estimated_calls,"
        "estimated_seconds,note\n";
    static const char* const modes[] = {"blocking", "nonblocking", "persistent"};
    char line[400];
    for (const ReportRow& r : rows) {
        char seconds[32] = "", estimate[32] = "", estimated_seconds[32] = "";
        if (r.seconds >= 0) snprintf(seconds, sizeof seconds, "%.9g", r.seconds);
        if (r.estimate >= 0) snprintf(estimate, sizeof estimate, "%.9g", r.estimate);
        if (r.estimated_calls) snprintf(estimated_seconds, sizeof estimated_seconds, "%.9g", r.estimated_seconds);
        snprintf(line, sizeof line, "%s,%s,%llu,%llu,%llu,%llu,%s,%s,%s,%llu,%s,%s\n",
                 report_call_name(r.kind, r.mode).c_str(), modes[int(r.mode)],
                 (unsigned long long)(uint64_t(1) << r.from), (unsigned long long)(uint64_t(1) << r.to),
                 (unsigned long long)r.calls, (unsigned long long)r.bytes, report_path_name(r.path), seconds, estimate,
                 (unsigned long long)r.estimated_calls, estimated_seconds, row_note(r, job).c_str());
        out += line;
    }
    return out;
}

std::string expand_report_path(const std::string& pattern, const std::string& job_id, long pid) {
    std::string out;
    for (size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '%' || i + 1 == pattern.size()) {
            out += pattern[i];
            continue;
        }
        const char c = pattern[++i];
        if (c == 'j')
            out += job_id;
        else if (c == 'p')
            out += std::to_string(pid);
        else if (c == '%')
            out += '%';
        else
            out += '%', out += c;
    }
    return out;
}

}  // namespace nexar
