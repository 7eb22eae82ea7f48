// NEXAR_* settings: parsing and the job-wide configuration.
//
// Every rank parses its own environment, then rank 0's configuration is
// broadcast at MPI_Init so that all ranks take identical dispatch decisions
// (DESIGN.md section 3).  A malformed value never breaks a job: it is reported
// and the default is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "algo/collective_kind.h"
#include "base/log.h"
#include "transport/shm_copy.h"

namespace nexar {

// How device buffers travel (NEXAR_CUDA_PATH).
enum class CudaPath { automatic, direct, staged };
const char* cuda_path_name(CudaPath p);
// The device path NEXAR_CUDA_PATH comes to, where UCX moves the device's
// memory itself or not: *direct (UCX moves device memory) or staged
// (through pinned host memory).  False when NEXAR_CUDA_PATH=direct asks for
// what this UCX cannot do (device buffers then pass through to MPI).
bool choose_device_path(CudaPath setting, bool ucx_moves_device, bool* direct);
// How NEXAR_LOG=info and nexar-info name the path: "direct (CUDA-aware UCX)"
// or "staged through pinned host memory".
const char* device_path_name(bool direct, bool over_mpi = false);

// Device allreduces of one node (or of each node's ranks) GPU to GPU
// through IPC (NEXAR_CUDA_IPC): where every rank can (1), never (0: the
// staged ring), or always, failing a call where it cannot (require).
enum class CudaIpc { off, on, require };
const char* cuda_ipc_name(CudaIpc i);

// Which allreduce runs across nodes (NEXAR_ALGORITHM): the node-ordered
// flat ring, the hierarchical one (algo/hierarchical.h), the halving-doubling
// where every node holds one rank (algo/halving_doubling.h; elsewhere the
// model's choice), or the cost model's choice (algo/cost_model.h).
enum class Algorithm { automatic, ring, hier, rhd };
const char* algorithm_name(Algorithm a);

// Which channel the ring's hops that are not in shared memory take
// (NEXAR_NET): UCX where every rank of the communicator reached its
// neighbours over it, else the MPI's own point-to-point (automatic); UCX
// only (calls that would need another network hop go to the MPI); or the
// MPI's point-to-point always (transport/mpi_channel.h).
enum class NetSetting { automatic, ucx, mpi };
const char* net_setting_name(NetSetting n);

// How same-node hops move segments (NEXAR_SHM_COPY): chosen per call from
// measurement (decide/copy_choice.h), or one ShmCopy mode for every call.
enum class ShmCopySetting : int {
    automatic = -1,
    slots = int(ShmCopy::slots),
    mixed = int(ShmCopy::mixed),
    cma = int(ShmCopy::cma),
    push = int(ShmCopy::push),
};
inline const char* shm_copy_setting_name(ShmCopySetting s) {
    return s == ShmCopySetting::automatic ? "auto" : shm_copy_name(ShmCopy(int(s)));
}

// The one-shot allreduce's default limit: on this project's VM, 2 ranks,
// it beat the ring's persistent call 1.3-7x from 8 to 32 KiB and lost at
// 64 KiB (a bare exchange: 14.4 us against the ring's 12.3; docs/how-it-works.md, "Small
// calls").  Most a setting may ask for: every rank of the node maps every
// other rank's two slots of it.
constexpr uint64_t kOneShotBytes = 32ull << 10;
constexpr uint64_t kMaxOneShotBytes = 1ull << 20;
// Ranks a one-shot call may span: each reads every other rank's input, so
// its cost grows with them.
constexpr uint32_t kMaxOneShotRanks = 16;

// Default segment sizes, chosen with bench/nexar-sweep (docs/tuning.md):
// the shared-memory ring wants segments that stay in cache, the UCX ring
// fewer and larger messages.
constexpr uint64_t kShmSegmentBytes = 256ull << 10;
constexpr uint64_t kUcxSegmentBytes = 1ull << 20;
// The MPI's point-to-point wants segments that it sends eagerly: a larger
// message takes its rendezvous protocol, which over TCP waits on both
// ranks' progress (calls into the MPI) for every piece.  Open MPI's TCP
// eager limit is 64 KiB; across 2 simulated nodes x 2 ranks at 2 Gbit/s
// the MPI channel ran at 83-91 % of the link from 4 MiB with 32 KiB
// segments, 85-89 % with 60 KiB, 66-84 % with 120 KiB and 71-78 % with
// 1 MiB, where UCX (eager, 1 MiB) ran at 85-91 % (docs/results/mpi-network.md).
constexpr uint64_t kMpiSegmentBytes = 32ull << 10;
// An allgather alone whose same-node hops all pass segments by address
// (NEXAR_SHM_COPY other than slots) puts no segment in a slot: each costs a
// record and a process_vm_readv/writev only, so larger segments mean fewer
// calls.  On 2 MiB pages, 2 ranks, 8-16 MiB, 4 MiB segments ran 1.0-1.3x
// as fast as 256 KiB ones, and 16 MiB no faster than 4 (docs/tuning.md).
constexpr uint64_t kShmAddressSegmentBytes = 4ull << 20;
// Device buffers: each segment costs GPU copies, a kernel and event polls,
// and ranks sharing a GPU take turns on it; on an H200, 2 ranks, 256 MiB,
// 4 MiB segments ran 1.6x faster than 1 MiB (docs/results/gpu.md, "Results on a GPU").
constexpr uint64_t kDeviceSegmentBytes = 4ull << 20;

// NEXAR_THRESHOLD_BYTES=auto (decide/path_learner.h): calls below this pass
// through with no agreement and no learning.  On this project's VM, 2 ranks,
// Open MPI took 1.5 us at 1 KiB and nexar's one-shot 2.0; at 4 KiB 3.5
// against 2.9 (docs/how-it-works.md, "Small calls").
constexpr uint64_t kAutoFloorBytes = 2ull << 10;
// ...but not the allreduce: a small allreduce that every rank of a node
// makes alike takes the known one-shot (call/known_one_shot.h), one
// meeting on the boards: 8 B in 0.17 us against Open MPI's 0.27, 4 KiB in
// 0.62 against 1.05 (2 ranks, docs/results/small-calls.md).  The learner
// decides every size.
constexpr uint64_t kAutoAllreduceFloorBytes = 0;
// Nonblocking and persistent calls cannot be timed (the application's
// computation runs inside them): with NEXAR_THRESHOLD_BYTES=auto they take
// the ring (or the one-shot) from this size.  They are measured against
// the MPI's own nonblocking and persistent calls: at 4-64 KiB, 2 ranks,
// nexar's persistent call took 2.5-12 us against Open MPI's 7-28 (docs/user-guide.md,
// "The learnt threshold").  A persistent allreduce whose agreed route is
// the one-shot is nexar's from any size (call/nonblocking.h: its start
// publishes, its wait reduces): 1.6-2.3x Open MPI's persistent allreduce
// at 8 B-2 KiB, 2 ranks (docs/results/small-calls.md).
constexpr uint64_t kAutoNonblockingBytes = 4ull << 10;

// A setting of 1, 0 or auto.
enum class AutoBool : int { off = 0, on = 1, automatic = 2 };
const char* auto_bool_name(AutoBool a);

// NEXAR_HOST_BUFFERS: whether host buffers may take the ring.  auto and 1:
// yes, in every job, where the learner (or a fixed threshold) decides each
// size; 0: device buffers only.
using HostBuffers = AutoBool;

// NEXAR_YIELD: whether a wait gives its core away now and then
// (sched_yield).  auto: only where the node holds more of the job's ranks
// than the CPUs they may run on, as MPIs do when oversubscribed: there the
// peer a wait waits for needs the core, and elsewhere a yield hands it to
// whatever else runs there (a busy process beside the ranks kept it for
// milliseconds: algo/ring.h, set_idle_yield).
using YieldSetting = AutoBool;

// Who moves nonblocking calls along (NEXAR_PROGRESS, call/nonblocking.h):
// a thread of nexar's, or only the application's MPI calls.
enum class ProgressMode : int { thread = 0, calls = 1 };
inline const char* progress_mode_name(ProgressMode m) { return m == ProgressMode::thread ? "thread" : "calls"; }

// NEXAR_REPORT (runtime/job_report.h): no report, the table at
// MPI_Finalize, or the table and a CSV file (the file's name is rank 0's
// NEXAR_REPORT, read at finalize: Config is broadcast as bytes).
enum class ReportSetting : int { off = 0, print = 1, file = 2 };

struct Config {
    bool enable = true;                           // NEXAR_ENABLE
    // NEXAR_THRESHOLD_BYTES: auto (learn, decide/path_learner.h) or a fixed
    // number.  threshold_bytes: the fixed number; with auto, calls below it
    // never take the ring (kAutoFloorBytes).
    bool threshold_auto = true;
    uint64_t threshold_bytes = kAutoFloorBytes;
    uint64_t segment_bytes = 0;                   // NEXAR_SEGMENT_BYTES; 0: each ring's default
    uint32_t pipeline_depth = 4;                  // NEXAR_PIPELINE_DEPTH: segments in flight
    HostBuffers host_setting = HostBuffers::automatic;  // NEXAR_HOST_BUFFERS
    // What the two settings above come to: host buffers may take the ring;
    // the learner decides each size.
    bool host_buffers = true;
    bool learn = true;
    bool shm = true;                              // NEXAR_SHM: same-node host rings through shared memory
    double timeout_s = 60.0;                      // NEXAR_TIMEOUT_S (0: wait forever)
    // A nonblocking call's: moved only inside MPI calls (NEXAR_PROGRESS=calls),
    // it waits for peers that compute, so only a dead peer ends it.
    double nonblocking_timeout_s() const { return progress == ProgressMode::calls ? 0 : timeout_s; }
    bool stats = false;                           // NEXAR_STATS
    ReportSetting report = ReportSetting::off;    // NEXAR_REPORT
    LogLevel log_level = LogLevel::warn;          // NEXAR_LOG
    CudaPath cuda_path = CudaPath::automatic;     // NEXAR_CUDA_PATH
    CudaIpc cuda_ipc = CudaIpc::on;               // NEXAR_CUDA_IPC: device buffers of one node GPU to GPU
    Algorithm algorithm = Algorithm::automatic;   // NEXAR_ALGORITHM
    NetSetting net = NetSetting::automatic;       // NEXAR_NET
    YieldSetting yield = YieldSetting::automatic;  // NEXAR_YIELD
    ShmCopySetting shm_copy = ShmCopySetting::automatic;  // NEXAR_SHM_COPY
    bool gpu_profile = false;                     // NEXAR_GPU_PROFILE: time the device ring's stages
    uint64_t stream_bytes = 4ull << 20;           // NEXAR_STREAM_BYTES: calls from here stream settled results
    bool nonblocking = true;                      // NEXAR_NONBLOCKING: take MPI_I* collectives (call/nonblocking.h)
    ProgressMode progress = ProgressMode::thread;  // NEXAR_PROGRESS
    // NEXAR_ONE_SHOT_BYTES: an allreduce on a communicator whose ranks share
    // one node takes the one-shot (algo/one_shot.h) where its vector times
    // the other ranks (what each rank reads from their boards) is at most
    // this; 0: never.
    uint64_t one_shot_bytes = kOneShotBytes;

