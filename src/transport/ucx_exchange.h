// A small vector reduced with MIN over a ring of ranks, in UCX tag messages:
// the agreement of a nonblocking call (call/nonblocking.h), which nexar's
// progress thread can move along without calling MPI.
//
// In round k (0 .. n-2) each rank sends what it holds (its own vector, made
// the MIN of everything received so far) to its successor and receives its
// predecessor's; after n-1 rounds every rank holds the MIN over all n.
// MIN is all the agreement needs, so nothing but one vector is kept.
// Tags: algo/tag.h, agreement_tag.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "transport/ucx.h"

namespace nexar {

class UcxRingExchange {
public:
    static constexpr int kMaxWords = 16;
    struct Ring {
        UcxWorker* worker = nullptr;
        UcxEndpoint* next = nullptr;  // to the successor
        int next_rank = 0, prev_rank = 0, ranks = 1;
        uint32_t send_tag_id = 0;  // the successor's id for the communicator
        uint32_t recv_tag_id = 0;  // this rank's
    };
    // `words` values (at most kMaxWords) starting at `values`, which is
    // where the result goes.  `sequence`: the communicator's agreement
    // number (the same on every rank).  Needs ring.ranks <= kMaxAgreementRounds + 1.
    UcxRingExchange(const Ring& ring, uint32_t sequence, int64_t* values, int words, double timeout_s);
    // Cancels what is still in flight; its records are kept forever (UCX may
    // still write them).
    ~UcxRingExchange();
    UcxRingExchange(const UcxRingExchange&) = delete;
    UcxRingExchange& operator=(const UcxRingExchange&) = delete;

    // Moves along; sets *moved when something did.  Errors: a failed
    // endpoint, a failed transfer, or, once the predecessor has been heard
    // from, no message for longer than the timeout.  (Before, ranks may
    // start the call any time apart, as with MPI's own collectives.)
    Status poll(bool* moved, std::string* error);
    bool finished() const { return round_ >= ring_.ranks - 1; }

private:
    struct Records {
        UcxRequest send, recv;
        int64_t out[kMaxWords], in[kMaxWords];
    };
    Status post_round(std::string* error);

    Ring ring_;
    uint32_t sequence_;
    int64_t* values_;
    int words_;
    double timeout_s_;
    int round_ = 0;
    bool posted_ = false;  // this round's send and receive
    bool heard_ = false;   // a message from the predecessor arrived
    std::unique_ptr<Records> rec_;
    std::chrono::steady_clock::time_point last_moved_;
};

}  // namespace nexar
