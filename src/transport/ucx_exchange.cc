#include "transport/ucx_exchange.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "algo/tag.h"
#include "memory/device_api.h"

namespace nexar {

namespace {

// Records UCX may still write after a failure: never freed.
void keep_forever(void* records) {
    static std::mutex mutex;
    static auto* graveyard = new std::vector<void*>();
    std::lock_guard<std::mutex> lock(mutex);
    graveyard->push_back(records);
}

}  // namespace

UcxRingExchange::UcxRingExchange(const Ring& ring, uint32_t sequence, int64_t* values, int words, double timeout_s)
    : ring_(ring), sequence_(sequence), values_(values), words_(std::min(words, kMaxWords)), timeout_s_(timeout_s),
      rec_(new Records), last_moved_(std::chrono::steady_clock::now()) {}

UcxRingExchange::~UcxRingExchange() {
    if (!posted_) return;
    const bool busy = !rec_->send.completed() || !rec_->recv.completed();
    if (!rec_->recv.completed()) ucx_cancel(*ring_.worker, &rec_->recv);
    if (busy) {
        keep_forever(rec_.release());
        return;
    }
    ucx_release(&rec_->send);
    ucx_release(&rec_->recv);
}

Status UcxRingExchange::post_round(std::string* error) {
    memcpy(rec_->out, values_, sizeof(int64_t) * size_t(words_));
    const size_t bytes = sizeof(int64_t) * size_t(words_);
    const uint32_t round = uint32_t(round_);
    Status s = ucx_post_recv(*ring_.worker, rec_->in, bytes, agreement_tag(ring_.recv_tag_id, sequence_, round),
                             NEXAR_UCX_MEMORY_HOST, &rec_->recv);
    if (ok(s))
        s = ucx_post_send(*ring_.next, rec_->out, bytes, agreement_tag(ring_.send_tag_id, sequence_, round),
                          NEXAR_UCX_MEMORY_HOST, &rec_->send);
    posted_ = true;
    if (!ok(s)) {
        char buf[160];
        snprintf(buf, sizeof buf, "could not post the agreement's messages to rank %d / from rank %d",
                 ring_.next_rank, ring_.prev_rank);
        *error = buf;
    }
    return s;
}

Status UcxRingExchange::poll(bool* moved, std::string* error) {
    if (finished()) return Status::ok;
    if (!posted_) {
        Status s = post_round(error);
        if (!ok(s)) return s;
        *moved = true;
    }
    if (ring_.worker->progress()) *moved = true;
    if (rec_->send.completed() && rec_->recv.completed()) {
        if (rec_->send.status != kUcxOk || rec_->recv.status != kUcxOk) {
            char buf[200];
            snprintf(buf, sizeof buf, "the agreement's message %s rank %d failed (%s)",
                     rec_->send.status != kUcxOk ? "to" : "from",
                     rec_->send.status != kUcxOk ? ring_.next_rank : ring_.prev_rank,
                     ucx_status_text(rec_->send.status != kUcxOk ? rec_->send.status : rec_->recv.status));
            *error = buf;
            return Status::peer_failure;
        }
        ucx_release(&rec_->send);
        ucx_release(&rec_->recv);
        posted_ = false;
        heard_ = true;
        for (int i = 0; i < words_; ++i) values_[i] = std::min(values_[i], rec_->in[i]);
        ++round_;
        *moved = true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (*moved) {
        last_moved_ = now;
        return Status::ok;
    }
    if (ring_.next->failed()) {
        char buf[160];
        snprintf(buf, sizeof buf, "connection to rank %d failed during the agreement (%s)", ring_.next_rank,
                 ucx_status_text(ring_.next->failure_status()));
        *error = buf;
        return Status::peer_failure;
    }
    const double idle = std::chrono::duration<double>(now - last_moved_).count();
    if (timeout_s_ > 0 && heard_ && idle > timeout_s_) {
        char buf[200];
        snprintf(buf, sizeof buf,
                 "no agreement for %.1f s (NEXAR_TIMEOUT_S): waiting on rank %d or rank %d (round %d of %d)", idle,
                 ring_.prev_rank, ring_.next_rank, round_ + 1, ring_.ranks - 1);
        *error = buf;
        return Status::timeout;
    }
    return Status::ok;
}

}  // namespace nexar
