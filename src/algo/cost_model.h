// The alpha-beta model that chooses among the schedules of an allreduce
// across nodes (NEXAR_ALGORITHM=auto): the node-ordered flat ring, the
// hierarchical allreduce, and the log-latency halving-doubling schedules
// (Rabenseifner's; algo/halving_doubling.h).
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
//
// Halving-doubling over m ranks: m' = the largest power of two <= m,
// s = log2 m'; a reduce-scatter by recursive halving (s steps: the partner
// sends half of what is left, S/2, S/4, ... S/m'), then an allgather by
// recursive doubling (the same s steps backwards).  Each rank sends and
// receives 2(m'-1)/m' S in 2s messages, against the ring's 2(m-1)
// messages.  Where m is not a power of two the 2(m-m') extra ranks pair up
// (the fold): one of each pair sends its whole vector to the other before
// and gets the result back after, 2 more messages of S on the critical
// path.  The steps run one after the other (each reduces what the one
// before delivered), so nothing overlaps.
//
//   halving-doubling, one rank a node (L = 1), P' = largest power of two <= P:
//                  t = 2 log2(P') alpha_net + 2(P'-1)/P' S / beta_net
//                      + (P != P' ? 2 (alpha_net + S / beta_net) : 0)
//   halving-doubling over all n ranks (L > 1), in the ring's node order, the
//                  partner differing in the highest bit first (as
//                  algo/halving_doubling.h), n' = largest power of two <= n,
//                  s = log2 n': the last a = min(s, log2 of the largest
//                  power of two dividing L) steps pair ranks of one node, the
//                  first c = s - a cross the network, and there every rank
//                  of a node sends at once (exactly so where n and L are
//                  powers of two; otherwise an estimate, an upper bound on
//                  the link's bytes):
//                  t = 2c alpha_net + 2a alpha_shm
//                      + 2 L (1 - 2^-c) S / beta_net + 2 (2^-c - 2^-s) S / beta_shm
//                      + (n != n' ? 2 (alpha_f + S / beta_f) : 0)
//                  (the fold pairs positions 2i and 2i+1: in one node when L
//                  is even, f = shm; else f = net).  Its first steps carry the
//                  largest halves across: the link carries 2L(P-1)/P S where
//                  n, L are powers of two, L times the hierarchical one's.
//                  With one node (P = 1) every step is in shared memory.
//   hierarchical halving-doubling: the node's ring as in the hierarchical
//                  allreduce (phases 1 and 3), and across nodes, instead of
//                  L rings, L halving-doubling schedules at once, one per
//                  local rank, each over its S/L: each moves
//                  2(P'-1)/P' S/L, plus 2 S/L for the fold where P != P',
//                  and the node's link carries the sum of the L:
//                  node = 2(L-1)/L S / beta_shm
//                  net  = (2(P'-1)/P' + (P != P' ? 2 : 0)) S / beta_net
//                  t = K (2(L-1) alpha_shm + (2 log2(P') + (P != P' ? 2 : 0)) alpha_net)
//                      + max(node, net) + min(node, net) / K
//
// Where P is a power of two the log schedules move the same bytes as the
// rings with fewer messages, so they never lose in this model (at P = 2
// they tie: one exchange either way); where it is not, the fold's 2 S
// make the rings win at large S on few nodes, and the log schedules win
// wherever the 2(P-1) latencies dominate.  fastest_schedule picks.
#pragma once

#include <algorithm>
#include <cmath>

