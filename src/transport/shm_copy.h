// How a call's same-node hops move segments (transport/shm_channel.h;
// NEXAR_SHM_COPY, docs/tuning.md).  Ordered: ranks agree on the least any
// of them proposes.
#pragma once

namespace nexar {

enum class ShmCopy : int {
    slots = 0,  // every segment copied into a slot and out again
    mixed = 1,  // allgather segments read by the receiver with CMA, one copy
    cma = 2,    // reduce-scatter segments too
    push = 3,   // as cma, but the sender writes each allgather segment into
                // the receiver's buffer with CMA right after reducing it,
                // from its cache: one memory pass fewer than reading it back
};
constexpr int kShmCopyModes = 4;

inline const char* shm_copy_name(ShmCopy c) {
    static const char* const names[kShmCopyModes] = {"slots", "mixed", "cma", "push"};
    return unsigned(c) < unsigned(kShmCopyModes) ? names[int(c)] : "?";
}

}  // namespace nexar
