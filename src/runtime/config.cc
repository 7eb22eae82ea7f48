#include "runtime/config.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace nexar {

bool operator==(const Config& a, const Config& b) {
    return a.enable == b.enable && a.threshold_auto == b.threshold_auto && a.threshold_bytes == b.threshold_bytes &&
           a.segment_bytes == b.segment_bytes && a.pipeline_depth == b.pipeline_depth &&
           a.host_setting == b.host_setting && a.host_buffers == b.host_buffers && a.learn == b.learn && a.shm == b.shm && a.timeout_s == b.timeout_s && a.stats == b.stats && a.report == b.report &&
           a.log_level == b.log_level && a.cuda_path == b.cuda_path && a.cuda_ipc == b.cuda_ipc &&
           a.algorithm == b.algorithm && a.net == b.net && a.yield == b.yield && a.shm_copy == b.shm_copy && a.gpu_profile == b.gpu_profile &&
           a.stream_bytes == b.stream_bytes && a.nonblocking == b.nonblocking && a.progress == b.progress &&
           a.one_shot_bytes == b.one_shot_bytes;
}

const char* auto_bool_name(AutoBool a) {
    switch (a) {
        case AutoBool::off: return "0";
        case AutoBool::on: return "1";
        case AutoBool::automatic: return "auto";
    }
    return "?";
}

namespace {

const char* skip_space(const char* p) {
    while (*p == ' ' || *p == '\t') ++p;
    return p;
}

}  // namespace

bool parse_size(const char* text, uint64_t* out) {
    if (!text) return false;
    const char* p = skip_space(text);
    if (*p < '0' || *p > '9') return false;  // no sign, no empty string
    errno = 0;
    char* end = nullptr;
    unsigned long long value = strtoull(p, &end, 10);
    if (errno == ERANGE) return false;
    p = skip_space(end);
    unsigned shift = 0;
    switch (*p) {
        case 'k': case 'K': shift = 10; ++p; break;
        case 'm': case 'M': shift = 20; ++p; break;
        case 'g': case 'G': shift = 30; ++p; break;
        case 't': case 'T': shift = 40; ++p; break;
        default: break;
    }
    if (shift && (*p == 'i' || *p == 'I')) ++p;
    if (*p == 'b' || *p == 'B') ++p;
    p = skip_space(p);
    if (*p != '\0') return false;
    if (shift && value > (UINT64_MAX >> shift)) return false;
    *out = static_cast<uint64_t>(value) << shift;
    return true;
}

// "auto" in any case, with spaces around it or not.
bool is_auto(const char* text) {
    if (!text) return false;
    const char* p = skip_space(text);
    if (strncasecmp(p, "auto", 4) != 0) return false;
    return *skip_space(p + 4) == '\0';
}

bool parse_size_or_auto(const char* text, uint64_t* out, bool* automatic) {
    if (is_auto(text)) return *automatic = true, true;
    if (!parse_size(text, out)) return false;
    return *automatic = false, true;
}

bool parse_auto_bool(const char* text, AutoBool* out) {
    bool on = false;
    if (is_auto(text)) return *out = AutoBool::automatic, true;
    if (!parse_bool(text, &on)) return false;
    return *out = on ? AutoBool::on : AutoBool::off, true;
}

bool parse_cuda_ipc(const char* text, CudaIpc* out) {
    bool on = false;
    if (text && strcasecmp(text, "require") == 0) return *out = CudaIpc::require, true;
    if (!parse_bool(text, &on)) return false;
    return *out = on ? CudaIpc::on : CudaIpc::off, true;
}

bool parse_uint(const char* text, uint64_t* out) {
    if (!text) return false;
    const char* p = skip_space(text);
    if (*p < '0' || *p > '9') return false;
    errno = 0;
    char* end = nullptr;
    unsigned long long value = strtoull(p, &end, 10);
    if (errno == ERANGE || *skip_space(end) != '\0') return false;
    *out = value;
    return true;
}

bool parse_bool(const char* text, bool* out) {
    if (!text) return false;
    static const char* const yes[] = {"1", "yes", "true", "on", "y"};
    static const char* const no[] = {"0", "no", "false", "off", "n"};
    for (const char* y : yes)
        if (strcasecmp(text, y) == 0) return *out = true, true;
    for (const char* n : no)
        if (strcasecmp(text, n) == 0) return *out = false, true;
    return false;
}

