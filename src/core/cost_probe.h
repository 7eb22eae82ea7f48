// Alpha and beta of the two channel kinds, for the cost model that chooses
// between the flat ring and the hierarchical allreduce (algo/cost_model.h).
#pragma once

#include <string>

#include "algo/cost_model.h"
#include "core/comm_context.h"
#include "core/config.h"

namespace nexar {

// What the model assumes when it has not measured (NEXAR_ALGORITHM=hier or
// ring, or a probe that failed): shared memory as measured on our test
// machines, a 100 Gbit/s network.
CostModel default_cost_model();

// Times the rings across nodes (UCX, all local ranks at once, so that they
// share each node's link as the hierarchical allreduce does) at two sizes
// and fits the network's alpha and beta; the shared-memory rate comes from
// memcpy (all local ranks copying at once).  Every rank gets the same model
// (the shortest ring times, the slowest copy) and the same status: Status::transport_error
// when a ring failed on some rank (the context is then marked failed on
// every rank), Status::unavailable when the times fit no model (the caller
// keeps the defaults).  Collective; a few milliseconds on fast links, tens
// on a 2 Gbit/s one.
Status probe_costs(CommContext& ctx, const Config& cfg, CostModel* out, std::string* error);

}  // namespace nexar
