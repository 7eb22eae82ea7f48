// Alpha and beta of the two channel kinds, and the choice the cost model
// makes from them between the flat ring and the hierarchical allreduce
// (algo/cost_model.h).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

#include "algo/collective_kind.h"
#include "algo/cost_model.h"
#include "algo/ring.h"
#include "base/status.h"

namespace nexar {

// What the model assumes when it has not measured (NEXAR_ALGORITHM=hier or
// ring, or a probe that failed): shared memory as measured on our test
// machines, a 100 Gbit/s network.
CostModel default_cost_model();

// The rings the probe times: this rank's ring of its lane across the nodes
// (algo/topology.h), on a communicator's own links.  The communicator's state provides
// them (runtime/context_setup.cc), so that deciding needs nothing from the layers
// above it.
class InterRingProbe {
public:
    virtual ~InterRingProbe() = default;
    virtual MPI_Comm comm() const = 0;
    virtual int nodes() const = 0;       // P
    virtual int lanes() const = 0;  // L: rings (or halving-doublings) across nodes at once, the same on every rank
    // Whether this rank runs one (a rank that carries no lane of the
    // hierarchical allreduce does not: algo/topology.h).  run() on a rank
    // that takes no part returns at once, its sequence numbers kept in
    // step with its node's, and its time is left out of the fit.
    virtual bool takes_part() const { return true; }
    // Scratch for rings of `count` floats with these options.
    virtual Status reserve(size_t count, const RingOptions& opt) = 0;
    // One sum of `count` floats in place on `buf` over the ring.
    virtual Status run(float* buf, size_t count, const RingOptions& opt, std::string* error) = 0;
    // What one run costs in the model's terms (algo/cost_model.h): the
    // network messages one after another, and the bytes through a node's
    // link per byte of the vector.  The rings across nodes by default:
    // 2(P-1), and 2(P-1)/P for each of the L lanes.
    virtual double messages() const { return 2.0 * (nodes() - 1); }
    virtual double bytes_factor() const { return 2.0 * (nodes() - 1) / nodes() * lanes(); }
};

// Times the rings across nodes (UCX, all local ranks at once, so that they
// share each node's link as the hierarchical allreduce does), or whatever
// else `rings` runs, at two sizes and fits the network's alpha and beta
// to its messages() and bytes_factor(); the shared-memory rate comes from
// memcpy (all local ranks copying at once).  Every rank gets the same model
// (the shortest ring times, the slowest copy) and the same status:
// Status::transport_error when a ring failed on some rank (the caller then
// marks the communicator failed on every rank: its endpoints may be out of
// step), Status::unavailable when the times fit no model (the caller keeps
// the defaults).  Collective; a few milliseconds on fast links, tens on a
// 2 Gbit/s one.
Status probe_costs(InterRingProbe& rings, const RingOptions& inter_opt, CostModel* out, std::string* error);

// The model's pick for an allreduce of `bytes` on ranks placed as `shape`,
// in one step among every schedule that can run there: across nodes of
// one rank each the flat ring or the halving-doubling; where some node
// holds several ranks the flat ring or the hierarchical allreduce with
// rings or halving-doublings across nodes (cut into the pieces it would
// cut the call into: segments of `inter_segment_bytes` across nodes).
// `rings`: the costs the rings are priced on; `halving`: the
// halving-doubling's own network costs (null: untimed, never picked), its
// rate capped at the rings' (the same bytes cross the same links: a faster
// fit is a busy machine's noise).  A tie goes to the earlier in kSchedules
// (the ring first).  Identical on every rank that has the same inputs.
// `part`: a reduce-scatter or an allgather of `bytes` (the whole vector)
// is priced as half the allreduce's, each schedule alike, so the same
// comparison picks, except that the hierarchical halves run only on nodes
// of one size and copy the vector once more (algo/hierarchical.h's
// staging: S / beta_shm, twice that in the allreduce's units).
Schedule schedule_here(const CostModel& rings, const ChannelCost* halving, const NodeShape& shape, size_t bytes,
                       size_t inter_segment_bytes, Collective part = Collective::allreduce);
// The phase across nodes of the device hierarchical allreduce (GPU to GPU
// inside each node): Schedule::hierarchical_halving_doubling where its
// halving-doublings are priced faster than its rings on `nodes` nodes
// (crossing_seconds; `halving` as schedule_here's), else
// Schedule::hierarchical_ring.  Identical on every rank.
Schedule crossing_here(const CostModel& rings, const ChannelCost* halving, int nodes, size_t bytes);
// The halving-doubling's network costs as schedule_here prices them: its
// own alpha, its rate capped at the rings'.
ChannelCost capped_halving_cost(const ChannelCost& halving, const ChannelCost& rings);

}  // namespace nexar
