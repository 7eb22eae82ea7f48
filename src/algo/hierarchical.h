// The hierarchical ("split rail") allreduce for nodes of several ranks:
//
//   1. a reduce-scatter over the node's own ring (shared memory): local rank
//      q ends with chunk q+1 of L reduced over its node;
//   2. an allreduce of that chunk over the ring of local rank q across the P
//      nodes (UCX): L such rings run at once, one per local rank, each over
//      1/L of the data, so each node's link carries 2(P-1)/P of the buffer
//      in all, where the flat ring sends 2(n-1)/n of it over every hop;
//   3. an allgather over the node's ring.
//
// It needs the same number of ranks on every node (algo/topology.h); the
// flat ring serves every other placement.  Host buffers only.  The three
// phases run one after the other, each over the ring driver of
// algo/ring.h; the channels are the caller's and are reused by phases 1
// and 3.
#pragma once

#include <string>

#include "algo/channel.h"
#include "algo/ring.h"

namespace nexar {

struct HierarchicalLinks {
    RingPeers local;  // the node's ring: position = local index, size = L
    RingPeers inter;  // this local index across nodes: position = node index, size = P
    SendChannel* local_out = nullptr;
    RecvChannel* local_in = nullptr;
    SendChannel* inter_out = nullptr;  // runs in place on recvbuf (its receive side must allow that)
    RecvChannel* inter_in = nullptr;
};

// sendbuf may equal recvbuf.  `local_options` serve phases 1 and 3,
// `inter_options` phase 2.
Status hierarchical_allreduce(const HierarchicalLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf,
                              size_t count, DataType type, const RingOptions& local_options,
                              const RingOptions& inter_options, std::string* error);

// The chunk of `count` elements that local rank `local_position` of
// `local_size` reduces across nodes (phase 2): its own after phase 1.
Span hierarchical_inter_span(size_t count, int local_position, int local_size);

}  // namespace nexar