namespace nexar {

struct ChannelCost {
    double alpha_s = 0;        // seconds per message
    double bytes_per_s = 1e9;  // sustained rate
};

struct CostModel {
    ChannelCost shm;
    ChannelCost net;
};

// A ring of `ranks` ranks on `nodes` nodes (each node's ranks side by
// side, algo/topology.h): 2(n-1) steps at the network's latency and rate
// once it crosses nodes.
inline double ring_seconds(const CostModel& m, double bytes, int ranks, int nodes) {
    const double n = ranks;
    if (n < 2) return 0;
    const double rate = nodes < 2 ? m.shm.bytes_per_s : std::min(m.net.bytes_per_s, m.shm.bytes_per_s);
    const double alpha = nodes < 2 ? m.shm.alpha_s : m.net.alpha_s;
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes / rate;
}

inline double flat_ring_seconds(const CostModel& m, double bytes, int nodes, int ranks_per_node) {
    return ring_seconds(m, bytes, nodes * ranks_per_node, nodes);
}

// The hierarchical allreduce with a phase across nodes of `net_messages`
// latencies and `net_bytes_factor` S through each node's link, per piece
// and in all.  `ranks_per_node`: the largest node's L; `lanes` (0: L): the
// chunks its node ring cuts each piece into, so each of its 2(L-1) steps
// moves S/lanes (algo/topology.h's lanes).
inline double pipelined_hierarchical_seconds(const CostModel& m, double bytes, int ranks_per_node, int pieces,
                                             double net_messages, double net_bytes_factor, int lanes = 0) {
    const double L = ranks_per_node, K = pieces < 1 ? 1 : pieces, lanes_ = lanes > 0 ? lanes : L;
    const double node = 2 * (L - 1) / lanes_ * bytes / m.shm.bytes_per_s;
    const double net = net_bytes_factor * bytes / m.net.bytes_per_s;
    return K * (2 * (L - 1) * m.shm.alpha_s + net_messages * m.net.alpha_s) + std::max(node, net) +
           std::min(node, net) / K;
}

// log2 of the largest power of two <= n (n >= 1; 0 below).
inline int floor_log2(long long n) {
    int s = 0;
    while (n > 1) {
        n >>= 1;
        ++s;
    }
    return s;
}

// A schedule across nodes of one rank each in the model's terms: its
// network messages one after another, and the bytes through a node's link
// per byte of the vector (what decide/cost_probe.h fits alpha and beta to).
struct ScheduleTerms {
    double messages = 0, bytes_factor = 0;
};
// The rings across P nodes, one rank each (or one lane's, all lanes at
// once): 2(P-1) messages and 2(P-1)/P of the vector.
inline ScheduleTerms ring_terms(int nodes) {
    const double P = nodes < 1 ? 1 : nodes;
    return ScheduleTerms{2 * (P - 1), 2 * (P - 1) / P};
}
// The halving-doubling's (the header comment): 2 log2 P' messages and
// 2(P'-1)/P' of the vector, plus 2 of each where the others fold in.
inline ScheduleTerms halving_doubling_terms(int nodes) {
    const int s = floor_log2(nodes < 1 ? 1 : nodes);
    const double P2 = double(1LL << s);
    const bool folds = (1LL << s) != nodes;
    return ScheduleTerms{2.0 * s + (folds ? 2 : 0), 2 * (P2 - 1) / P2 + (folds ? 2 : 0)};
}

// The hierarchical allreduce with rings across nodes.
inline double hierarchical_seconds(const CostModel& m, double bytes, int nodes, int ranks_per_node, int pieces,
                                   int lanes = 0) {
    const ScheduleTerms t = ring_terms(nodes);
    return pipelined_hierarchical_seconds(m, bytes, ranks_per_node, pieces, t.messages, t.bytes_factor, lanes);
}

// The phase across nodes alone, L lanes of S/L at once sharing each
// node's link: their rings or their halving-doublings (the terms above).
// What decides the device hierarchical allreduce's phase across nodes,
// whose node phases (GPU to GPU) cost the same whichever crosses and do
// not pipeline with it.  With one rank a node, the flat ring's and the
// halving-doubling's own times.
inline double crossing_seconds(const CostModel& m, double bytes, int nodes, bool halving_doubling) {
    const ScheduleTerms t = halving_doubling ? halving_doubling_terms(nodes) : ring_terms(nodes);
    return t.messages * m.net.alpha_s + t.bytes_factor * bytes / m.net.bytes_per_s;
}

// The halving-doubling allreduce over all n = nodes * ranks_per_node ranks
// (with one rank a node, the one across nodes); the header comment gives
// the formula.
inline double halving_doubling_seconds(const CostModel& m, double bytes, int nodes, int ranks_per_node) {
    const long long n = (long long)nodes * ranks_per_node;
    if (nodes < 1 || ranks_per_node < 1 || n < 2) return 0;
    const int s = floor_log2(n);
    const long long n2 = 1LL << s;
    const bool folds = n != n2;
    if (ranks_per_node == 1) return crossing_seconds(m, bytes, nodes, true);
    int even_part = 0;  // log2 of the largest power of two dividing L
    while (even_part < 30 && (ranks_per_node >> even_part) % 2 == 0) ++even_part;
    const int a = nodes < 2 ? s : std::min(s, even_part);  // steps inside a node
    const int c = s - a;                                    // steps across nodes
    const double across = 1 - std::ldexp(1.0, -c), inside = std::ldexp(1.0, -c) - std::ldexp(1.0, -s);
    const ChannelCost& fold = nodes < 2 || ranks_per_node % 2 == 0 ? m.shm : m.net;
    return 2 * c * m.net.alpha_s + 2 * a * m.shm.alpha_s + 2.0 * ranks_per_node * across * bytes / m.net.bytes_per_s +
           2 * inside * bytes / m.shm.bytes_per_s + (folds ? 2 * (fold.alpha_s + bytes / fold.bytes_per_s) : 0);
}

// The hierarchical allreduce with halving-doubling across nodes.
inline double hierarchical_halving_doubling_seconds(const CostModel& m, double bytes, int nodes, int ranks_per_node,
                                                    int pieces, int lanes = 0) {
    const ScheduleTerms t = halving_doubling_terms(nodes);
    return pipelined_hierarchical_seconds(m, bytes, ranks_per_node, pieces, t.messages, t.bytes_factor, lanes);
}

// A ring of `ranks` ranks whose every step costs channel `c`: 2(n-1)
// messages, 2(n-1)/n of the bytes through each hop.  What sets two
// channels of the network apart for a call of S bytes (the networks'
// costs are fitted to the flat ring, Runtime::measure_networks).
inline double channel_ring_seconds(const ChannelCost& c, double bytes, int ranks) {
    const double n = ranks < 2 ? 2 : ranks;
    return 2 * (n - 1) * c.alpha_s + 2 * (n - 1) / n * bytes / c.bytes_per_s;
}

// Where a communicator's ranks sit, as the model prices it: `ranks` on
// `nodes` nodes, the largest node's `largest`, and the hierarchical
// allreduce's `lanes` (the smallest node's count; algo/topology.h).
struct NodeShape {
    int nodes = 1, ranks = 1, largest = 1, lanes = 1;
    static NodeShape uniform(int nodes, int per_node) { return NodeShape{nodes, nodes * per_node, per_node, per_node}; }
};

// The hierarchical allreduce against the flat ring.
inline bool hierarchical_is_faster(const CostModel& m, double bytes, const NodeShape& shape, int pieces) {
    return hierarchical_seconds(m, bytes, shape.nodes, shape.largest, pieces, shape.lanes) <
           ring_seconds(m, bytes, shape.ranks, shape.nodes);
}
inline bool hierarchical_is_faster(const CostModel& m, double bytes, int nodes, int ranks_per_node, int pieces) {
    return hierarchical_is_faster(m, bytes, NodeShape::uniform(nodes, ranks_per_node), pieces);
}

// The schedules the model compares, in the order that breaks its ties.
enum class Schedule { flat_ring, hierarchical_ring, flat_halving_doubling, hierarchical_halving_doubling };
constexpr Schedule kSchedules[] = {Schedule::flat_ring, Schedule::hierarchical_ring, Schedule::flat_halving_doubling,
                                   Schedule::hierarchical_halving_doubling};

inline const char* schedule_name(Schedule s) {
    switch (s) {
        case Schedule::flat_ring: return "ring";
        case Schedule::hierarchical_ring: return "hier";
        case Schedule::flat_halving_doubling: return "rhd";
        case Schedule::hierarchical_halving_doubling: return "hier-rhd";
    }
    return "?";
}

inline bool is_hierarchical(Schedule s) {
    return s == Schedule::hierarchical_ring || s == Schedule::hierarchical_halving_doubling;
}

inline double predicted_seconds(const CostModel& m, Schedule schedule, double bytes, int nodes, int ranks_per_node,
                                int pieces) {
    switch (schedule) {
        case Schedule::flat_ring: return flat_ring_seconds(m, bytes, nodes, ranks_per_node);
        case Schedule::hierarchical_ring: return hierarchical_seconds(m, bytes, nodes, ranks_per_node, pieces);
        case Schedule::flat_halving_doubling: return halving_doubling_seconds(m, bytes, nodes, ranks_per_node);
        case Schedule::hierarchical_halving_doubling:
            return hierarchical_halving_doubling_seconds(m, bytes, nodes, ranks_per_node, pieces);
    }
    return 0;
}

// The schedule of least predicted time; a tie goes to the earlier in
// kSchedules (the ring first).  The hierarchical ones compete only where
// nodes hold several ranks and the hierarchical allreduce can run (the
// same number on every node: hierarchical_possible).
inline Schedule fastest_schedule(const CostModel& m, double bytes, int nodes, int ranks_per_node, int pieces,
                                 bool hierarchical_possible) {
    Schedule best = Schedule::flat_ring;
    double best_t = predicted_seconds(m, best, bytes, nodes, ranks_per_node, pieces);
    for (Schedule s : kSchedules) {
        if (is_hierarchical(s) && !(ranks_per_node > 1 && hierarchical_possible)) continue;
        const double t = predicted_seconds(m, s, bytes, nodes, ranks_per_node, pieces);
        if (t < best_t) {
            best = s;
            best_t = t;
        }
    }
    return best;
}

}  // namespace nexar
