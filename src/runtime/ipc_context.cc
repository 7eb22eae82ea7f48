#include "runtime/ipc_context.h"

#include <cstring>
#include <new>

#include "base/log.h"
#include "mpi/pmpi.h"
#include "runtime/comm_context.h"

namespace nexar {

// What each rank tells the others at set-up.
struct IpcContext::Setup {
    ShmInboxName board;
    unsigned char input[NEXAR_IPC_HANDLE_BYTES];
    unsigned char done[NEXAR_IPC_HANDLE_BYTES];
    nexar_ipc_memory probe;  // a small allocation every peer must be able to read
    nexar_ipc_memory probe_fd;  // the same as memory that exports as a descriptor (the virtual-memory API's)
    int32_t ok;
    int32_t fd_ok;  // probe_fd is there
};

namespace {

// This node's ranks of the communicator, in local-index order.
std::vector<int> node_members(const CommContext& ctx) {
    const RingTopology& t = ctx.topology();
    std::vector<int> members(size_t(t.local_size(ctx.rank())), -1);
    for (int r = 0; r < ctx.size(); ++r)
        if (t.same_node(r, ctx.rank())) members[size_t(t.local_index(r))] = r;
    return members;
}

// The probes: a small allocation with its owner's pattern that every peer
// opens and reads back, which shows the driver's will and the path between
// the GPUs (no peer access, a container or MIG that forbids IPC, a driver
// that refuses the handle) before any call depends on it.
constexpr size_t kProbeBytes = 256;
unsigned char probe_byte(int owner, size_t i) { return static_cast<unsigned char>(owner * 31 + int(i) * 7 + 1); }

// Allocates (with `alloc`: the API's alloc_device or alloc_fd_memory),
// fills and exports this rank's probe.
bool make_probe(const nexar_device_api* api, void* stream, int (*alloc)(void**, size_t), int owner, void** ptr,
                nexar_ipc_memory* out) {
    unsigned char pattern[kProbeBytes];
    for (size_t i = 0; i < kProbeBytes; ++i) pattern[i] = probe_byte(owner, i);
    return alloc(ptr, kProbeBytes) == 0 && api->memcpy_async(*ptr, pattern, kProbeBytes, stream) == 0 &&
           api->stream_synchronize(stream) == 0 && api->ipc_export_memory(*ptr, out) == 0;
}

// Opens and reads back the probe of the peer with index `owner` (`rank`
// names it); "" when it holds what it should, else why not.
std::string read_probe(const nexar_device_api* api, void* stream, int owner, const std::string& rank,
                       const nexar_ipc_memory& mem) {
    void* opened = nullptr;
    if (api->ipc_open_memory(&mem, &opened) != 0) return "opening " + rank + "'s device memory: " + api->last_error();
    unsigned char seen[kProbeBytes];
    std::string why;
    if (api->memcpy_async(seen, opened, kProbeBytes, stream) != 0 || api->stream_synchronize(stream) != 0)
        why = "reading " + rank + "'s device memory: " + api->last_error();
    for (size_t i = 0; why.empty() && i < kProbeBytes; ++i)
        if (seen[i] != probe_byte(owner, i))
            why = "reading " + rank + "'s device memory gave other bytes (no peer access between the GPUs?)";
    api->ipc_close_memory(opened);
    return why;
}

}  // namespace

// This rank's board, stream, events and probes, described in *mine.  The
// descriptor probe's failure is no error: it leaves *fd_why set.
Status IpcContext::prepare(Setup* mine, void** probe, void** probe_fd, std::string* error, std::string* fd_why) {
    const nexar_device_api* api = peers_.api;
    const int me = peers_.me;
    const size_t board_bytes = (sizeof(IpcBoard) + 63) & ~size_t(63);
    Status s = ShmInbox::create(1, board_bytes, &inboxes_[size_t(me)], &mine->board, error);
    if (!ok(s)) return s;
    new (inboxes_[size_t(me)]->slot(0)) IpcBoard;
    IpcEvents& own = peers_.events[size_t(me)];
    if (api->get_device(&device_) != 0 || api->stream_create_nonblocking(&peers_.stream) != 0 ||
        api->event_create(&peers_.finished) != 0 || api->event_create(&peers_.application) != 0 ||
        api->ipc_event_create(&own.input, mine->input) != 0 || api->ipc_event_create(&own.done, mine->done) != 0)
        return *error = std::string("IPC events: ") + api->last_error(), Status::unavailable;
    if (!make_probe(api, peers_.stream, api->alloc_device, me, probe, &mine->probe))
        return *error = std::string("exporting device memory: ") + api->last_error(), Status::unavailable;
    // Memory that exports as a descriptor, which peers take with
    // pidfd_getfd (memory/fd_handle.h: the ptrace rules may forbid it) and
    // map through other driver calls: a no keeps only such memory off IPC.
    if (!make_probe(api, peers_.stream, api->alloc_fd_memory, me, probe_fd, &mine->probe_fd) ||
        !(mine->probe_fd.flags & NEXAR_IPC_FD_HANDLE))
        *fd_why = std::string("memory that exports as a descriptor: ") + api->last_error();
    return Status::ok;
}

// Peer `r`'s board, events and probes; a failed descriptor probe clears
// *fd_handles and says why in *fd_why.
Status IpcContext::open_peer(int r, const Setup& theirs, std::string* error, int* fd_handles, std::string* fd_why) {
    const nexar_device_api* api = peers_.api;
    const std::string rank = "rank " + std::to_string(members_[size_t(r)]);
    if (!theirs.ok) return *error = rank + " could not set up its IPC events", Status::unavailable;
    Status s = ShmInbox::open(theirs.board, &inboxes_[size_t(r)], error);
    if (!ok(s)) return s;
    IpcEvents& e = peers_.events[size_t(r)];
    if (api->ipc_event_open(theirs.input, &e.input) != 0 || api->ipc_event_open(theirs.done, &e.done) != 0)
        return *error = "opening " + rank + "'s IPC events: " + api->last_error(), Status::unavailable;
    if (!(*error = read_probe(api, peers_.stream, r, rank, theirs.probe)).empty()) return Status::unavailable;
    if (*fd_handles && !theirs.fd_ok)
        *fd_handles = 0, *fd_why = rank + " has no memory that exports as a descriptor";
    if (*fd_handles && !(*fd_why = read_probe(api, peers_.stream, r, rank, theirs.probe_fd)).empty()) *fd_handles = 0;
    return Status::ok;
}

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
    std::string error, fd_why;
    Setup mine;
    memset(&mine, 0, sizeof mine);
    void *probe = nullptr, *probe_fd = nullptr;
    Status s = ipc->prepare(&mine, &probe, &probe_fd, &error, &fd_why);
    mine.ok = ok(s) ? 1 : 0;
    mine.fd_ok = ok(s) && fd_why.empty() ? 1 : 0;
    // Every rank of the communicator takes part (the hierarchical allreduce's
    // nodes set theirs up at once); each reads its node's entries.
    std::vector<Setup> everyone(static_cast<size_t>(ctx.size()));
    pmpi::allgather(&mine, int(sizeof mine), MPI_BYTE, everyone.data(), int(sizeof mine), MPI_BYTE, ctx.comm());
    int fd_handles = mine.fd_ok;
    for (int r = 0; ok(s) && r < n; ++r)
        if (r != me) s = ipc->open_peer(r, everyone[size_t(members[size_t(r)])], &error, &fd_handles, &fd_why);
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
