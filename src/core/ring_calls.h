// The rings a communicator context can run, each wired from the context's
// channels: the flat ring over the whole communicator (shared memory on the
// hops inside a node, UCX on the others), and the hierarchical allreduce
// (algo/hierarchical.h), and the hierarchical allreduce's ring across
// nodes alone, which the cost probe (core/cost_probe.h) times.  The
// allreduces add the bytes of successful calls to the stats per channel
// kind; the probe's rings do not.  The dispatcher decides which one runs.
#pragma once

#include <string>

#include "algo/ring.h"
#include "core/comm_context.h"
#include "core/config.h"
#include "transport/segment_engine.h"
#include "transport/shm_channel.h"

namespace nexar {

// The flat ring, running `phases` over `layout`.  use_shm: the hops that
// have shared-memory inboxes take them (agreed by every rank), moving
// segments as `copy` says; otherwise every hop is UCX.  `engine` moves the
// bytes of UCX hops (host or device buffers).  `own_chunk_out`: where the
// reduce-scatter leaves this rank's chunk (RingOperation::land_own_chunk_in).
Status run_flat_ring(CommContext& ctx, bool use_shm, ShmCopy copy, SegmentEngine& engine, const void* src,
                     void* recvbuf, const ChunkLayout& layout, RingPhases phases, DataType type, ReduceOp op,
                     const RingOptions& opt, std::string* error, char* own_chunk_out = nullptr);

// This local index's ring across the nodes alone, over UCX, in place on
// host memory (buf); the context's scratch must hold its slots.
Status run_inter_ring(CommContext& ctx, uint32_t sequence, void* buf, size_t count, DataType type, ReduceOp op,
                      const RingOptions& opt, std::string* error);
// The three phases in one.  Requires ctx.hier_ready().
Status run_hierarchical(CommContext& ctx, const void* src, void* recvbuf, size_t count, DataType type, ReduceOp op,
                        const RingOptions& local_opt, const RingOptions& inter_opt, std::string* error);

// The cost model's verdict for `bytes` on this context (with the pieces
// run_hierarchical would cut them into).  Identical on every rank.
bool hierarchical_is_faster_here(const CommContext& ctx, const Config& cfg, size_t bytes);

// Scratch slot bytes the inter-node rings of run_hierarchical need.
size_t hierarchical_slot_bytes(const CommContext& ctx, size_t count, size_t elem_size, size_t segment_bytes);

}  // namespace nexar
