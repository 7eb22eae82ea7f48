// The local half of a call's plan (call/collective_task.h, step 1): the
// checks that MPI's rules make identical on every rank, where this rank's
// buffers live and what it can do with them, its copy-mode proposal, and
// the vector every rank contributes to the agreement (DESIGN.md section 3).
// Nothing here waits for another rank.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>

#include "algo/partition.h"
#include "algo/ring.h"
#include "call/collective.h"
#include "decide/copy_choice.h"
#include "memory/device_buffers.h"
#include "memory/memory_type.h"
#include "reduce/mpi_types.h"
#include "runtime/comm_context.h"
#include "runtime/config.h"
#include "runtime/runtime.h"
#include "transport/segment_engine.h"
#include "transport/shm_copy.h"

namespace nexar {

// Most allreduces are small: they pass through before any table lookup
// (the cost every pass-through pays).  Null buffers take the later checks.
inline bool small_allreduce(const Config& cfg, int64_t count, const void* sendbuf, const void* recvbuf) {
    return count >= 0 && sendbuf && recvbuf &&
           uint64_t(count) * max_ring_item_bytes() < threshold_bytes_for(cfg, Collective::allreduce);
}

// An allgather whose send buffer is its own block of the receive buffer
// (same type and count) is in place, and is said so to MPI as well.
CollectiveCall own_block_as_in_place(const CollectiveCall& c);

// Some count of the call is negative (erroneous).  `size`: the communicator's.
bool negative_count(const CollectiveCall& c, int size);
// Items in the whole vector (in bytes for the allgather); false when the
// call is malformed (PMPI reports it).
bool vector_items(const CollectiveCall& c, int size, uint64_t* items);
// The checks that are identical on every rank by MPI's rules; sets the
// ring's element for the call.  `size` 0: not asked yet.
bool statically_eligible(const Runtime& rt, const CollectiveCall& c, int size, uint64_t items, RingElement* element);
// What every rank must pass alike, as one number: the count, or for
// MPI_Reduce_scatter a digest of every rank's count.
int64_t call_shape(const CollectiveCall& c, int size, uint64_t items);

// What this rank can do with its buffers for this call.
struct LocalPlan {
    bool ready = false;
    MemoryType memory = MemoryType::host;
    DeviceEngine::Mode mode = DeviceEngine::Mode::staged;
    int device_id = 0;
    bool shm = false;      // host buffers: this rank's shared-memory hops can take the call
    bool hier = false;     // host buffers: the hierarchical allreduce (or its half) can take it here
    size_t segment = 0;    // the segment size it wants for a ring on UCX (its slots hold one)
    size_t scratch_slot = 0;       // the slot bytes the ring's scratch needs
    bool scratch_pending = false;  // ...reserved later, when the call's ring starts (reserve_scratch)
    const char* why = "";  // when not ready
    // Device or managed memory: a device engine moves it.
    bool device() const { return memory != MemoryType::host; }
};

// Where the buffers live; not ready yet.
LocalPlan classify_buffers(const Runtime& rt, const void* src, void* recvbuf);

// What every rank says about a call, reduced with MIN: the count travels as
// itself and negated, so that one reduction gives both its least and its
// largest value.
struct CallAgreement {
    int64_t ready = 0;          // this rank can take the ring
    int64_t min_count = 0;
    int64_t neg_max_count = 0;
    int64_t shm = 0;            // its shared-memory hops can take it (host buffers)
    int64_t hier = 0;           // the hierarchical allreduce can take it here
    int64_t inboxes = 0;        // it still holds the inboxes it set up (the runtime may release them)
    int64_t shm_copy = 0;       // the ShmCopy it proposes for same-node hops (the least is taken)
    int64_t ucx_segment = 0;    // the segment size it proposes for a ring on UCX (the least is taken)
    int64_t buffers = 0;        // no buffer it needs is NULL (else every rank reports MPI_ERR_BUFFER)
    int64_t neg_new_round = 0;  // -1: its copy chooser saw the chosen mode turn slow (one is enough)
    int64_t ipc = 0;            // device buffers: it can take the IPC allreduce (algo/ipc_allreduce.h):
                                // 2, or 1 where a buffer is exported as a descriptor (kIpcNeedsFdHandles)
    int64_t device = 0;         // its buffers are device memory (NEXAR_CUDA_IPC=require fails calls of all-device ranks)
    int64_t host = 0;           // its buffers are host memory (with `device`: the kind the learner's class takes)
};
constexpr int64_t kIpcNeedsFdHandles = 1, kIpcPlain = 2;
constexpr int kCallAgreementFields = int(sizeof(CallAgreement) / sizeof(int64_t));
static_assert(sizeof(CallAgreement) == kCallAgreementFields * sizeof(int64_t), "reduced as an array of int64");

// The schedule a call of `bytes` over network `net` (the call's) wants:
// NEXAR_ALGORITHM's, or the cost model's pick (CommContext::schedule_for);
// identical on every rank.  NEXAR_ALGORITHM=hier and rhd name the
// hierarchical allreduce where nodes hold several ranks (rhd: with the
// halving-doublings across nodes where they are ready, else the model
// picks between it with rings and the flat ring); across nodes of one
// rank each, hier is the ring and rhd the halving-doubling.  `part`: the
// collective (the model prices the halves apart).  Whether the call can
// take it is the caller's (CollectiveTask::ring_algorithm).
Schedule wanted_schedule(const Config& cfg, const CommContext& ctx, size_t bytes, CommContext::Net net,
                         Collective part = Collective::allreduce);
// The phase across nodes a device allreduce of `bytes` wants in the
// hierarchical allreduce with IPC inside each node (IpcHierarchicalRun):
// the halving-doublings (Schedule::hierarchical_halving_doubling) where
// they are ready and NEXAR_ALGORITHM=rhd or the model
// (CommContext::crossing_for) says so, else the rings
// (hierarchical_ring).  Identical on every rank.
Schedule wanted_crossing(const Config& cfg, const CommContext& ctx, size_t bytes);
// The segment size of the network's hops: UCX's, or the MPI's
// point-to-point's (smaller: eager in the MPI, runtime/config.h).
size_t network_segment(const Config& cfg, CommContext::Net net);

// The copy chooser learns each collective, in place or not, apart.
inline int copy_variant(Collective kind, bool in_place) { return 2 * int(kind) + (in_place ? 1 : 0); }
// Calls NEXAR_SHM_COPY=auto spends trying each copy mode on a new shape of
// call, where the context has same-node hops (0 where it tries none).  From
// facts alike on every rank: the path learner's nexar trials cover them
// (PathLearner::route).
uint32_t copy_trial_calls(const Config& cfg, const CommContext& ctx, Collective kind, bool in_place);
// This rank's proposal for how the call's same-node hops move segments.
CopyProposal proposed_copy(const Config& cfg, CommContext& ctx, Collective kind, size_t bytes, bool in_place);
// Segment size of a host call whose same-node hops go through shared
// memory, its other hops on network `net`; the second for a call in agreed
// copy mode `mode`.
size_t shm_call_segment(const Config& cfg, const CommContext& ctx, CommContext::Net net);
size_t shm_call_segment(const Config& cfg, const CommContext& ctx, CommContext::Net net, Collective kind,
                        ShmCopy mode);

// What this rank can do with the call (see call_plan.cc), its hops off
// shared memory on network `net` (the call's).  nonblocking:
// planned while other calls of the context may be in flight (their rings
// hold its scratch and endpoints): the scratch, host or GPU, is reserved
// later, at the ring's start (reserve_scratch, plan.scratch_pending).
LocalPlan plan_buffers(Runtime& rt, CommContext& ctx, CommContext::Net net, Collective kind, const LocalPlan& where,
                       const void* ring_src, void* ring_recv, size_t count, const ChunkLayout& layout, size_t esz,
                       const RingOptions& opt, const char* refusal, bool nonblocking = false);
// The ring's scratch that `plan` needs, on the context: host slots, or for
// device buffers the GPU's (DeviceBuffers).
Status reserve_scratch(Runtime& rt, CommContext& ctx, const LocalPlan& plan, uint32_t depth);

// Copies between any two of the call's memories (host, device, managed).
Status copy_bytes(Runtime& rt, CommContext& ctx, const LocalPlan& where, void* dst, const void* src, size_t bytes,
                  std::string* error);

}  // namespace nexar
