// The process-wide nexar runtime: job-wide configuration, the UCX context
// and worker, the communicator-context cache and the stats.  Started once
// MPI is initialized (by nexar's MPI_Init* or PMPI_Init*, shim/, or else
// at the first collective call on MPI_COMM_WORLD: start_late), torn down
// before PMPI_Finalize or by the MPI_COMM_SELF attribute at finalize.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <map>
#include <set>
#include <vector>

#include "algo/tag.h"
#include "memory/device_api.h"
#include "runtime/comm_context.h"
#include "runtime/config.h"
#include "transport/segment_engine.h"
#include "transport/ucx.h"

namespace nexar {

// The calls the layer above keeps in flight (nonblocking and persistent
// ones, call/nonblocking.h), which the state must wait for before it goes:
// that layer registers these at load time, so that the state never calls
// up into it.  Unset (a program with no such calls linked in): nothing to
// wait for.
struct InFlightCalls {
    void (*stop_progress)() = nullptr;                 // at finalize, before the contexts go
    void (*drain)(const CommContext* ctx) = nullptr;  // when a communicator is freed
};
void set_in_flight_calls(const InFlightCalls& calls);

class Runtime {
public:
    // Collective over MPI_COMM_WORLD (one tiny broadcast of rank 0's
    // settings).  Never fails the job: where UCX is missing or cannot
    // start, the shared-memory paths still run (a node needs no UCX) and
    // calls whose ring would cross the network pass through; the log says
    // so once.
    static void start(int thread_level);
    // Idempotent; prints the NEXAR_STATS line.  Once stopped, nexar does
    // not start again in this process.
    static void stop();
    // For a call on `comm` that finds nexar not started: MPI was initialized
    // without passing through nexar's MPI_Init* or PMPI_Init* (say, nexar
    // was loaded after MPI_Init).  Starts it when `comm` is MPI_COMM_WORLD
    // or congruent to it, since every rank makes that call and so starts
    // together; otherwise says once that calls pass through until then.
    // Null when it did not start.
    static Runtime* start_late(MPI_Comm comm);
    // Null before start() and after stop().
    static Runtime* get();

    const Config& config() const { return config_; }
    int world_rank() const { return world_rank_; }
    // UCX runs on this rank (transport/ucx.h): the ring's hops may take it.
    bool ucx_ready() const { return ucx_ != nullptr; }
    // The MPI gives MPI_THREAD_MULTIPLE: any thread may call it.
    bool multi_thread() const { return multi_thread_; }
    // The GPU plugin of this rank, or null (memory/device.h).
    const nexar_device_api* device_api() const { return device_api_; }
    // The memory type UCX is told for device buffers on the direct path.
    int device_wire() const { return device_wire_; }
    // Agreed at start-up: some rank of the job has a GPU plugin, so device
    // buffers may come; identical on every rank.
    bool device_possible() const { return device_possible_; }
    // Whether the MPI underneath accepts device pointers itself.
    bool mpi_cuda_aware() const { return mpi_cuda_aware_; }
    // Device buffers may come on this rank and the MPI does not know CUDA:
    // a call for the MPI looks where its buffers live first (call/pass_through.h).
    bool stages_device_buffers() const { return device_api_ && !mpi_cuda_aware_; }
    // How this rank moves device buffers, or false when it cannot.
    // over_mpi: the MPI's point-to-point moves them between ranks (directly
    // where the MPI is CUDA-aware), else UCX (directly where it moves them).
    bool device_path(bool over_mpi, DeviceEngine::Mode* mode) const;

    // Shared-memory inboxes of every context of this process together stay
    // within this many bytes: when a context sets its inboxes up, idle
    // contexts release theirs, least recently used first, and set them up
    // again (collectively) on their next call.  At the default segment and
    // depth a context on one node maps 2 MiB (32 keep theirs), one that
    // spans nodes 8 MiB (segments are the network's: 8 keep theirs).
    static constexpr size_t kInboxBudgetBytes = size_t(64) << 20;
    // A call on `ctx` begins (the least recently used contexts go first).
    void touch(CommContext& ctx);
    // Collective over ctx's ranks: sets its inboxes up again after some rank
    // released them.
    void reconnect_shm(CommContext& ctx);
    // Local: replaces ctx's endpoints that another communicator's failed
    // ring closed (tags carry no per-endpoint state, so a new one just works).
    Status refresh_endpoints(CommContext& ctx, std::string* error);

