// The hierarchical ("split rail") allreduce for nodes of several ranks:
//
//   1. a reduce-scatter over the node's own ring (shared memory): local rank
//      q ends with chunk q+1 of L reduced over its node, lane q+1's;
//   2. an allreduce of that chunk over its lane's ring across the P nodes
//      (UCX or the MPI's point-to-point): L such rings run at once, one per
//      lane, each over 1/L of the data, so each node's link carries
//      2(P-1)/P of the buffer in all, where the flat ring sends 2(n-1)/n of
//      it over every hop; or, where the links say so
//      (HierarchicalLinks::inter_exchanges), the lane's halving-doubling
//      across the nodes (algo/halving_doubling.h): 2 log2 P latencies
//      instead of 2(P-1);
//   3. an allgather over the node's ring.
//
// The buffer is cut into pieces that go through the three phases in a
// pipeline: while piece k crosses the network, the node's ring gathers
// piece k-1 and scatters piece k+1, so the link waits only for the first
// scatter and the last gather.  The node's ring runs its operations in one
// fixed order on every rank (RS0 RS1 AG0 RS2 AG1 ... AG[K-1]), the rings
// across nodes theirs (X0 X1 ...); piece k uses sequence number first+k.
//
// Nodes may hold different numbers of ranks (algo/topology.h's lanes): a
// piece crosses the network in as many lanes as the smallest node holds
// ranks; the node's ring cuts it into that many chunks (its other ranks'
// chunks empty, ChunkLayout::shares), and ranks that carry no lane run
// phases 1 and 3 only.  A node of one rank has no node ring (one lane,
// carried by its rank: phases 1 and 3 are nothing, its piece crosses
// from sendbuf into recvbuf); some node must have company (2 ranks or more),
// else the flat ring serves.  Host buffers only.
//
// Its halves serve the reduce-scatter (phases 1 and 2: the lane's
// reduce-scatter across nodes) and the allgather (phases 2 and 3, the
// lane's allgather) on nodes of one size, over the MPI's blocks staged in
// lane order (LaneOrderedBlocks): each rank's own block is the part of its
// lane that it holds after phase 2, so no message more than the halves'
// own is needed.  Network bytes per node are the flat ring's, latencies
// (L-1) in the node and P-1 (or log2 P) across, against the flat ring's
// n-1 on the network.
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "algo/channel.h"
#include "algo/collective_kind.h"
#include "algo/halving_doubling.h"
#include "algo/partition.h"
#include "algo/ring.h"
#include "algo/topology.h"