bool parse_seconds(const char* text, double* out) {
    if (!text) return false;
    const char* p = skip_space(text);
    if (!((*p >= '0' && *p <= '9') || *p == '.')) return false;
    char* end = nullptr;
    errno = 0;
    double v = strtod(p, &end);
    if (errno == ERANGE || end == p) return false;
    if (*skip_space(end) != '\0' || !std::isfinite(v) || v < 0) return false;
    *out = v;
    return true;
}

bool parse_log_level(const char* text, LogLevel* out) {
    if (!text) return false;
    struct { const char* name; LogLevel level; } const names[] = {
        {"error", LogLevel::error}, {"warn", LogLevel::warn}, {"warning", LogLevel::warn},
        {"info", LogLevel::info},   {"debug", LogLevel::debug}, {"trace", LogLevel::trace}};
    for (const auto& n : names)
        if (strcasecmp(text, n.name) == 0) return *out = n.level, true;
    return false;
}

bool parse_cuda_path(const char* text, CudaPath* out) {
    if (!text) return false;
    for (CudaPath p : {CudaPath::automatic, CudaPath::direct, CudaPath::staged})
        if (strcasecmp(text, cuda_path_name(p)) == 0) return *out = p, true;
    return false;
}

const char* cuda_ipc_name(CudaIpc i) {
    switch (i) {
        case CudaIpc::off: return "0";
        case CudaIpc::on: return "1";
        case CudaIpc::require: return "require";
    }
    return "?";
}

const char* cuda_path_name(CudaPath p) {
    switch (p) {
        case CudaPath::automatic: return "auto";
        case CudaPath::direct: return "direct";
        case CudaPath::staged: return "staged";
    }
    return "?";
}

bool parse_algorithm(const char* text, Algorithm* out) {
    if (!text) return false;
    for (Algorithm a : {Algorithm::automatic, Algorithm::ring, Algorithm::hier, Algorithm::rhd})
        if (strcasecmp(text, algorithm_name(a)) == 0) return *out = a, true;
    return false;
}

const char* net_setting_name(NetSetting n) {
    switch (n) {
        case NetSetting::automatic: return "auto";
        case NetSetting::ucx: return "ucx";
        case NetSetting::mpi: return "mpi";
    }
    return "?";
}

bool parse_net(const char* text, NetSetting* out) {
    if (!text) return false;
    for (NetSetting n : {NetSetting::automatic, NetSetting::ucx, NetSetting::mpi})
        if (strcasecmp(text, net_setting_name(n)) == 0) return *out = n, true;
    return false;
}

bool parse_shm_copy(const char* text, ShmCopySetting* out) {
    if (!text) return false;
    for (int c = int(ShmCopySetting::automatic); c < kShmCopyModes; ++c)
        if (strcasecmp(text, shm_copy_setting_name(ShmCopySetting(c))) == 0) return *out = ShmCopySetting(c), true;
    return false;
}

bool parse_progress(const char* text, ProgressMode* out) {
    if (!text) return false;
    for (ProgressMode m : {ProgressMode::thread, ProgressMode::calls})
        if (strcasecmp(text, progress_mode_name(m)) == 0) return *out = m, true;
    return false;
}

bool parse_report(const char* text, ReportSetting* out) {
    bool on = false;
    if (parse_bool(text, &on)) return *out = on ? ReportSetting::print : ReportSetting::off, true;
    // A file's name has a '/', a '.' or a placeholder ('%'): a typo of a
    // yes or no ("ture", "2") is malformed, not a file in the working folder.
    if (!text || !strpbrk(text, "/.%")) return false;
    for (const char* p = text; *p; ++p)
        if (iscntrl(static_cast<unsigned char>(*p))) return false;
    return *out = ReportSetting::file, true;
}

const char* algorithm_name(Algorithm a) {
    switch (a) {
        case Algorithm::automatic: return "auto";
        case Algorithm::ring: return "ring";
        case Algorithm::hier: return "hier";
        case Algorithm::rhd: return "rhd";
    }
    return "?";
}

