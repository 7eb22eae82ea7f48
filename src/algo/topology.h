// Where the ranks of a communicator sit, and the ring order that follows it.
//
// The ring visits every node once: a node's ranks sit next to each other on
// it, nodes in the order of their lowest rank, ranks of a node in rank
// order.  So only P of the ring's n hops cross the network (P nodes), and
// whatever the placement (by slot, by node, a communicator split across
// nodes) the same nodes give the same ring.  A rank's ring position, not
// its MPI rank, says which chunk it owns (algo/ring_schedule.h); the result
// lands where MPI says it belongs all the same, since an allreduce leaves
// every chunk on every rank.
//
// Pure: built from the node of each rank, which runtime/context_setup.cc learns with
// MPI_Comm_split_type and an allgather.  Nothing else works out ring
// neighbours.
#pragma once

#include <cstddef>
#include <vector>

#include "algo/cost_model.h"
#include "algo/ring_schedule.h"

namespace nexar {

class RingTopology {
public:
    // One rank on one node.
    RingTopology() : RingTopology(std::vector<int>{0}) {}
    // node_of_rank[r]: any label of rank r's node, equal for ranks of one
    // node (the runtime passes the node's lowest rank).
    explicit RingTopology(const std::vector<int>& node_of_rank);

    int size() const { return int(order_.size()); }
    int nodes() const { return nodes_; }
    // Node index of rank r: 0 .. nodes()-1, in the order of the nodes' lowest ranks.
    int node(int rank) const { return node_[size_t(rank)]; }
    // Most ranks any node holds.
    int max_ranks_per_node() const { return max_per_node_; }
    bool same_node(int a, int b) const { return node(a) == node(b); }

    // Ring position of rank r, and the rank at position p.
    int position(int rank) const { return position_[size_t(rank)]; }
    int rank_at(int pos) const { return order_[size_t(((pos % size()) + size()) % size())]; }
    // The neighbours of rank r on the ring: it sends to next, receives from prev.
    int next(int rank) const { return rank_at(position(rank) + 1); }
    int prev(int rank) const { return rank_at(position(rank) - 1); }
    // Hops that cross from one node to another (0 on one node).
    int network_hops() const;

    // The node-local view, for the hierarchical allreduce
    // (algo/hierarchical.h).  A node's ranks, in rank order, form a ring of
    // their own; local_index is a rank's place on it.
    int local_index(int rank) const { return local_index_[size_t(rank)]; }
    int local_size(int rank) const { return int(members_[size_t(node(rank))].size()); }
    int local_next(int rank) const { return local_rank(node(rank), local_index(rank) + 1); }
    int local_prev(int rank) const { return local_rank(node(rank), local_index(rank) - 1); }
    // Every node holds the same number of ranks.
    bool uniform() const { return uniform_; }
    // Fewest ranks any node holds.
    int min_ranks_per_node() const { return min_per_node_; }

    // The hierarchical allreduce's lanes: the parts of each piece that
    // cross the network, one ring (or halving-doubling) across the nodes
    // each.  A node's reduce-scatter leaves chunk c + 1 on its local index
    // c (algo/ring_schedule.h), so lane c is carried by local index c - 1
    // (mod the node's size).  There are as many lanes as the smallest node
    // holds ranks: on larger nodes the other ranks carry none and take
    // part in their node's ring only.  On a uniform topology every rank
    // carries one, and the ranks of one local index form a lane.
    int lanes() const { return min_per_node_; }
    // The lane rank r carries, or -1.
    int lane(int rank) const { return carried_lane(local_index(rank), local_size(rank), lanes()); }
    // The rank that carries lane c (0 <= c < lanes()) on node `node`.
    int lane_rank(int node, int c) const { return local_rank(node, c - 1); }
    // As the cost model prices it.
    NodeShape shape() const { return NodeShape{nodes_, size(), max_per_node_, lanes()}; }
    // The ranks of rank r's lane on the next and previous node (node
    // order): its ring across the nodes.  Only for a rank that carries one.
    int inter_next(int rank) const { return lane_rank((node(rank) + 1) % nodes_, lane(rank)); }
    int inter_prev(int rank) const { return lane_rank((node(rank) + nodes_ - 1) % nodes_, lane(rank)); }

private:
    // The rank at local index i (taken modulo the node's size) of node `node`.
    int local_rank(int node, int i) const {
        const std::vector<int>& m = members_[size_t(node)];
        return m[size_t(((i % int(m.size())) + int(m.size())) % int(m.size()))];
    }

    std::vector<int> order_;     // position -> rank
    std::vector<int> position_;  // rank -> position
    std::vector<int> node_;      // rank -> node index
    std::vector<int> local_index_;             // rank -> index among its node's ranks
    std::vector<std::vector<int>> members_;    // node index -> its ranks, ascending
    int nodes_ = 1;
    int max_per_node_ = 1;
    int min_per_node_ = 1;
    bool uniform_ = true;
};

}  // namespace nexar
