// nexar-info: what this nexar is and what it sees on this machine, without
// mpirun, in the manner of ucx_info and ompi_info.
//
//   nexar-info        a readable report
//   nexar-info -p     key=value lines for scripts
//   nexar-info --model [[P] L ALPHA_US GBIT] [--csv]
//                     the cost model's predicted allreduce times across
//                     nodes, the schedule it picks and Open MPI's tuned pick
//                     (model_main below); nothing about this machine
//
// Build: version, the MPI it was built for, UCX, the host reduction paths
// compiled in and the one this CPU takes.  Machine: GPUs (through the CUDA
// plugin) or why none, whether this process may read another's memory with
// CMA (the shared-memory hops' one-copy modes) and why not, transparent
// huge pages, /dev/shm, the descriptor limit.  Settings: every NEXAR_*
// variable, its value and where it came from (default, environment, or a
// malformed value replaced by the default), and what they come to.
#include <config.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "algo/cost_model.h"
#include "algo/hierarchical.h"
#include "base/log.h"
#include "decide/cost_probe.h"
#include "decide/ompi_tuned_rules.h"
#include "memory/device.h"
#include "mpi/mpi_family.h"
#include "nexar/nexar.h"
#include "reduce/host_reduce.h"
#include "runtime/config.h"
#include "runtime/stats.h"
#include "transport/cma.h"
#include "transport/ucx.h"

namespace {

using Lines = std::vector<std::pair<std::string, std::string>>;

std::string first_line(const char* path) {
    std::ifstream f(path);
    std::string line;
    if (!f || !std::getline(f, line)) return "";
    return line;
}

// "always [madvise] never" -> "madvise"
std::string bracketed(const std::string& s) {
    const size_t a = s.find('['), b = s.find(']');
    return a == std::string::npos || b == std::string::npos || b < a ? s : s.substr(a + 1, b - a - 1);
}

// Whether this process may read a child's memory with process_vm_readv,
// as a rank reads its same-node peer's.
std::string cma_permitted(std::string* why) {
    const nexar::CmaProbeWord word = nexar::cma_probe_word();
    int ready[2];
    if (pipe(ready) != 0) return *why = "pipe failed", "unknown";
    const pid_t child = fork();
    if (child < 0) return *why = "fork failed", "unknown";
    if (child == 0) {
        close(ready[0]);
        if (write(ready[1], "x", 1) != 1) _exit(1);
        pause();
        _exit(0);
    }
    close(ready[1]);
    char c;
    const bool up = read(ready[0], &c, 1) == 1;
    close(ready[0]);
    const bool ok = up && nexar::cma_probe(child, word, why);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    std::string yama = first_line("/proc/sys/kernel/yama/ptrace_scope");
    if (!ok && !yama.empty()) *why += " (kernel.yama.ptrace_scope=" + yama + ")";
    return ok ? "yes" : "no";
}

// The CUDA plugin sits in the library's directory: lib/ beside bin/ once
// installed, .libs/ in the build tree.
void point_at_cuda_plugin(const char* argv0) {
    if (getenv("NEXAR_CUDA_PLUGIN")) return;
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = n > 0 ? std::string(self, size_t(n)) : std::string(argv0);
    dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
    for (const char* rel : {"/../lib/libnexar_pmpi_cuda.so", "/.libs/libnexar_pmpi_cuda.so", "/../.libs/libnexar_pmpi_cuda.so"}) {
        const std::string p = dir + rel;
        if (access(p.c_str(), R_OK) == 0) {
            setenv("NEXAR_CUDA_PLUGIN", p.c_str(), 0);
            return;
        }
    }
}

}  // namespace

// What this nexar is: version, the MPI and UCX it was built with, the CPU
// reduction paths.
Lines build_lines() {
    Lines build;
    build.emplace_back("version", NEXAR_VERSION);
    const nexar::MpiIdentity mpi = nexar::mpi_built_for();
    build.emplace_back("mpi_built_for", mpi.family.empty() ? "unknown" : mpi.family + " " + mpi.version);
#if NEXAR_HAVE_UCX
    build.emplace_back("ucx_built", "yes (loaded at run time where libucp.so.0 is found)");
#else
    build.emplace_back("ucx_built", "no (./configure --without-ucx): between nodes the MPI's point-to-point only");
#endif
    const nexar::UcxLibrary& ucx = nexar::ucx_library();
    build.emplace_back("ucx_version", ucx.loaded ? ucx.version : "none");
    std::string isas;
    for (nexar::HostIsa isa : {nexar::HostIsa::baseline, nexar::HostIsa::avx2, nexar::HostIsa::avx512})
        if (nexar::host_isa_supported(isa)) isas += std::string(isas.empty() ? "" : ",") + nexar::host_isa_name(isa);
    build.emplace_back("cpu_reduce_paths_usable", isas);
    build.emplace_back("cpu_reduce_path", nexar::host_isa_name(nexar::host_isa_best()));
    return build;
}