Config parse_config(const EnvLookup& lookup, std::vector<std::string>* problems) {
    Config c;
    auto complain = [&](const char* name, const char* value, const char* expected, const std::string& dflt) {
        if (problems)
            problems->push_back(std::string(name) + "='" + value + "' is not valid (expected " + expected +
                                "); using the default " + dflt);
    };
    const char* v;
    if ((v = lookup("NEXAR_ENABLE")) && !parse_bool(v, &c.enable))
        complain("NEXAR_ENABLE", v, "1 or 0", "1");
    if ((v = lookup("NEXAR_THRESHOLD_BYTES")) && !parse_size_or_auto(v, &c.threshold_bytes, &c.threshold_auto))
        complain("NEXAR_THRESHOLD_BYTES", v, "auto, or a byte count such as 8388608, 8M or 8MiB", "auto");
    if ((v = lookup("NEXAR_SEGMENT_BYTES"))) {
        uint64_t s = 0;
        if (parse_size(v, &s) && s >= kMinSegmentBytes && s <= kMaxSegmentBytes)
            c.segment_bytes = s;
        else
            complain("NEXAR_SEGMENT_BYTES", v, "a byte count from 256 to 1GiB, such as 1M",
                     "per ring");
    }
    if ((v = lookup("NEXAR_PIPELINE_DEPTH"))) {
        uint64_t d = 0;
        if (parse_uint(v, &d) && d >= 1 && d <= kMaxPipelineDepth)
            c.pipeline_depth = static_cast<uint32_t>(d);
        else
            complain("NEXAR_PIPELINE_DEPTH", v, "an integer from 1 to 64", std::to_string(c.pipeline_depth));
    }
    if ((v = lookup("NEXAR_HOST_BUFFERS")) && !parse_auto_bool(v, &c.host_setting))
        complain("NEXAR_HOST_BUFFERS", v, "auto, 1 or 0", "auto");
    c.host_buffers = c.host_setting != HostBuffers::off;
    c.learn = c.threshold_auto;
    if ((v = lookup("NEXAR_SHM")) && !parse_bool(v, &c.shm))
        complain("NEXAR_SHM", v, "1 or 0", "1");
    if ((v = lookup("NEXAR_TIMEOUT_S")) && !parse_seconds(v, &c.timeout_s))
        complain("NEXAR_TIMEOUT_S", v, "a number of seconds >= 0 (0 waits forever)", "60");
    if ((v = lookup("NEXAR_STATS")) && !parse_bool(v, &c.stats))
        complain("NEXAR_STATS", v, "1 or 0", "0");
    if ((v = lookup("NEXAR_REPORT")) && !parse_report(v, &c.report))
        complain("NEXAR_REPORT", v, "1, 0, or a file's name for a CSV copy, with a '/', a '.' or a %j", "0");
    if ((v = lookup("NEXAR_LOG")) && !parse_log_level(v, &c.log_level))
        complain("NEXAR_LOG", v, "error, warn, info, debug or trace", "warn");
    if ((v = lookup("NEXAR_CUDA_PATH")) && !parse_cuda_path(v, &c.cuda_path))
        complain("NEXAR_CUDA_PATH", v, "auto, direct or staged", "auto");
    if ((v = lookup("NEXAR_ALGORITHM")) && !parse_algorithm(v, &c.algorithm))
        complain("NEXAR_ALGORITHM", v, "auto, ring, hier or rhd", "auto");
    if ((v = lookup("NEXAR_NET")) && !parse_net(v, &c.net))
        complain("NEXAR_NET", v, "auto, ucx or mpi", "auto");
    if ((v = lookup("NEXAR_YIELD")) && !parse_auto_bool(v, &c.yield))
        complain("NEXAR_YIELD", v, "auto, 1 or 0", "auto");
    if ((v = lookup("NEXAR_SHM_COPY")) && !parse_shm_copy(v, &c.shm_copy))
        complain("NEXAR_SHM_COPY", v, "auto, slots, mixed, cma or push", "auto");
    if ((v = lookup("NEXAR_GPU_PROFILE")) && !parse_bool(v, &c.gpu_profile))
        complain("NEXAR_GPU_PROFILE", v, "1 or 0", "0");
    if ((v = lookup("NEXAR_STREAM_BYTES")) && !parse_size(v, &c.stream_bytes))
        complain("NEXAR_STREAM_BYTES", v, "a byte count such as 4M, or a huge one (1T) for never",
                 format_bytes(c.stream_bytes));
    if ((v = lookup("NEXAR_NONBLOCKING")) && !parse_bool(v, &c.nonblocking))
        complain("NEXAR_NONBLOCKING", v, "1 or 0", "1");
    if ((v = lookup("NEXAR_PROGRESS")) && !parse_progress(v, &c.progress))
        complain("NEXAR_PROGRESS", v, "thread or calls", "thread");
    if ((v = lookup("NEXAR_ONE_SHOT_BYTES")) &&
        (!parse_size(v, &c.one_shot_bytes) || c.one_shot_bytes > kMaxOneShotBytes)) {
        c.one_shot_bytes = kOneShotBytes;
        complain("NEXAR_ONE_SHOT_BYTES", v, "a byte count from 0 (never) to 1M", format_bytes(kOneShotBytes));
    }
    if ((v = lookup("NEXAR_CUDA_IPC")) && !parse_cuda_ipc(v, &c.cuda_ipc))
        complain("NEXAR_CUDA_IPC", v, "1, 0 or require", "1");
    return c;
}

