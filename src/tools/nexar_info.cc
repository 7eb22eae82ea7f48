// nexar-info: what this nexar is and what it sees on this machine, without
// mpirun, in the manner of ucx_info and ompi_info.
//
//   nexar-info        a readable report
//   nexar-info -p     key=value lines for scripts
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

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

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

int main(int argc, char** argv) {
    bool parsable = false;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-p")) {
            parsable = true;
        } else {
            fprintf(stderr, "usage: nexar-info [-p]\n  -p  key=value lines for scripts\n");
            return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? 2 : 0;
        }
    }

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