// What a job's hops between nodes take with these settings and this UCX
// (runtime/context_setup.cc, connect_network).
std::string network_line(nexar::NetSetting net, bool ucx_up) {
    switch (net) {
        case nexar::NetSetting::mpi: return "the MPI's point-to-point between nodes (NEXAR_NET=mpi: jobs start no UCX)";
        case nexar::NetSetting::ucx:
            return ucx_up ? "UCX between nodes (NEXAR_NET=ucx)"
                          : "none: NEXAR_NET=ucx and no UCX (calls whose ring crosses nodes go to the MPI)";
        case nexar::NetSetting::automatic: break;
    }
    return ucx_up ? "UCX and the MPI's point-to-point between nodes: each call on the one timed faster for its "
                    "size (NEXAR_NET=auto)"
                  : "the MPI's point-to-point between nodes (no UCX)";
}

// What UCX moves itself, asked of a context as the library makes one
// (NEXAR_UCX_* settings apply), and so which path device buffers take
// (`api`: the GPU's, null without one).
void ucx_lines(const nexar_device_api* api, Lines* out) {
    Lines& machine = *out;
    std::unique_ptr<nexar::UcxContext> ucx;
    std::string ucx_error;
    const nexar::UcxLibrary& library = nexar::ucx_library();
    const std::string version = library.version;
    const nexar::Config cfg =
        nexar::parse_config([](const char* name) -> const char* { return getenv(name); }, nullptr);
    if (!ok(nexar::UcxContext::create(false, &ucx, &ucx_error))) {
        // Inside a node nexar needs no UCX: shared memory, and IPC for device buffers.
        machine.emplace_back("ucx", library.loaded ? "could not start (" + ucx_error + ")" : library.why);
        machine.emplace_back("network", network_line(cfg.net, false));
        machine.emplace_back("ucx_moves_cuda", "unknown: no UCX");
        machine.emplace_back("device_path", api ? "without UCX: GPU to GPU through IPC inside a node; across nodes "
                                                  "the MPI's point-to-point, staged unless the MPI is CUDA-aware"
                                                : "none: no GPU");
        return;
    }
    machine.emplace_back("ucx", "loaded (UCX " + version + ", " + library.path + ")");
    machine.emplace_back("network", network_line(cfg.net, true));
    const bool cuda = nexar::ucx_moves(*ucx, NEXAR_UCX_MEMORY_CUDA);
    machine.emplace_back("ucx_moves_cuda", cuda ? "yes (UCX " + version + ")"
                                                : "no: UCX " + version + " lists no CUDA memory type (built without "
                                                  "CUDA, or its CUDA transport found no driver)");
    if (!api) {
        machine.emplace_back("device_path", "none: no GPU");
        return;
    }
    const bool moves_device = nexar::ucx_moves(*ucx, api->ucx_memory_type);
    bool direct = false;
    machine.emplace_back("device_path", nexar::choose_device_path(cfg.cuda_path, moves_device, &direct)
                                            ? nexar::device_path_name(direct)
                                            : "none: NEXAR_CUDA_PATH=direct, but this UCX cannot move CUDA memory "
                                              "(device buffers pass through to MPI)");
}

// What this machine offers: GPU and plugin, CMA, THP, /dev/shm, descriptors.
// Points NEXAR_CUDA_PLUGIN at the plugin beside this program where unset.
Lines machine_lines(const char* argv0) {
    Lines machine;
    point_at_cuda_plugin(argv0);
    const nexar_device_api* api = nullptr;
    std::string why;
    if (ok(nexar::load_device_api(&api, &why)) && api) {
        machine.emplace_back("gpu", "yes (CUDA plugin " + std::string(getenv("NEXAR_CUDA_PLUGIN") ? getenv("NEXAR_CUDA_PLUGIN") : "") + ")");
    } else {
        api = nullptr;
        machine.emplace_back("gpu", "no: " + why);
    }
    ucx_lines(api, &machine);
    std::string cma_why;
    const std::string cma = cma_permitted(&cma_why);
    machine.emplace_back("cma", cma == "no" ? "no: " + cma_why : cma);
    const std::string thp = bracketed(first_line("/sys/kernel/mm/transparent_hugepage/enabled"));
    machine.emplace_back("thp", thp.empty() ? "unknown" : thp);
    struct statvfs vfs;
    machine.emplace_back("dev_shm_bytes",
                         statvfs("/dev/shm", &vfs) == 0 ? std::to_string(uint64_t(vfs.f_blocks) * vfs.f_frsize) : "unknown");
    struct rlimit fds;
    machine.emplace_back("fd_limit", getrlimit(RLIMIT_NOFILE, &fds) == 0
                                         ? (fds.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(fds.rlim_cur))
                                         : "unknown");
    return machine;
}

