#include "core/ipc_context.h"

#include <cstring>
#include <new>

#include "core/comm_context.h"
#include "core/log.h"
#include "core/pmpi.h"

namespace nexar {

namespace {

// What each rank tells the others at set-up.
struct IpcSetup {
    ShmInboxName board;
    unsigned char input[NEXAR_IPC_HANDLE_BYTES];
    unsigned char done[NEXAR_IPC_HANDLE_BYTES];
    nexar_ipc_memory probe;  // a small allocation every peer must be able to read
    nexar_ipc_memory probe_fd;  // the same as memory that exports as a descriptor (the virtual-memory API's)
    int32_t ok;
    int32_t fd_ok;  // probe_fd is there
};

// This node's ranks of the communicator, in local-index order.
std::vector<int> node_members(const CommContext& ctx) {
    const RingTopology& t = ctx.topology();
    std::vector<int> members(size_t(t.local_size(ctx.rank())), -1);
    for (int r = 0; r < ctx.size(); ++r)
        if (t.same_node(r, ctx.rank())) members[size_t(t.local_index(r))] = r;
    return members;
}

constexpr size_t kProbeBytes = 256;
unsigned char probe_byte(int owner, size_t i) { return static_cast<unsigned char>(owner * 31 + int(i) * 7 + 1); }

}  // namespace

Status IpcContext::create(CommContext& ctx, const nexar_device_api* api, std::unique_ptr<IpcContext>* out,
                          std::string* why) {
    const std::vector<int> members = node_members(ctx);
    const int n = int(members.size()), me = ctx.topology().local_index(ctx.rank());
    std::unique_ptr<IpcContext> ipc(new IpcContext(api, size_t(n)));
    ipc->members_ = members;
    IpcPeers& p = ipc->peers_;
    p.api = api, p.me = me, p.cache = &ipc->cache_;
    p.events.resize(size_t(n));
    ipc->inboxes_.resize(size_t(n));
    std::string error;
    IpcSetup mine;
    memset(&mine, 0, sizeof mine);
    const size_t board_bytes = (sizeof(IpcBoard) + 63) & ~size_t(63);
    Status s = ShmInbox::create(1, board_bytes, &ipc->inboxes_[size_t(me)], &mine.board, &error);
    if (ok(s)) new (ipc->inboxes_[size_t(me)]->slot(0)) IpcBoard;
    IpcEvents& own = p.events[size_t(me)];
    if (ok(s) && (api->get_device(&ipc->device_) != 0 || api->stream_create_nonblocking(&p.stream) != 0 ||
                  api->event_create(&p.finished) != 0 || api->event_create(&p.application) != 0 ||
                  api->ipc_event_create(&own.input, mine.input) != 0 ||
                  api->ipc_event_create(&own.done, mine.done) != 0)) {
        error = std::string("IPC events: ") + api->last_error();
        s = Status::unavailable;
    }
    // A probe of the driver's will and of the path between the GPUs: every
    // peer opens this allocation and reads it back (no peer access, a
    // container or MIG that forbids IPC, a driver that refuses the handle:
    // all show here, before any call depends on it).
    void* probe = nullptr;
    unsigned char pattern[kProbeBytes], seen[kProbeBytes];
    for (size_t i = 0; i < kProbeBytes; ++i) pattern[i] = probe_byte(me, i);
    if (ok(s) && (api->alloc_device(&probe, kProbeBytes) != 0 ||
                  api->memcpy_async(probe, pattern, kProbeBytes, p.stream) != 0 ||
                  api->stream_synchronize(p.stream) != 0 || api->ipc_export_memory(probe, &mine.probe) != 0)) {
        error = std::string("exporting device memory: ") + api->last_error();
        s = Status::unavailable;
    }
    mine.ok = ok(s) ? 1 : 0;
    // The same for memory that exports as a descriptor, which peers take
    // with pidfd_getfd (memory/fd_handle.h: the ptrace rules may forbid it)
    // and map through other driver calls: a no there keeps only such
    // memory off IPC.
    void* probe_fd = nullptr;
    std::string fd_why;
    if (ok(s) && (api->alloc_fd_memory(&probe_fd, kProbeBytes) != 0 ||
                  api->memcpy_async(probe_fd, pattern, kProbeBytes, p.stream) != 0 ||
                  api->stream_synchronize(p.stream) != 0 || api->ipc_export_memory(probe_fd, &mine.probe_fd) != 0 ||
                  !(mine.probe_fd.flags & NEXAR_IPC_FD_HANDLE)))
        fd_why = std::string("memory that exports as a descriptor: ") + api->last_error();
    mine.fd_ok = ok(s) && fd_why.empty() ? 1 : 0;
    // Every rank of the communicator takes part (the hierarchical allreduce's
    // nodes set theirs up at once); each reads its node's entries.
    std::vector<IpcSetup> everyone(static_cast<size_t>(ctx.size()));
    pmpi::allgather(&mine, int(sizeof mine), MPI_BYTE, everyone.data(), int(sizeof mine), MPI_BYTE, ctx.comm());
    std::vector<IpcSetup> all;
    for (int m : members) all.push_back(everyone[size_t(m)]);
    int fd_handles = mine.fd_ok;
    // Opens and reads back a peer's probe; "" when it holds what it should.
    auto read_probe = [&](int r, const nexar_ipc_memory& mem) -> std::string {
        const std::string rank = "rank " + std::to_string(members[size_t(r)]);
        void* opened = nullptr;
        if (api->ipc_open_memory(&mem, &opened) != 0)
            return "opening " + rank + "'s device memory: " + api->last_error();
        std::string why;
        if (api->memcpy_async(seen, opened, kProbeBytes, p.stream) != 0 || api->stream_synchronize(p.stream) != 0)
            why = "reading " + rank + "'s device memory: " + api->last_error();
        for (size_t i = 0; why.empty() && i < kProbeBytes; ++i)
            if (seen[i] != probe_byte(r, i))
                why = "reading " + rank + "'s device memory gave other bytes (no peer access between the GPUs?)";
        api->ipc_close_memory(opened);
        return why;
    };
    for (int r = 0; ok(s) && r < n; ++r) {
        if (r == me) continue;
        const std::string rank = "rank " + std::to_string(members[size_t(r)]);
        if (!all[size_t(r)].ok) {
            s = Status::unavailable, error = rank + " could not set up its IPC events";
            break;
        }
        s = ShmInbox::open(all[size_t(r)].board, &ipc->inboxes_[size_t(r)], &error);
        IpcEvents& e = p.events[size_t(r)];
        if (ok(s) && (api->ipc_event_open(all[size_t(r)].input, &e.input) != 0 ||
                      api->ipc_event_open(all[size_t(r)].done, &e.done) != 0)) {
            error = "opening " + rank + "'s IPC events: " + api->last_error();
            s = Status::unavailable;
        }
        if (ok(s) && !(error = read_probe(r, all[size_t(r)].probe)).empty()) s = Status::unavailable;
        if (ok(s) && fd_handles && !all[size_t(r)].fd_ok)
            fd_handles = 0, fd_why = rank + " has no memory that exports as a descriptor";
        if (ok(s) && fd_handles && !(fd_why = read_probe(r, all[size_t(r)].probe_fd)).empty()) fd_handles = 0;
    }
    int agreed[2] = {ok(s) ? 1 : 0, fd_handles};
    pmpi::allreduce(MPI_IN_PLACE, agreed, 2, MPI_INT, MPI_MIN, ctx.comm());
    if (probe) api->free_device(probe);  // every peer has closed it
    if (mine.fd_ok) api->ipc_release_export(&mine.probe_fd);
    if (probe_fd) api->free_fd_memory(probe_fd);
    if (ipc->inboxes_[size_t(me)]) ipc->inboxes_[size_t(me)]->unlink();  // every rank has mapped it, or given up
    if (!agreed[0]) {
        *why = ok(s) ? "another rank could not set up IPC" : error;
        return Status::unavailable;
    }
    ipc->fd_handles_ = agreed[1] != 0;
    if (!ipc->fd_handles_ && (!fd_why.empty() || ctx.rank() == 0))
        NEXAR_INFO("communicator context %u: IPC without memory exported as descriptors (the virtual-memory API's: "
                   "it takes the device ring without IPC): %s",
                   ctx.id(), fd_why.empty() ? "another rank cannot take its peers' descriptors" : fd_why.c_str());
    for (int r = 0; r < n; ++r) p.boards.push_back(reinterpret_cast<IpcBoard*>(ipc->inboxes_[size_t(r)]->slot(0)));
    *out = std::move(ipc);
    return Status::ok;
}

// Whether the GPU is done with everything this context queued: no call
// failed (on any rank: a failed call's work, or a wait on a dead peer's
// event, may still sit on the stream) and the last call's work ended.
bool IpcContext::safe_to_release() {
    for (const std::unique_ptr<ShmInbox>& b : inboxes_)
        if (b && b->broken()) return false;
    return !peers_.finished || peers_.api->event_query(peers_.finished) == 0;
}

IpcContext::~IpcContext() {
    const nexar_device_api* api = peers_.api;
    if (!api) return;
    if (!safe_to_release()) {
        cache_.abandon();  // the GPU may still use the mappings, events and stream: leave them
        return;
    }
    if (peers_.stream) api->stream_synchronize(peers_.stream);
    for (const IpcEvents& e : peers_.events) {
        if (e.input) api->event_destroy(e.input);
        if (e.done) api->event_destroy(e.done);
    }
    if (peers_.finished) api->event_destroy(peers_.finished);
    if (peers_.application) api->event_destroy(peers_.application);
    if (peers_.stream) api->stream_destroy(peers_.stream);
}

}  // namespace nexar