namespace nexar {

// A reduce-scatter's or an allgather's blocks staged in lane order, for
// the hierarchical halves on P nodes of L ranks each.  The MPI's blocks
// lie by rank; lane c's carrier on node n (lane_rank) must end the lane's
// reduce-scatter holding its own block, so lane c's chunk is the blocks of
// its carriers, node by node, and the node's ring gives chunk c to lane c
// (its carrier, local index c-1, is where the ring leaves chunk c).  Those
// blocks are not next to each other in the MPI's vector: the call copies
// them into a work buffer of the same size ("staging") in this order:
// piece by piece (each block cut into `pieces` equal parts, chunk_span),
// in a piece lane by lane, in a lane node by node.  A piece's lane chunk
// is then one span of the staging, its blocks end to end
// (PositionBlocks), and a piece's node ring runs over its L lane chunks.
// Built once per call (it allocates); the spans it hands out are its own.
class LaneOrderedBlocks {
public:
    // counts[r], displs[r]: rank r's block (elements, the MPI's layout);
    // `topo`'s nodes, all of its lanes() ranks (lane_rank: which rank
    // carries lane c on node n); `my_lane`: the lane this rank carries.
    LaneOrderedBlocks(const size_t* counts, const size_t* displs, const RingTopology& topo, size_t pieces,
                      int my_lane);
    size_t pieces() const { return pieces_; }
    // Piece k's node ring: its L lane chunks in the staging.
    ChunkLayout node_layout(size_t k) const { return ChunkLayout::blocks(&node_spans_[k * L_], L_); }
    // This rank's lane chunk of piece k in the staging, its blocks by node
    // relative to the chunk (the halving-doubling's), and the same in a
    // ring's chunk order (chunk j: node j-1's block, ring_block_layout).
    Span lane_span(size_t k) const { return node_spans_[k * L_ + size_t(my_lane_)]; }
    PositionBlocks lane_blocks(size_t k) const {
        return PositionBlocks{&lane_counts_[k * P_], &lane_displs_[k * P_]};
    }
    ChunkLayout lane_ring_layout(size_t k) const { return ChunkLayout::blocks(&lane_ring_spans_[k * P_], P_); }
    // Part k of rank r's block: its span within the block, and where it
    // lies in the staging.
    Span part(int r, size_t k) const { return chunk_span(counts_[size_t(r)], pieces_, k); }
    size_t displ(int r) const { return displs_[size_t(r)]; }
    size_t staged_at(int r, size_t k) const { return staged_at_[size_t(r) * pieces_ + k]; }
    int ranks() const { return int(counts_.size()); }
    // Elements of the staging.
    size_t extent() const { return extent_; }

private:
    size_t P_, L_, pieces_, extent_ = 0;
    int my_lane_;
    std::vector<size_t> counts_, displs_, staged_at_;
    std::vector<Span> node_spans_;                // [k * L + c]
    std::vector<size_t> lane_counts_, lane_displs_;  // [k * P + n], this rank's lane
    std::vector<Span> lane_ring_spans_;           // [k * P + j]
};

// What the hierarchical halves need beside the links: which half, the
// blocks, the staging (blocks' extent, the caller's, apart from the
// user's buffers) and this rank.
struct HierarchicalHalf {
    Collective part = Collective::reduce_scatter;
    const LaneOrderedBlocks* blocks = nullptr;
    char* staging = nullptr;
    int rank = 0;
};

struct HierarchicalLinks {
    RingPeers local;  // the node's ring: position = local index, size = L
    RingPeers inter;  // this rank's lane across nodes: position = node index, size = P
    // Lanes (RingTopology::lanes, the same on every rank); 0: local.size.
    int lanes = 0;
    int lane_count() const { return lanes > 0 ? lanes : local.size; }
    // The lane this rank carries (RingTopology::lane), or -1: then the
    // inter fields are not used.
    int lane() const { return carried_lane(local.position, local.size, lane_count()); }
    SendChannel* local_out = nullptr;  // none where local.size is 1
    RecvChannel* local_in = nullptr;
    // Phase 2 runs in place on recvbuf (its receive side must allow that),
    // out of place from sendbuf on a node of one rank.
    SendChannel* inter_out = nullptr;
    RecvChannel* inter_in = nullptr;
    // Set: phase 2 is the halving-doubling over the nodes (inter.position
    // of inter.size) on these links, and inter_out/inter_in are not used.
    ExchangeLinks* inter_exchanges = nullptr;
};

// Phase 2 of one piece: this rank's lane's ring across the nodes, or its
// halving-doubling, over the piece's chunk: from `input` (the chunk itself
// in place, or where the chunk's input lies) into `chunk`.  Polled like
// either.
class AcrossNodes {
public:
    // The allreduce over `count` equal blocks, or (`half`) a
    // reduce-scatter's or allgather's over `blocks` (by node, relative to
    // the chunk; `ring_layout` the same in a ring's chunk order), which
    // must outlive it.
    void start(const HierarchicalLinks& links, uint32_t sequence, const char* input, char* chunk, size_t count,
               DataType type, const RingOptions& options, Collective part = Collective::allreduce,
               const PositionBlocks* blocks = nullptr, const ChunkLayout* ring_layout = nullptr);
    bool running() const { return ring_ || halving_; }
    void reset();
    Status poll(bool* moved, std::string* error);
    bool finished() const;
    Status check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error);
    void abort();
    bool heard_from_peer() const;
    void end_patience();

private:
    std::optional<RingOperation> ring_;
    std::optional<HalvingDoublingSchedule> schedule_;  // halving_'s
    std::optional<HalvingDoublingOperation> halving_;
};

// Whether `links` make a phase across nodes for a rank that carries a
// lane: a ring's channels, or a halving-doubling's exchanges, that take
// `inter_options`.
bool crossing_arguments_valid(const HierarchicalLinks& links, const RingOptions& inter_options);

// Most pieces a call is cut into.
constexpr size_t kMaxHierarchicalPieces = 4;

// How many pieces a call of `count` elements is cut into: each lane's ring
// across nodes gets at least a segment per chunk of every piece.
size_t hierarchical_pieces(size_t count, size_t elem_size, int lanes, int nodes, size_t inter_segment_bytes);

