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
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>

#include "algo/channel.h"
#include "algo/halving_doubling.h"
#include "algo/partition.h"
#include "algo/ring.h"

namespace nexar {

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
    void start(const HierarchicalLinks& links, uint32_t sequence, const char* input, char* chunk, size_t count,
               DataType type, const RingOptions& options);
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
    HierarchicalOperation(const HierarchicalLinks& links, uint32_t first_sequence, size_t pieces,
                          const void* sendbuf, void* recvbuf, size_t count, DataType type,
                          const RingOptions& local_options, const RingOptions& inter_options);
    // Moves along whatever can move; sets *moved when something did.  On
    // failure *error explains it and every channel has been aborted.
    Status poll(bool* moved, std::string* error);
    bool finished() const {
        return next_local_ >= 2 * pieces_ && !local_ && next_inter_ >= pieces_ && !inter_.running();
    }
    // While nothing moves: check_stall of the node's ring and of the phase
    // across nodes (a ring or a halving-doubling), each on its own idle
    // time (IdleClock), with one patience for the whole call
    // (RingOptions::patient_start).
    Status check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error);

private:
    void start_steps();
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
};

// Whether the arguments make a hierarchical allreduce.
bool hierarchical_arguments_valid(const HierarchicalLinks& links, size_t pieces, const RingOptions& local_options,
                                  const RingOptions& inter_options);

// The whole call, polled to its end.
Status hierarchical_allreduce(const HierarchicalLinks& links, uint32_t first_sequence, size_t pieces,
                              const void* sendbuf, void* recvbuf, size_t count, DataType type,
                              const RingOptions& local_options, const RingOptions& inter_options, std::string* error);

// The part of `piece` that lane `lane` of `lanes` reduces across nodes
// (phase 2): its carrier's own chunk after phase 1.
Span hierarchical_inter_span(const Span& piece, int lane, int lanes);

}  // namespace nexar