// Every setting with its value and where it came from, and what they come
// to in jobs with and without GPUs.  plugin_asked: NEXAR_CUDA_PLUGIN as the
// user set it ("" when unset); *problems: the malformed values, as the
// library would report them.
Lines settings_lines(const std::string& plugin_asked, std::vector<std::string>* problems_out) {
    Lines settings;
    // Every NEXAR_* setting the library reads: the names it asks for.
    std::vector<std::string> names;
    std::vector<std::string>& problems = *problems_out;
    nexar::Config cfg = nexar::parse_config(
        [&](const char* name) -> const char* {
            names.emplace_back(name);
            return getenv(name);
        },
        &problems);
    // A setting's default, as the parser states it when it replaces a
    // malformed value: the parser is the one place defaults are written.
    const auto default_of = [](const std::string& name) {
        std::vector<std::string> said;
        nexar::parse_config([&](const char* n) -> const char* { return name == n ? "\x01" : nullptr; }, &said);
        const std::string marker = "using the default ";
        const size_t at = said.empty() ? std::string::npos : said[0].rfind(marker);
        return at == std::string::npos ? std::string("?") : said[0].substr(at + marker.size());
    };
    for (const std::string& name : names) {
        const char* v = getenv(name.c_str());
        std::string source = v ? "environment" : "default";
        for (const std::string& p : problems)
            if (p.compare(0, name.size() + 1, name + "=") == 0) source = "malformed, default used";
        settings.emplace_back("setting." + name,
                              (v && source == "environment" ? std::string(v) : default_of(name)) + " (" + source +
                                  (v && source != "environment" ? ": '" + std::string(v) + "' is not valid" : "") + ")");
    }
    // Read outside parse_config: the CUDA plugin's path, and NEXAR_UCX_X,
    // which UCX itself reads for nexar's own context (ucp_config_read("NEXAR")).
    settings.emplace_back("setting.NEXAR_CUDA_PLUGIN",
                          plugin_asked.empty() ? "(default: next to the library)" : plugin_asked + " (environment)");
    for (char** e = environ; *e; ++e)
        if (!strncmp(*e, "NEXAR_UCX_", 10)) {
            const char* eq = strchr(*e, '=');
            settings.emplace_back("setting." + std::string(*e, size_t(eq - *e)), std::string(eq + 1) + " (environment)");
        }
    std::string fields;
    for (size_t i = 0; i < nexar::kStatsFieldCount; ++i)
        fields += std::string(i ? "," : "") + nexar::kStatsFields[i].name;
    settings.emplace_back("stats_fields", fields);
    settings.emplace_back("settings", nexar::describe(cfg));
    // The same in every job since 0.2 (GPU jobs learn too); both kept for
    // scripts that read them.
    const std::string in_job = std::string("threshold=") + (cfg.learn ? "learnt from " : "") +
                               nexar::format_bytes(cfg.threshold_bytes) + " host_buffers=" + (cfg.host_buffers ? "1" : "0");
    settings.emplace_back("in_a_job_without_gpus", in_job);
    settings.emplace_back("in_a_job_with_a_gpu", in_job);
    settings.emplace_back("gpu_job", nexar::describe_gpu_job(cfg, nullptr, -1));
    return settings;
}