std::string describe(const Config& c) {
    char buf[512];
    snprintf(buf, sizeof buf,
             "enable=%d threshold=%s segment=%s depth=%u host_buffers=%s shm=%d timeout=%gs stats=%d report=%s cuda_path=%s "
             "cuda_ipc=%s algorithm=%s net=%s yield=%s shm_copy=%s gpu_profile=%d stream=%s nonblocking=%d progress=%s one_shot=%s",
             c.enable ? 1 : 0, c.threshold_auto ? "auto" : format_bytes(c.threshold_bytes).c_str(),
             c.segment_bytes ? format_bytes(c.segment_bytes).c_str() : "auto",
             c.pipeline_depth, auto_bool_name(c.host_setting), c.shm ? 1 : 0, c.timeout_s, c.stats ? 1 : 0,
             c.report == ReportSetting::off ? "0" : c.report == ReportSetting::print ? "1" : "file", cuda_path_name(c.cuda_path),
             cuda_ipc_name(c.cuda_ipc), algorithm_name(c.algorithm), net_setting_name(c.net), auto_bool_name(c.yield),
             shm_copy_setting_name(c.shm_copy), c.gpu_profile ? 1 : 0,
             format_bytes(c.stream_bytes).c_str(), c.nonblocking ? 1 : 0, progress_mode_name(c.progress),
             format_bytes(c.one_shot_bytes).c_str());
    return buf;
}

bool choose_device_path(CudaPath setting, bool ucx_moves_device, bool* direct) {
    switch (setting) {
        case CudaPath::staged: *direct = false; return true;
        case CudaPath::direct: *direct = true; return ucx_moves_device;
        case CudaPath::automatic: *direct = ucx_moves_device; return true;
    }
    return false;
}

const char* device_path_name(bool direct, bool over_mpi) {
    if (!direct) return "staged through pinned host memory";
    return over_mpi ? "direct (CUDA-aware MPI)" : "direct (CUDA-aware UCX)";
}

std::string learnt_sizes(const Config& c) {
    const uint64_t allreduce = threshold_bytes_for(c, Collective::allreduce);
    return (allreduce ? "allreduces from " + format_bytes(allreduce) : std::string("allreduces of every size")) +
           ", reduce-scatters and allgathers from " + format_bytes(c.threshold_bytes);
}

std::string describe_gpu_job(const Config& c, const char* device_path, int mpi_cuda_aware) {
    if (!c.enable) return "nexar is off (NEXAR_ENABLE=0): every call goes to the MPI as it came";
    std::string s = c.learn ? "host and device buffers learnt apart, per communicator, collective and size: " +
                                  learnt_sizes(c)
                            : "host and device buffers on nexar from " + format_bytes(c.threshold_bytes) +
                                  " (NEXAR_THRESHOLD_BYTES)";
    if (!c.host_buffers) s += " (host buffers pass through: NEXAR_HOST_BUFFERS=0)";
    s += "; device buffers on nexar take its device ring (";
    s += device_path ? device_path : std::string("NEXAR_CUDA_PATH=") + cuda_path_name(c.cuda_path);
    s += ")";
    if (c.cuda_ipc != CudaIpc::off)
        s += std::string(", GPU to GPU through IPC among a node's ranks where every rank can") +
             (c.cuda_ipc == CudaIpc::require ? " (required: NEXAR_CUDA_IPC=require)" : "");
    else
        s += ", no IPC (NEXAR_CUDA_IPC=0)";
    s += c.nonblocking ? "; nonblocking and persistent calls of both kinds on nexar too (IPC once a blocking or "
                         "persistent call of device buffers set it up)"
                       : "; nonblocking and persistent calls go to the MPI (NEXAR_NONBLOCKING=0)";
    s += mpi_cuda_aware == 1   ? "; device buffers the MPI takes are handed to it as they are (it is CUDA-aware)"
         : mpi_cuda_aware == 0 ? "; device buffers the MPI takes are staged through host memory (it does not know CUDA)"
                               : "; device buffers the MPI takes are staged through host memory unless the MPI is "
                                 "CUDA-aware (asked in the job)";
    return s;
}

}  // namespace nexar
