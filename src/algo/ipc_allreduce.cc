#include "algo/ipc_allreduce.h"

namespace nexar {

IpcAllreduce::IpcAllreduce(const IpcPeers& peers, uint64_t sequence, const void* sendbuf, void* recvbuf,
                           const nexar_ipc_memory& send_ipc, const nexar_ipc_memory& recv_ipc, size_t count,
                           DataType type, ReduceOp op, IpcPart part, const IpcLayout& layout)
    : peers_(peers),
      seq_(sequence),
      send_(static_cast<const char*>(sendbuf)),
      recv_(static_cast<char*>(recvbuf)),
      send_ipc_(send_ipc),
      recv_ipc_(recv_ipc),
      count_(count),
      elem_(datatype_size(type)),
      type_(type),
      op_(op),
      part_(part),
      layout_(layout) {}

std::pair<size_t, size_t> IpcAllreduce::chunk(int rank) const {
    if (layout_.displs) return {layout_.displs[rank], layout_.counts[rank]};
    const int n = int(peers_.boards.size());
    const size_t begin = chunk_begin(count_, rank, n);
    return {begin, chunk_begin(count_, rank + 1, n) - begin};
}

Status IpcAllreduce::failed(const char* what, std::string* error) {
    *error = std::string(what) + ": " + peers_.api->last_error();
    return Status::transport_error;
}

int IpcAllreduce::waiting_for() const {
    const bool want_done = stage_ == Stage::collect;
    for (size_t r = 0; r < peers_.boards.size(); ++r) {
        const IpcBoard* b = peers_.boards[r];
        const uint64_t got = (want_done ? b->done : b->ready).load(std::memory_order_acquire);
        if (got < seq_) return int(r);
    }
    return -1;
}

Status IpcAllreduce::publish(std::string* error) {
    const nexar_device_api* api = peers_.api;
    IpcBoard* own = peers_.boards[size_t(peers_.me)];
    const size_t slot = size_t(seq_ % 2);
    own->send[slot] = send_ipc_;
    own->recv[slot] = recv_ipc_;
    if (peers_.application && (api->event_record(peers_.application, nullptr) != 0 ||
                               api->stream_wait_event(peers_.stream, peers_.application) != 0))
        return failed("waiting for the application's work", error);
    if (api->event_record(peers_.events[size_t(peers_.me)].input, peers_.stream) != 0)
        return failed("recording the input event", error);
    own->ready.store(seq_, std::memory_order_release);
    return Status::ok;
}

Status IpcAllreduce::reduce_and_scatter(std::string* error) {
    const nexar_device_api* api = peers_.api;
    const int n = int(peers_.boards.size()), me = peers_.me;
    const size_t slot = size_t(seq_ % 2);
    // Every rank's send buffer and every peer's receive buffer, here.
    // (Each half maps only what it touches.)
    const bool reduces = part_ != IpcPart::allgather, scatters = part_ != IpcPart::reduce_scatter;
    std::vector<const char*> sends(static_cast<size_t>(n));
    std::vector<char*> recvs(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
        if (r == me) {
            sends[size_t(r)] = send_, recvs[size_t(r)] = recv_;
            continue;
        }
        const IpcBoard* b = peers_.boards[size_t(r)];
        char *s = nullptr, *d = nullptr;
        Status st = reduces ? peers_.cache->map(r, b->send[slot], &s, error) : Status::ok;
        if (ok(st) && scatters) st = peers_.cache->map(r, b->recv[slot], &d, error);
        if (!ok(st)) return st;
        sends[size_t(r)] = s, recvs[size_t(r)] = d;
        if (api->stream_wait_event(peers_.stream, peers_.events[size_t(r)].input) != 0)
            return failed("waiting for a peer's input event", error);
    }
    const std::pair<size_t, size_t> mine = chunk(me);
    const size_t items = mine.second, at = mine.first * elem_, bytes = items * elem_;
    // The reduce-scatter's result, and what the allgather sends.
    char* result = reduces && layout_.own_out ? layout_.own_out : recv_ + at;
    const char* out = reduces ? result : layout_.own_in ? layout_.own_in : recv_ + at;
    if (items > 0) {
        // Own input first (in place it is the result itself, read before
        // written), then the others in rank order: one order per chunk, so
        // one result.
        bool first = true;
        for (int r = 0; reduces && r < n; ++r) {
            if (r == me) continue;
            const char* a = first ? send_ + at : result;
            if (api->reduce_async(result, a, sends[size_t(r)] + at, items, int(type_), int(op_), peers_.stream) != 0)
                return failed("reducing from a peer's buffer", error);
            first = false;
        }
        // A rank alone (one local rank per node) reduces nothing.
        if (reduces && first && result != send_ + at && api->memcpy_async(result, send_ + at, bytes, peers_.stream) != 0)
            return failed("copying its own input", error);
        // The allgather's own block, from elsewhere, into its place here.
        if (scatters && out != recv_ + at && api->memcpy_async(recv_ + at, out, bytes, peers_.stream) != 0)
            return failed("copying its own block", error);
        for (int r = 0; scatters && r < n; ++r)
            if (r != me && api->memcpy_async(recvs[size_t(r)] + at, out, bytes, peers_.stream) != 0)
                return failed("copying into a peer's buffer", error);
    }
    if (api->event_record(peers_.events[size_t(me)].done, peers_.stream) != 0)
        return failed("recording the done event", error);
    peers_.boards[size_t(me)]->done.store(seq_, std::memory_order_release);
    return Status::ok;
}

Status IpcAllreduce::collect(std::string* error) {
    const nexar_device_api* api = peers_.api;
    for (size_t r = 0; r < peers_.boards.size(); ++r)
        if (int(r) != peers_.me && api->stream_wait_event(peers_.stream, peers_.events[r].done) != 0)
            return failed("waiting for a peer's done event", error);
    const size_t bytes = chunk(peers_.me).second * elem_;
    if (part_ == IpcPart::reduce_scatter && layout_.final_out && bytes > 0 &&
        api->memcpy_async(layout_.final_out, layout_.own_out, bytes, peers_.stream) != 0)
        return failed("copying the result into place", error);
    if (api->event_record(peers_.finished, peers_.stream) != 0) return failed("recording the end of the call", error);
    return Status::ok;
}

Status IpcAllreduce::poll(bool* moved, std::string* error) {
    Status s = Status::ok;
    switch (stage_) {
        case Stage::publish:
            if (!ok(s = publish(error))) return s;
            stage_ = Stage::reduce, *moved = true;
            [[fallthrough]];
        case Stage::reduce:
            if (waiting_for() >= 0) return Status::ok;
            if (!ok(s = reduce_and_scatter(error))) return s;
            stage_ = Stage::collect, *moved = true;
            [[fallthrough]];
        case Stage::collect:
            if (waiting_for() >= 0) return Status::ok;
            if (!ok(s = collect(error))) return s;
            stage_ = Stage::finishing, *moved = true;
            [[fallthrough]];
        case Stage::finishing: {
            const int q = peers_.api->event_query(peers_.finished);
            if (q < 0) return failed("waiting for the call's work", error);
            if (q > 0) return Status::ok;
            stage_ = Stage::finished, *moved = true;
            return Status::ok;
        }
        case Stage::finished: return Status::ok;
    }
    return Status::ok;
}

}  // namespace nexar
