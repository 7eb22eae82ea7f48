#include "transport/mpi_channel.h"

#include <chrono>
#include <cstdio>

#include "algo/tag.h"

#include "mpi/pmpi.h"
#include "transport/shm_inbox.h"
#include "transport/ucx_channel.h"

namespace nexar {

namespace {

std::string mpi_error_text(int rc) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (PMPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", rc);
    return text;
}

}  // namespace

int mpi_tag_of(uint64_t tag, int tag_ub) {
    const uint64_t space = uint64_t(tag_ub > 0 ? tag_ub : 32767) + 1;
    return int(uint64_t(unpack_tag(tag).sequence) % space);
}

Status MpiPort::post_send(uint32_t slot, const WireBuffer& wire, size_t bytes, uint64_t tag, std::string* error) {
    const int rc = PMPI_Isend(wire.ptr, int(bytes), MPI_BYTE, peer_, mpi_tag_of(tag, tag_ub_), comm_, &requests_[slot]);
    if (rc == MPI_SUCCESS) return Status::ok;
    requests_[slot] = MPI_REQUEST_NULL;
    *error = message_error("sending to rank %d failed: %s", peer_, mpi_error_text(rc).c_str());
    return Status::transport_error;
}

Status MpiPort::post_recv(uint32_t slot, const WireBuffer& wire, size_t bytes, uint64_t tag, std::string* error) {
    receives_ = true;
    const int rc = PMPI_Irecv(wire.ptr, int(bytes), MPI_BYTE, peer_, mpi_tag_of(tag, tag_ub_), comm_, &requests_[slot]);
    if (rc == MPI_SUCCESS) return Status::ok;
    requests_[slot] = MPI_REQUEST_NULL;
    *error = message_error("posting a receive failed: %s", mpi_error_text(rc).c_str());
    return Status::transport_error;
}

Status MpiPort::send_done(uint32_t slot, bool* done, std::string* error) {
    int flag = 0;
    const int rc = pmpi::test(&requests_[slot], &flag, MPI_STATUS_IGNORE);
    *done = false;
    if (rc != MPI_SUCCESS) {
        *error = message_error("send to rank %d failed: %s", peer_, mpi_error_text(rc).c_str());
        return Status::peer_failure;
    }
    *done = flag != 0;
    return Status::ok;
}

Status MpiPort::recv_done(uint32_t slot, size_t expected, bool* done, std::string* error) {
    int flag = 0;
    MPI_Status status;
    const int rc = pmpi::test(&requests_[slot], &flag, &status);
    *done = false;
    if (rc != MPI_SUCCESS) {
        int error_class = MPI_ERR_OTHER;
        PMPI_Error_class(rc, &error_class);
        if (error_class == MPI_ERR_TRUNCATE) {
            *error = message_error("rank %d sent more data than expected: do all ranks pass the same count?", peer_);
            return Status::mismatch;
        }
        *error = message_error("receive from rank %d failed: %s", peer_, mpi_error_text(rc).c_str());
        return Status::peer_failure;
    }
    if (!flag) return Status::ok;
    int received = 0;
    PMPI_Get_count(&status, MPI_BYTE, &received);
    if (size_t(received) != expected) {
        *error = message_error("rank %d sent %d bytes where %zu were expected: do all ranks pass the same count?",
                               peer_, received, expected);
        return Status::mismatch;
    }
    *done = true;
    return Status::ok;
}

Status MpiPort::check_peer(std::string* error) {
    if (peer_pid_ > 0 && process_gone(peer_pid_)) {
        *error = message_error("rank %d (process %d) has exited", peer_, int(peer_pid_));
        return Status::peer_failure;
    }
    return Status::ok;
}

// After a failure: receives are cancelled (the MPI can cancel a receive
// that has not matched); what does not complete within the budget is
// left to the MPI (its request freed: the MPI ends it in its own time)
// and, for receives, the scratch slots it may write are given up.  A
// receive posted straight into the caller's buffer that the MPI neither
// completes nor cancels (a message half arrived from a peer that died)
// is beyond nexar's reach: the MPI that runs on may still write it.
void MpiPort::abort(size_t first, size_t last, SlotBank bank) {
    if (receives_)
        for (size_t i = first; i < last; ++i)
            if (requests_[bank.slot(i)] != MPI_REQUEST_NULL) PMPI_Cancel(&requests_[bank.slot(i)]);
    const auto deadline = abort_deadline();
    bool all = false;
    for (bool past = false; !all; past = std::chrono::steady_clock::now() > deadline) {
        all = true;
        for (size_t i = first; i < last; ++i) {
            MPI_Request& r = requests_[bank.slot(i)];
            int flag = 0;
            if (r != MPI_REQUEST_NULL && (pmpi::test(&r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag))
                r = MPI_REQUEST_NULL;  // completed, cancelled or failed: the MPI is done with it
            all &= r == MPI_REQUEST_NULL;
        }
        if (past) break;
    }
    if (all) return;
    for (size_t i = first; i < last; ++i)
        if (requests_[bank.slot(i)] != MPI_REQUEST_NULL) pmpi::request_free(&requests_[bank.slot(i)]);
    if (receives_) scratch_.abandon_receives();
}

}  // namespace nexar