// The hierarchical allreduce in flight: set up by its constructor (which
// checks nothing: hierarchical_arguments_valid does), moved along by poll()
// until finished(), like a RingOperation; it drives a ring inside the node
// and one across nodes at the same time.  Links and buffers are the
// caller's and must outlive it.  sendbuf may equal recvbuf.
// `local_options` serve phases 1 and 3, `inter_options` phase 2.  Uses
// sequence numbers first_sequence .. first_sequence + pieces - 1.
class HierarchicalOperation {
public:
    // `half`: the reduce-scatter or the allgather (valid while it runs;
    // `pieces` its blocks'), recvbuf the MPI's: the reduce-scatter's own
    // block, the allgather's whole vector; the allgather's own block is
    // read from sendbuf (in place: its place in recvbuf).
    HierarchicalOperation(const HierarchicalLinks& links, uint32_t first_sequence, size_t pieces,
                          const void* sendbuf, void* recvbuf, size_t count, DataType type,
                          const RingOptions& local_options, const RingOptions& inter_options,
                          const HierarchicalHalf* half = nullptr);
    // Moves along whatever can move; sets *moved when something did.  On
    // failure *error explains it and every channel has been aborted.
    Status poll(bool* moved, std::string* error);
    bool finished() const {
        return next_local_ >= local_steps() && !local_ && next_inter_ >= pieces_ && !inter_.running();
    }
    // While nothing moves: check_stall of the node's ring and of the phase
    // across nodes (a ring or a halving-doubling), each on its own idle
    // time (IdleClock), with one patience for the whole call
    // (RingOptions::patient_start).
    Status check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error);

private:
    void start_steps();
    // The node's ring's steps: a scatter and a gather per piece (the
    // allreduce), or one of them (a half).
    size_t local_steps() const { return half_ ? pieces_ : 2 * pieces_; }
    // The halves' copies between the MPI's layout and the staging: all of
    // the reduce-scatter's input (or the allgather's own block) before the
    // first step; a piece's result after its last.
    void stage();
    void deliver(size_t piece);
    template <class Operation>
    static Status poll_ring(Operation& ring, IdleClock& idle, bool* moved, std::string* error);
    void note_heard();
    Status fail(Status s);
    // The node's ring runs (local_gather_ is set before it starts) an
    // allgather on a rank that carries no lane.  It starts right after the
    // piece's scatter, and its first message comes only once the carriers'
    // whole phase across nodes for that piece is over: no timeout until
    // then (patient_start).  A carrier that fails breaks the node's ring
    // (its channels' abort), which check_stall's peer check sees; a
    // stalled one leaves another carrier further round the node's ring, on
    // the clock, timing out.  With one lane (a node of one rank) there is
    // no other carrier: the wait stays on the clock, as a carrier's own.
    bool laneless_gather() const { return lane_ < 0 && local_gather_ && l_.lane_count() >= 2; }
    // The node step's options: local_options_, patient where laneless_gather().
    RingOptions node_step_options() const;

    HierarchicalLinks l_;
    uint32_t first_sequence_;
    size_t pieces_, count_, esz_;
    const char* send_;
    char* recv_;
    DataType type_;
    RingOptions local_options_, inter_options_;
    std::array<bool, kMaxHierarchicalPieces> scattered_{}, crossed_{};
    int lane_;  // HierarchicalLinks::lane()
    size_t next_local_ = 0, next_inter_ = 0;
    std::optional<RingOperation> local_;
    AcrossNodes inter_;
    IdleClock local_idle_, inter_idle_;  // each ring's own (check_stall)
    size_t local_piece_ = 0, inter_piece_ = 0;
    bool local_gather_ = false;
    bool heard_ = false;  // some ring of this call has heard from a peer
    const HierarchicalHalf* half_;  // null: the allreduce
    bool staged_ = false;
    PositionBlocks lane_blocks_;     // the half's crossing's (its schedule or ring refers to them)
    ChunkLayout lane_ring_layout_;
};

// Whether the arguments make a hierarchical allreduce (`half`: or that
// half, on nodes of one size).
bool hierarchical_arguments_valid(const HierarchicalLinks& links, size_t pieces, const RingOptions& local_options,
                                  const RingOptions& inter_options, const HierarchicalHalf* half = nullptr);

// The whole call (or `half`), polled to its end.
Status hierarchical_allreduce(const HierarchicalLinks& links, uint32_t first_sequence, size_t pieces,
                              const void* sendbuf, void* recvbuf, size_t count, DataType type,
                              const RingOptions& local_options, const RingOptions& inter_options, std::string* error,
                              const HierarchicalHalf* half = nullptr);

// The part of `piece` that lane `lane` of `lanes` reduces across nodes
// (phase 2): its carrier's own chunk after phase 1.
Span hierarchical_inter_span(const Span& piece, int lane, int lanes);

}  // namespace nexar
