#include "core/ring_calls.h"

#include <algorithm>
#include <optional>

#include "algo/hierarchical.h"
#include "algo/partition.h"
#include "core/stats.h"
#include "transport/shm_channel.h"
#include "transport/ucx_channel.h"

namespace nexar {

namespace {

void count_bytes(const SendChannel& out) {
    Stats& stats = process_stats();
    (out.kind() == ChannelKind::shm ? stats.shm_bytes : stats.ucx_bytes)
        .fetch_add(out.bytes_sent(), std::memory_order_relaxed);
    if (out.kind() == ChannelKind::shm) {
        const auto& shm = static_cast<const ShmSendChannel&>(out);
        stats.cma_bytes.fetch_add(shm.bytes_by_address() + shm.bytes_pushed(), std::memory_order_relaxed);
        stats.push_bytes.fetch_add(shm.bytes_pushed(), std::memory_order_relaxed);
    }
}

RingPeers local_peers(const CommContext& ctx) {
    const RingTopology& t = ctx.topology();
    RingPeers p;
    p.position = t.local_index(ctx.rank());
    p.size = t.local_size(ctx.rank());
    p.next_rank = t.local_next(ctx.rank());
    p.prev_rank = t.local_prev(ctx.rank());
    p.send_tag_id = ctx.tag_id_of(p.next_rank);
    p.recv_tag_id = ctx.id();
    return p;
}

RingPeers inter_peers(const CommContext& ctx) {
    const RingTopology& t = ctx.topology();
    RingPeers p;
    p.position = t.node(ctx.rank());
    p.size = t.nodes();
    p.next_rank = t.inter_next(ctx.rank());
    p.prev_rank = t.inter_prev(ctx.rank());
    p.send_tag_id = ctx.tag_id_of(p.next_rank);
    p.recv_tag_id = ctx.id();
    return p;
}

}  // namespace

Status run_flat_ring(CommContext& ctx, bool use_shm, ShmCopy copy, SegmentEngine& engine, const void* src,
                     void* recvbuf, const ChunkLayout& layout, RingPhases phases, DataType type, ReduceOp op,
                     const RingOptions& opt, std::string* error, char* own_chunk_out) {
    const RingLinks links = ctx.links();
    const RingPeers& peers = links.peers;
    const bool shm_out = use_shm && ctx.send_shm(), shm_in = use_shm && ctx.recv_shm();
    std::optional<ShmSendChannel> shm_send;
    std::optional<UcxSendChannel> ucx_send;
    std::optional<ShmRecvChannel> shm_recv;
    std::optional<UcxRecvChannel> ucx_recv;
    // The UCX receive side progresses the worker; a UCX send side does when
    // its receive side is shared memory.
    if (shm_out)
        shm_send.emplace(*ctx.next_inbox(), peers.next_rank, copy);
    else
        ucx_send.emplace(*links.worker, *links.next, peers.next_rank, opt.depth, ctx.scratch(), engine, shm_in);
    if (shm_in)
        shm_recv.emplace(*ctx.inbox(), peers.prev_rank, ctx.local_prev_pid(), type, op);
    else
        ucx_recv.emplace(*links.worker, links.prev, peers.prev_rank, opt.depth, ctx.scratch(), engine, true);
    SendChannel& out = shm_out ? static_cast<SendChannel&>(*shm_send) : *ucx_send;
    RecvChannel& in = shm_in ? static_cast<RecvChannel&>(*shm_recv) : *ucx_recv;
    Status s =
        ring_run(peers, ctx.next_sequence(), src, recvbuf, layout, type, opt, out, in, phases, error, own_chunk_out);
    if (ok(s)) count_bytes(out);  // like ring_calls, successful calls only
    return s;
}

Status run_inter_ring(CommContext& ctx, uint32_t sequence, void* buf, size_t count, DataType type, ReduceOp op,
                      const RingOptions& opt, std::string* error) {
    const RingPeers peers = inter_peers(ctx);
    HostEngine engine(type, op, ctx.scratch(), true);
    UcxSendChannel out(*ctx.worker(), *ctx.inter_next(), peers.next_rank, opt.depth, ctx.scratch(), engine, false);
    UcxRecvChannel in(*ctx.worker(), ctx.inter_prev(), peers.prev_rank, opt.depth, ctx.scratch(), engine, true);
    return ring_allreduce(peers, sequence, buf, buf, count, type, opt, out, in, error);
}

Status run_hierarchical(CommContext& ctx, const void* src, void* recvbuf, size_t count, DataType type, ReduceOp op,
                        const RingOptions& local_opt, const RingOptions& inter_opt, std::string* error) {
    HierarchicalLinks h;
    h.local = local_peers(ctx);
    h.inter = inter_peers(ctx);
    ShmSendChannel local_out(*ctx.next_inbox(), h.local.next_rank);
    ShmRecvChannel local_in(*ctx.inbox(), h.local.prev_rank, ctx.local_prev_pid(), type, op);
    HostEngine engine(type, op, ctx.scratch(), true);  // the inter-node rings run in place
    UcxSendChannel inter_out(*ctx.worker(), *ctx.inter_next(), h.inter.next_rank, inter_opt.depth, ctx.scratch(),
                             engine, false);
    UcxRecvChannel inter_in(*ctx.worker(), ctx.inter_prev(), h.inter.prev_rank, inter_opt.depth, ctx.scratch(),
                            engine, true);
    h.local_out = &local_out;
    h.local_in = &local_in;
    h.inter_out = &inter_out;
    h.inter_in = &inter_in;
    const size_t pieces = hierarchical_pieces(count, datatype_size(type), h.local.size, h.inter.size,
                                              inter_opt.segment_bytes);
    Status s = hierarchical_allreduce(h, ctx.take_sequences(uint32_t(pieces)), pieces, src, recvbuf, count, type,
                                      local_opt, inter_opt, error);
    if (ok(s)) {
        count_bytes(local_out);
        count_bytes(inter_out);
        process_stats().hier_calls.fetch_add(1, std::memory_order_relaxed);
    }
    return s;
}

bool hierarchical_is_faster_here(const CommContext& ctx, const Config& cfg, size_t bytes) {
    const RingTopology& t = ctx.topology();
    const int P = t.nodes(), L = t.local_size(ctx.rank());
    const size_t pieces = hierarchical_pieces(bytes, 1, L, P, cfg.ucx_segment_bytes());
    return hierarchical_is_faster(ctx.cost_model(), double(bytes), P, L, int(pieces));
}

size_t hierarchical_slot_bytes(const CommContext& ctx, size_t count, size_t elem_size, size_t segment_bytes) {
    // Every piece's ring across nodes has chunks of at most `chunk`
    // elements; its segments are at most a segment's worth, or a chunk,
    // unless the per-chunk segment limit stretches them.
    const RingTopology& t = ctx.topology();
    auto ceil_div = [](size_t a, size_t b) { return (a + b - 1) / b; };
    const size_t chunk = ceil_div(ceil_div(count, size_t(t.local_size(ctx.rank()))), size_t(t.nodes()));
    const size_t seg = segment_elems(segment_bytes, elem_size);
    return std::max(std::min(seg, chunk), ceil_div(chunk, kMaxSegmentsPerChunk)) * elem_size;
}

}  // namespace nexar
