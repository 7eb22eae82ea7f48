#include "algo/hierarchical.h"

#include "algo/partition.h"
#include "algo/ring_schedule.h"

namespace nexar {

Span hierarchical_inter_span(size_t count, int local_position, int local_size) {
    return chunk_span(count, size_t(local_size), first_send_chunk(RingPhases::allgather, local_position, local_size));
}

Status hierarchical_allreduce(const HierarchicalLinks& l, uint32_t sequence, const void* sendbuf, void* recvbuf,
                              size_t count, DataType type, const RingOptions& local_options,
                              const RingOptions& inter_options, std::string* error) {
    if (!l.local_out || !l.local_in || !l.inter_out || !l.inter_in || l.local.size < 2 || l.inter.size < 2)
        return Status::invalid_argument;
    Status s = ring_allreduce(l.local, sequence, sendbuf, recvbuf, count, type, local_options, *l.local_out,
                              *l.local_in, error, RingPhases::reduce_scatter);
    if (!ok(s)) return s;
    const Span mine = hierarchical_inter_span(count, l.local.position, l.local.size);
    char* chunk = static_cast<char*>(recvbuf) + mine.offset * datatype_size(type);
    s = ring_allreduce(l.inter, sequence, chunk, chunk, mine.count, type, inter_options, *l.inter_out, *l.inter_in,
                       error);
    if (!ok(s)) return s;
    return ring_allreduce(l.local, sequence, recvbuf, recvbuf, count, type, local_options, *l.local_out,
                          *l.local_in, error, RingPhases::allgather);
}

}  // namespace nexar