    uint64_t shm_segment_bytes() const { return segment_bytes ? segment_bytes : kShmSegmentBytes; }
    uint64_t shm_address_segment_bytes() const { return segment_bytes ? segment_bytes : kShmAddressSegmentBytes; }
    uint64_t ucx_segment_bytes() const { return segment_bytes ? segment_bytes : kUcxSegmentBytes; }
    uint64_t mpi_segment_bytes() const { return segment_bytes ? segment_bytes : kMpiSegmentBytes; }
    // The hops off shared memory: the MPI's point-to-point's, or UCX's.
    uint64_t network_segment_bytes(bool over_mpi) const { return over_mpi ? mpi_segment_bytes() : ucx_segment_bytes(); }
    uint64_t device_segment_bytes() const { return segment_bytes ? segment_bytes : kDeviceSegmentBytes; }
};

// Calls of `kind` below this many bytes pass through, neither learnt nor
// taken: NEXAR_THRESHOLD_BYTES's number, or auto's floor.
inline uint64_t threshold_bytes_for(const Config& c, Collective kind) {
    return c.threshold_auto && kind == Collective::allreduce ? kAutoAllreduceFloorBytes : c.threshold_bytes;
}
// NEXAR_THRESHOLD_BYTES=auto's sizes, in words: "allreduces of every
// size, reduce-scatters and allgathers from 2KiB".
std::string learnt_sizes(const Config& c);
static_assert(std::is_trivially_copyable<Config>::value, "Config is broadcast as bytes");

bool operator==(const Config& a, const Config& b);
inline bool operator!=(const Config& a, const Config& b) { return !(a == b); }

// Limits a setting must respect; outside them the default is used.
constexpr uint64_t kMinSegmentBytes = 256;
constexpr uint64_t kMaxSegmentBytes = 1ull << 30;
constexpr uint32_t kMaxPipelineDepth = 64;

// "8388608", "8M", "8MiB", "8m", "512K", "1G", "64B": suffixes are powers of 1024.
bool parse_size(const char* text, uint64_t* out);
// parse_size's, or "auto" (*automatic set).
bool parse_size_or_auto(const char* text, uint64_t* out, bool* automatic);
// "auto", or parse_bool's.
// "auto", or a boolean (1, 0, yes, no, ...).
bool parse_auto_bool(const char* text, AutoBool* out);
// "1"/"0", "yes"/"no", "true"/"false", "on"/"off" (any case).
bool parse_bool(const char* text, bool* out);
// A plain non-negative decimal integer ("4").
bool parse_uint(const char* text, uint64_t* out);
// A non-negative decimal number of seconds ("30", "2.5").
bool parse_seconds(const char* text, double* out);
// "error", "warn"/"warning", "info", "debug".
bool parse_log_level(const char* text, LogLevel* out);
// "auto", "direct", "staged".
bool parse_cuda_path(const char* text, CudaPath* out);
bool parse_cuda_ipc(const char* text, CudaIpc* out);
// "auto", "ring", "hier".
bool parse_algorithm(const char* text, Algorithm* out);
// "auto", "ucx", "mpi".
bool parse_net(const char* text, NetSetting* out);
// "auto", "slots", "mixed", "cma".
bool parse_shm_copy(const char* text, ShmCopySetting* out);
// "thread", "calls".
bool parse_progress(const char* text, ProgressMode* out);
// parse_bool's (off, print), or a file's name (file): text with a '/', a
// '.' or a '%' and no control characters.
bool parse_report(const char* text, ReportSetting* out);

using EnvLookup = std::function<const char*(const char*)>;

// Reads every NEXAR_* setting through `lookup`.  Each malformed or
// out-of-range value leaves its default in place and adds one sentence to
// *problems naming the variable, the value and the default used.
Config parse_config(const EnvLookup& lookup, std::vector<std::string>* problems);

// "threshold=8MiB segment=1MiB depth=4 ..." for the info log.
std::string describe(const Config& c);

// What a job with a GPU gets under these settings, in one sentence
// (NEXAR_LOG=info once at the start of such a job; nexar-info).
// `device_path`: how this rank's device rings move bytes, null where not
// known (outside a job: the setting is named); `mpi_cuda_aware`: 1, 0, or
// -1 where not known (asked at MPI_Init).
std::string describe_gpu_job(const Config& c, const char* device_path, int mpi_cuda_aware);

}  // namespace nexar
