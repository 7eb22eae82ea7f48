#include "algo/topology.h"

#include <algorithm>
#include <map>

namespace nexar {

RingTopology::RingTopology(const std::vector<int>& node_of_rank) {
    const size_t n = node_of_rank.size();
    // Node indices in the order in which ranks 0, 1, ... first name them:
    // that is the order of the nodes' lowest ranks.
    std::map<int, int> index;
    node_.resize(n);
    for (size_t r = 0; r < n; ++r) {
        auto it = index.emplace(node_of_rank[r], int(index.size())).first;
        node_[r] = it->second;
    }
    nodes_ = std::max<int>(1, int(index.size()));
    members_.assign(static_cast<size_t>(nodes_), std::vector<int>());
    local_index_.resize(n);
    for (size_t r = 0; r < n; ++r) {
        local_index_[r] = int(members_[size_t(node_[r])].size());
        members_[size_t(node_[r])].push_back(int(r));
    }
    order_.clear();
    max_per_node_ = 0;
    min_per_node_ = n ? int(n) : 1;
    for (const auto& m : members_) {
        order_.insert(order_.end(), m.begin(), m.end());
        max_per_node_ = std::max(max_per_node_, int(m.size()));
        min_per_node_ = std::min(min_per_node_, std::max(1, int(m.size())));
        uniform_ = uniform_ && m.size() == members_[0].size();
    }
    position_.resize(n);
    for (size_t p = 0; p < n; ++p) position_[size_t(order_[p])] = int(p);
}

int RingTopology::network_hops() const {
    if (nodes_ < 2) return 0;
    int hops = 0;
    for (int p = 0; p < size(); ++p) hops += node(rank_at(p)) != node(rank_at(p + 1));
    return hops;
}

}  // namespace nexar
