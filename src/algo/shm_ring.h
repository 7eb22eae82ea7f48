// The pipelined ring on host buffers between ranks of one node, through
// shared-memory inboxes (transport/shm_inbox.h) instead of UCX messages.
//
// Same schedule as algo/ring.h (reduce-scatter then allgather, the send
// stream being the receive stream shifted by one chunk, ring_schedule.h),
// same segments and tags.  A send is a memcpy into a slot of the next rank's
// inbox; a receive reduces straight out of the slot into recvbuf
// (reduce-scatter) or copies it into place (allgather).  Slots are small and
// reused, so they stay in cache: per rank and per byte of its share, the
// call reads the input twice, the peer's slot twice and writes recvbuf
// twice, and no byte goes through the kernel.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "algo/ring.h"
#include "core/status.h"
#include "reduce/types.h"
#include "transport/shm_inbox.h"

namespace nexar {

struct ShmRingLinks {
    ShmInbox* inbox = nullptr;       // this rank's, written by rank-1
    ShmInbox* next_inbox = nullptr;  // rank+1's, written by this rank
    pid_t prev_pid = 0;              // the writer of `inbox`, watched for exit (0: not watched)
    int rank = 0;
    int size = 1;
    uint32_t context_id = 0;
};

// Bytes one segment of this call needs in a slot (ring_slot_bytes); the call
// fits when this is at most the inboxes' slot_bytes.
inline bool shm_ring_fits(const ShmRingLinks& l, size_t count, size_t elem_size, size_t segment_bytes) {
    if (!l.inbox || !l.next_inbox) return false;
    size_t need = ring_slot_bytes(count, l.size, elem_size, segment_bytes);
    return need <= l.next_inbox->slot_bytes() && need <= l.inbox->slot_bytes();
}

// Allreduces `count` elements like ring_allreduce (sendbuf may equal
// recvbuf).  options.depth is ignored: the inboxes' depth is the pipeline.
// On failure *error explains it and the inboxes are out of step: the
// caller must not use them again.
Status shm_ring_allreduce(const ShmRingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf,
                          size_t count, DataType type, ReduceOp op, const RingOptions& options, std::string* error);

}  // namespace nexar