namespace {

const char kUsage[] =
    "usage: nexar-info [-p]\n"
    "       nexar-info --model [[P] L ALPHA_US GBIT] [--csv]\n"
    "  -p       key=value lines for scripts\n"
    "  --model  the cost model's predicted allreduce times across nodes (predictions, not\n"
    "           measurements), for P nodes of L ranks, a network of ALPHA_US microseconds a\n"
    "           message and links of GBIT Gbit/s each way, shared memory as nexar assumes it:\n"
    "           for each size, every schedule's time (ring, hier, rhd, hier-rhd), the one the\n"
    "           model picks, and what Open MPI 4.1's coll/tuned fixed rules pick for P*L ranks.\n"
    "           With no numbers: L=1, 3 us, 25 Gbit/s; with three: L ALPHA_US GBIT; both\n"
    "           print rows for P = 2 to 10000; with four, the row of that P only.\n"
    "  --csv    with --model: CSV lines instead of the table\n";

bool parse_whole(const char* s, long lo, long hi, long* out) {
    char* end = nullptr;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool parse_real(const char* s, double lo, double hi, double* out) {
    char* end = nullptr;
    errno = 0;
    const double v = strtod(s, &end);
    if (errno || end == s || *end || !std::isfinite(v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

int usage_error(const std::string& what) {
    fprintf(stderr, "nexar-info: %s\n%s", what.c_str(), kUsage);
    return 2;
}

int model_error(const std::string& what) { return usage_error("--model: " + what); }

struct ModelRow {
    int nodes, ranks_per_node;
    uint64_t bytes;
    int pieces;
    double us[4];  // by Schedule; < 0: not a candidate
    nexar::Schedule pick;
    nexar::OmpiAllreduce ompi, ompi_runs;
};

ModelRow model_row(const nexar::CostModel& m, int P, int L, uint64_t bytes) {
    ModelRow r{};
    r.nodes = P;
    r.ranks_per_node = L;
    r.bytes = bytes;
    r.pieces = int(nexar::hierarchical_pieces(bytes, 1, L, P, nexar::kUcxSegmentBytes));
    for (nexar::Schedule s : nexar::kSchedules)
        r.us[int(s)] = nexar::is_hierarchical(s) && L < 2
                           ? -1
                           : 1e6 * nexar::predicted_seconds(m, s, double(bytes), P, L, r.pieces);
    r.pick = nexar::fastest_schedule(m, double(bytes), P, L, r.pieces, true);
    const int ranks = P * L;
    r.ompi = nexar::ompi_tuned_allreduce_rule(ranks, bytes, true);
    r.ompi_runs = nexar::ompi_tuned_allreduce_runs(r.ompi, ranks, bytes / sizeof(float), true);
    return r;
}

std::string ompi_cell(nexar::OmpiAllreduce a) {
    return std::to_string(int(a)) + " " + nexar::ompi_allreduce_name(a);
}

void print_model_row(const ModelRow& r, bool csv) {
    char cell[4][32];
    for (int i = 0; i < 4; ++i) {
        if (r.us[i] < 0)
            snprintf(cell[i], sizeof cell[i], csv ? "" : "-");
        else
            snprintf(cell[i], sizeof cell[i], csv ? "%.3f" : "%.1f", r.us[i]);
    }
    if (csv) {
        printf("%d,%d,%d,%llu,%d,%s,%s,%s,%s,%s,%d,%s,%d,%s\n", r.nodes, r.ranks_per_node, r.nodes * r.ranks_per_node,
               (unsigned long long)r.bytes, r.pieces, cell[0], cell[1], cell[2], cell[3], nexar::schedule_name(r.pick),
               int(r.ompi), nexar::ompi_allreduce_name(r.ompi), int(r.ompi_runs),
               nexar::ompi_allreduce_name(r.ompi_runs));
        return;
    }
    std::string ompi = ompi_cell(r.ompi);
    if (r.ompi_runs != r.ompi) ompi += " (runs " + ompi_cell(r.ompi_runs) + ")";
    printf("%7d %7d %7s %11s %11s %11s %11s  %-9s %s\n", r.nodes, r.nodes * r.ranks_per_node,
           nexar::format_bytes(r.bytes).c_str(), cell[0], cell[1], cell[2], cell[3], nexar::schedule_name(r.pick),
           ompi.c_str());
}

// nexar-info --model: the table of issue 49 (docs/results/model.md).  `args`: the numbers given with --model.
int model_main(const std::vector<const char*>& args, bool csv) {
    long P = 0, L = 1;
    double alpha_us = 3, gbit = 25;
    const size_t n = args.size();
    if (n != 0 && n != 3 && n != 4)
        return model_error("give no numbers, or L ALPHA_US GBIT, or P L ALPHA_US GBIT (got " + std::to_string(n) + ")");
    const size_t first = n == 4 ? 1 : 0;
    if (n == 4 && !parse_whole(args[0], 2, 1000000, &P))
        return model_error(std::string("P must be a whole number of nodes from 2 to 1000000, not '") + args[0] + "'");
    if (n >= 3) {
        if (!parse_whole(args[first], 1, 1024, &L))
            return model_error(std::string("L must be a whole number of ranks per node from 1 to 1024, not '") +
                               args[first] + "'");
        if (!parse_real(args[first + 1], 0, 1e6, &alpha_us))
            return model_error(std::string("ALPHA_US must be microseconds from 0 to 1e6, not '") + args[first + 1] +
                               "'");
        if (!parse_real(args[first + 2], 1e-3, 1e6, &gbit) || gbit <= 0)
            return model_error(std::string("GBIT must be a link rate in Gbit/s from 0.001 to 1e6, not '") +
                               args[first + 2] + "'");
    }
    nexar::CostModel m = nexar::default_cost_model();
    m.net = {alpha_us * 1e-6, gbit * 1e9 / 8};
    std::vector<long> nodes = {2, 3, 4, 5, 6, 7, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 10000};
    if (P) nodes = {P};
    const uint64_t sizes[] = {8, 1 << 10, 64 << 10, 1 << 20, 16 << 20};
    if (csv) {
        printf("nodes,ranks_per_node,ranks,bytes,pieces,ring_us,hier_us,rhd_us,hier_rhd_us,pick,ompi_alg,ompi_name,"
               "ompi_runs_alg,ompi_runs_name\n");
    } else {
        printf("Predicted allreduce times across nodes (the alpha-beta model of src/algo/cost_model.h: predictions,\n"
               "not measurements), in microseconds.  Network: alpha %g us, links of %g Gbit/s (%g GB/s) each way;\n"
               "shared memory: alpha %g us, %g GB/s (nexar's defaults).  %ld rank%s a node; hierarchical calls cut\n"
               "into the pieces nexar would cut them into (%s UCX segments).  pick: the model's choice; Open MPI:\n"
               "what 4.1's coll/tuned fixed rules pick for the same ranks (MPI_SUM of floats).\n\n",
               alpha_us, gbit, m.net.bytes_per_s / 1e9, m.shm.alpha_s * 1e6, m.shm.bytes_per_s / 1e9, L,
               L == 1 ? "" : "s", nexar::format_bytes(nexar::kUcxSegmentBytes).c_str());
        printf("%7s %7s %7s %11s %11s %11s %11s  %-9s %s\n", "nodes", "ranks", "size", "ring", "hier", "rhd",
               "hier-rhd", "pick", "Open MPI");
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
        if (!csv && i) printf("\n");
        for (uint64_t bytes : sizes) print_model_row(model_row(m, int(nodes[i]), int(L), bytes), csv);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    bool parsable = false, model = false, csv = false;
    std::vector<const char*> model_args;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (!strcmp(a, "-p")) {
            parsable = true;
        } else if (!strcmp(a, "--model")) {
            model = true;
        } else if (!strcmp(a, "--csv")) {
            csv = true;
        } else if (model && (a[0] != '-' || isdigit((unsigned char)a[1]) || a[1] == '.')) {
            model_args.push_back(a);  // numbers (a negative one is refused with its reason)
        } else {
            if (strcmp(a, "-h") && strcmp(a, "--help")) return usage_error(std::string("unknown argument '") + a + "'");
            fputs(kUsage, stderr);
            return 0;
        }
    }
    if (parsable && model) return usage_error("-p and --model do not go together");
    if (csv && !model) return usage_error("--csv goes with --model");
    if (model) return model_main(model_args, csv);

    const char* plugin_setting = getenv("NEXAR_CUDA_PLUGIN");  // before machine_lines points at ours
    const std::string plugin_asked = plugin_setting ? plugin_setting : "";
    std::vector<std::string> problems;
    const Lines build = build_lines(), machine = machine_lines(argv[0]),
                settings = settings_lines(plugin_asked, &problems);

    if (parsable) {
        for (const Lines* group : {&build, &machine, &settings})
            for (const auto& kv : *group) printf("%s=%s\n", kv.first.c_str(), kv.second.c_str());
        return 0;
    }
    const auto section = [](const char* title, const Lines& lines) {
        printf("%s\n", title);
        for (const auto& kv : lines) printf("  %-34s %s\n", kv.first.c_str(), kv.second.c_str());
    };
    section("nexar-pmpi build", build);
    section("this machine", machine);
    section("settings (NEXAR_*; rank 0's are used in a job)", settings);
    for (const std::string& p : problems) printf("  note: %s\n", p.c_str());
    return 0;
}
