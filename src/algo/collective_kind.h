// The collectives nexar takes, as the layers below the call know them: the
// path learner keys its classes by them (decide/path_learner.h), the call
// describes itself with one (call/collective.h), and each runs its own
// halves of the ring.
#pragma once

#include "algo/ring_schedule.h"

namespace nexar {

enum class Collective { allreduce = 0, reduce_scatter = 1, allgather = 2 };
constexpr int kCollectives = 3;

// Its name in messages.
inline const char* collective_name(Collective c) {
    return c == Collective::allreduce ? "allreduce" : c == Collective::reduce_scatter ? "reduce-scatter" : "allgather";
}

// Which halves of the ring a collective runs.
inline RingPhases collective_phases(Collective c) {
    return c == Collective::allreduce ? RingPhases::allreduce
           : c == Collective::reduce_scatter ? RingPhases::reduce_scatter
                                             : RingPhases::allgather;
}

}  // namespace nexar