    // The context cached on `comm`, created collectively on first use: every
    // rank of `comm` must call this for the same call (the dispatch rules
    // guarantee it).  Never null.  A context that could not connect on some
    // rank comes back disabled() on every rank; *error says why locally.
    CommContext* context_for(MPI_Comm comm, std::string* error);
    // Sets up the context of `comm` (collective) where nonblocking calls
    // may take its ring: MPI_COMM_WORLD at MPI_Init, new communicators as
    // they are made (shim/comm_shim.cc).
    void prepare_context(MPI_Comm comm);
    // The last persistent request on a context whose communicator was
    // freed is gone: the context goes too.  (No-op for any other context.)
    void release_orphan(CommContext* ctx);
    // Changes whenever a context goes: a context pointer kept with the
    // value read before it is still alive while the value is unchanged.
    uint64_t context_generation() const { return context_generation_.load(std::memory_order_acquire); }
    // Whether `comm` has its context already (asking sets none up).
    bool has_context(MPI_Comm comm) const;
    // NEXAR_LOG=info, once: a nonblocking call found no context.
    static void say_once_no_context();

private:
    Runtime() = default;
    ~Runtime();
    void init(int thread_level);
    bool job_spans_nodes() const;
    void choose_idle_yield() const;
    void start_ucx(bool spans);
    void start_device();
    struct UcxAddresses {
        std::vector<uint8_t> all;  // every rank's worker address, by rank
        std::vector<int> lens, displs;
    };
    void connect_network(CommContext& ctx, UcxAddresses* addresses, std::string* error);
    void connect_ucx(CommContext& ctx, UcxAddresses* addresses, std::string* error);
    bool connect_shm(CommContext& ctx, bool for_hier);
    void connect_boards(CommContext& ctx);
    void probe_neighbour_memory(CommContext& ctx, const ShmInboxName& writer, const ShmInboxName& owner);
    void setup_hierarchical(CommContext& ctx, const std::vector<uint8_t>& addresses, const std::vector<int>& lens,
                            const std::vector<int>& displs);
    void setup_halving_doubling(CommContext& ctx, const UcxAddresses& addresses);
    MPI_Comm duplicate_for_network(CommContext& ctx, int* tag_ub);
    void measure_networks(CommContext& ctx);
    static int on_comm_delete(MPI_Comm comm, int keyval, void* attr, void* extra);
    static int on_self_delete(MPI_Comm comm, int keyval, void* attr, void* extra);
    void say_what_was_learnt(const CommContext& ctx) const;
    void forget(CommContext* ctx);
    void retire(CommContext* ctx);
    void keep_inboxes_within_budget(CommContext* keep);

    Config config_;
    int world_rank_ = 0;
    bool multi_thread_ = false;
    std::atomic<bool> cma_refusal_reported_{false};
    int comm_keyval_ = MPI_KEYVAL_INVALID;
    int self_keyval_ = MPI_KEYVAL_INVALID;
    // The endpoint to the worker at `address`, shared by every context that
    // reaches that process; rank r's (of `addresses`); and both ring
    // neighbours'.
    Status endpoint_to(const std::vector<uint8_t>& address, std::shared_ptr<UcxEndpoint>* out, std::string* error);
    Status endpoint_of(const std::vector<uint8_t>& addresses, const std::vector<int>& lens,
                       const std::vector<int>& displs, int r, CommContext::Peer* to, std::string* error);
    Status endpoints_to(const std::vector<uint8_t>& addresses, const std::vector<int>& lens,
                        const std::vector<int>& displs, int next, int prev, CommContext::Peer* to_next,
                        CommContext::Peer* to_prev, std::string* error);
    uint32_t allocate_tag_id();  // 0: none free
    void release_tag_id(uint32_t id);

    std::unique_ptr<UcxContext> ucx_;
    std::unique_ptr<UcxWorker> worker_;  // the process's one worker; destroyed before ucx_
    // Declared after worker_, so closed before it is destroyed.
    std::mutex endpoints_mutex_;
    std::map<std::vector<uint8_t>, std::shared_ptr<UcxEndpoint>> endpoints_;
    const nexar_device_api* device_api_ = nullptr;
    bool device_possible_ = false;
    bool ucx_cuda_ = false;           // UCX moves CUDA memory (built with CUDA, driver found)
    bool ucx_moves_device_ = false;   // ... the device API's memory (device_wire_): the direct path may run
    int device_wire_ = NEXAR_UCX_MEMORY_CUDA;
    bool mpi_cuda_aware_ = false;
    std::atomic<uint64_t> calls_{0};
    std::atomic<uint64_t> context_generation_{1};
    std::mutex tag_ids_mutex_;
    std::vector<bool> tag_ids_in_use_;
    size_t last_tag_id_ = 0;
    std::mutex registry_mutex_;
    std::set<CommContext*> registry_;
    std::set<CommContext*> orphans_;  // communicator freed, persistent requests still on it
};

// Raises `error_class` on `comm` the way MPI does: the communicator's error
// handler runs (MPI_ERRORS_ARE_FATAL aborts the job), and when it returns the
// error code is what the call returns.
int raise_mpi_error(MPI_Comm comm, int error_class);

// The collectives the shim exports go to intercept_collective (call/collective.h).

}  // namespace nexar
