// Ring hops over the MPI's own point-to-point (algo/channel.h): segments
// sent with PMPI_Isend and received with PMPI_Irecv on nexar's private
// duplicate of the communicator, several in flight each way, their
// completion asked with PMPI_Test from the ring driver.  The network
// channel where UCX does not run (Slingshot, EFA, Omni-Path: the MPI moves
// bytes well there) or NEXAR_NET=mpi says so.  The stages of a message and
// the segment engine's part are transport/message_channel.h's.
//
// Tags: the private communicator keeps nexar's messages apart from every
// other; a tag is the ring operation's call sequence (algo/tag.h) modulo
// the MPI's MPI_TAG_UB + 1, so that rings of one communicator in flight at
// once (the hierarchical allreduce's pieces) never match each other's
// messages.  Inside one operation's stream every message has the same tag:
// the MPI matches messages of one sender, tag and communicator in the order
// they were sent and receives in the order they were posted, which is the
// ring's order.  The communicator returns errors (MPI_ERRORS_RETURN), so
// that a message of the wrong length is the call's error, not the job's.
//
// Device memory: the engine stages it through pinned host memory unless
// the MPI is CUDA-aware (the plan decides, call/call_plan.cc); a device
// pointer never reaches an MPI that does not know CUDA.
//
// Every MPI call here is made by the thread that drives the ring: the
// application's, or nexar's progress thread only where the MPI provides
// MPI_THREAD_MULTIPLE (call/collective_task.cc).
#pragma once

#include <mpi.h>
#include <sys/types.h>

#include <string>

#include "transport/message_channel.h"

namespace nexar {

class RingScratch;

// The MPI tag of a message with nexar tag `tag`, where tags go up to `tag_ub`.
int mpi_tag_of(uint64_t tag, int tag_ub);

class MpiPort final : public MessagePort {
public:
    // `comm`: the private duplicate; `peer_rank` in it.  `peer_pid`: the
    // peer's process where it shares this node (0: none known), watched
    // while nothing moves.  `scratch`: receive slots a failed receive may
    // still write are given up there (RingScratch::abandon_receives).
    MpiPort(MPI_Comm comm, int peer_rank, int tag_ub, RingScratch& scratch, pid_t peer_pid = 0)
        : comm_(comm), peer_(peer_rank), tag_ub_(tag_ub), scratch_(scratch), peer_pid_(peer_pid) {
        for (MPI_Request& r : requests_) r = MPI_REQUEST_NULL;
    }
    ChannelKind kind() const override { return ChannelKind::mpi; }
    Status post_send(uint32_t slot, const WireBuffer& wire, size_t bytes, uint64_t tag, std::string* error) override;
    Status post_recv(uint32_t slot, const WireBuffer& wire, size_t bytes, uint64_t tag, std::string* error) override;
    Status send_done(uint32_t slot, bool* done, std::string* error) override;
    Status recv_done(uint32_t slot, size_t expected, bool* done, std::string* error) override;
    Status check_peer(std::string* error) override;
    void abort(size_t first, size_t last, SlotBank bank) override;

private:
    MPI_Comm comm_;
    int peer_;
    int tag_ub_;
    RingScratch& scratch_;
    pid_t peer_pid_;
    bool receives_ = false;  // which direction this port has carried
    MPI_Request requests_[kMaxRingDepth];
};

struct MpiPortHolder {
    MpiPort port;
};
class MpiSendChannel final : private MpiPortHolder, public MessageSendChannel {
public:
    MpiSendChannel(MPI_Comm comm, int peer_rank, int tag_ub, SlotBank slots, RingScratch& scratch,
                   SegmentEngine& engine)
        : MpiPortHolder{MpiPort(comm, peer_rank, tag_ub, scratch)}, MessageSendChannel(port, engine, slots) {}
};
class MpiRecvChannel final : private MpiPortHolder, public MessageRecvChannel {
public:
    MpiRecvChannel(MPI_Comm comm, int peer_rank, int tag_ub, SlotBank slots, RingScratch& scratch,
                   SegmentEngine& engine, pid_t peer_pid = 0)
        : MpiPortHolder{MpiPort(comm, peer_rank, tag_ub, scratch, peer_pid)},
          MessageRecvChannel(port, engine, slots) {}
};

}  // namespace nexar
