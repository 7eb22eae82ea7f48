// The alpha-beta model that chooses between the node-ordered flat ring and
// the hierarchical allreduce (NEXAR_ALGORITHM=auto).
//
// Each channel kind has a per-message cost alpha (seconds) and a rate beta
// (bytes/s).  For the network, beta is what one node's link carries in one
// direction, shared by every rank of the node that sends at once.  For S
// bytes, P nodes of L ranks, n = P*L:
//
//   flat ring      t = 2(n-1) alpha_net + 2(n-1)/n S / min(beta_net, beta_shm)
//                  (every hop carries 2(n-1)/n S, the network hops included,
//                  and the pipeline runs at its slowest hop)
//   hierarchical   t = 2(L-1) alpha_shm + 2(L-1)/L S / beta_shm      node reduce-scatter + allgather
//                    + 2(P-1) alpha_net + 2(P-1)/P S / beta_net      L rings of S/L share the link
//
// At 2 nodes x 2 ranks the flat ring sends 1.5 S over each link, the
// hierarchical one S plus S/beta_shm of copying inside the node: it wins
// when the link is slower than about half the shared-memory rate.
#pragma once

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
    double rate = m.net.bytes_per_s < m.shm.bytes_per_s ? m.net.bytes_per_s : m.shm.bytes_per_s;
    if (nodes < 2) rate = m.shm.bytes_per_s;
    const double alpha = nodes < 2 ? m.shm.alpha_s : m.net.alpha_s;
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes / rate;
}

inline double hierarchical_seconds(const CostModel& m, double bytes, int nodes, int ranks_per_node) {
    const double P = nodes, L = ranks_per_node;
    return 2 * (L - 1) * m.shm.alpha_s + 2 * (L - 1) / L * bytes / m.shm.bytes_per_s +  //
           2 * (P - 1) * m.net.alpha_s + 2 * (P - 1) / P * bytes / m.net.bytes_per_s;
}

inline bool hierarchical_is_faster(const CostModel& m, double bytes, int nodes, int ranks_per_node) {
    return hierarchical_seconds(m, bytes, nodes, ranks_per_node) < flat_ring_seconds(m, bytes, nodes, ranks_per_node);
}

// Both times are affine in the bytes, so they are equal at one size at
// most: that size, or a negative value when they never are (for the log).
inline double crossover_bytes(const CostModel& m, int nodes, int ranks_per_node) {
    const double d0 = hierarchical_seconds(m, 0, nodes, ranks_per_node) - flat_ring_seconds(m, 0, nodes, ranks_per_node);
    const double d1 = hierarchical_seconds(m, 1, nodes, ranks_per_node) - flat_ring_seconds(m, 1, nodes, ranks_per_node);
    const double slope = d1 - d0;  // per byte
    if (slope == 0) return -1;
    const double x = -d0 / slope;
    return x >= 0 ? x : -1;
}

}  // namespace nexar
