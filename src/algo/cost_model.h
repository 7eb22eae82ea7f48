// The alpha-beta model that chooses between the node-ordered flat ring and
// the hierarchical allreduce (NEXAR_ALGORITHM=auto).
//
// Each channel kind has a per-message cost alpha (seconds) and a rate beta
// (bytes/s).  For the network, beta is what one node's link carries in one
// direction, shared by every rank of the node that sends at once.  For S
// bytes, P nodes of L ranks, n = P*L, and the hierarchical allreduce cut
// into K pieces (algo/hierarchical.h):
//
//   flat ring      t = 2(n-1) alpha_net + 2(n-1)/n S / min(beta_net, beta_shm)
//                  (every hop carries 2(n-1)/n S, the network hops included,
//                  and the pipeline runs at its slowest hop)
//   hierarchical   node = 2(L-1)/L S / beta_shm      (reduce-scatter + allgather in the node)
//                  net  = 2(P-1)/P S / beta_net      (L rings of S/L share each link)
//                  t = K (2(L-1) alpha_shm + 2(P-1) alpha_net) + max(node, net) + min(node, net) / K
//                  (the pieces pipeline the two: only 1/K of the shorter
//                  part is not hidden behind the longer)
//
// At 2 nodes x 2 ranks the flat ring sends 1.5 S over each link, the
// hierarchical one S, plus a fraction of S/beta_shm of copying inside the
// node: it wins unless the link is nearly as fast as shared memory.
#pragma once

#include <algorithm>

namespace nexar {

struct ChannelCost {
    double alpha_s = 0;        // seconds per message
    double bytes_per_s = 1e9;  // sustained rate
};

struct CostModel {
    ChannelCost shm;
    ChannelCost net;
};

inline double flat_ring_seconds(const CostModel& m, double bytes, int nodes, int ranks_per_node) {
    const double n = double(nodes) * ranks_per_node;
    if (n < 2) return 0;
    const double rate = nodes < 2 ? m.shm.bytes_per_s : std::min(m.net.bytes_per_s, m.shm.bytes_per_s);
    const double alpha = nodes < 2 ? m.shm.alpha_s : m.net.alpha_s;
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes / rate;
}

inline double hierarchical_seconds(const CostModel& m, double bytes, int nodes, int ranks_per_node, int pieces) {
    const double P = nodes, L = ranks_per_node, K = pieces < 1 ? 1 : pieces;
    const double node = 2 * (L - 1) / L * bytes / m.shm.bytes_per_s;
    const double net = 2 * (P - 1) / P * bytes / m.net.bytes_per_s;
    return K * (2 * (L - 1) * m.shm.alpha_s + 2 * (P - 1) * m.net.alpha_s) + std::max(node, net) +
           std::min(node, net) / K;
}

// A ring of `ranks` ranks whose every step costs channel `c`: 2(n-1)
// messages, 2(n-1)/n of the bytes through each hop.  What sets two
// channels of the network apart for a call of S bytes (the networks'
// costs are fitted to the flat ring, Runtime::measure_networks).
inline double channel_ring_seconds(const ChannelCost& c, double bytes, int ranks) {
    const double n = ranks < 2 ? 2 : ranks;
    return 2 * (n - 1) * c.alpha_s + 2 * (n - 1) / n * bytes / c.bytes_per_s;
}

inline bool hierarchical_is_faster(const CostModel& m, double bytes, int nodes, int ranks_per_node, int pieces) {
    return hierarchical_seconds(m, bytes, nodes, ranks_per_node, pieces) <
           flat_ring_seconds(m, bytes, nodes, ranks_per_node);
}

}  // namespace nexar
