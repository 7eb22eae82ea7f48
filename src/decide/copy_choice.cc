#include "decide/copy_choice.h"

#include <cstdio>

namespace nexar {

ShmCopyChooser::Shape& ShmCopyChooser::shape(size_t bytes, int variant) {
    unsigned size_class = bytes ? unsigned(63 - __builtin_clzll(uint64_t(bytes))) : 0;
    return shapes_[kVariants * size_class + unsigned(variant) % kVariants];
}

namespace {

// Choice c: mode c, or (the last) slots with the own block copied along.
CopyProposal choice(int c) {
    CopyProposal p;
    p.own_block_with_slots = c == kShmCopyModes;
    p.mode = p.own_block_with_slots ? ShmCopy::slots : ShmCopy(c);
    return p;
}
int choice_index(CopyProposal p) {
    return p.mode == ShmCopy::slots && p.own_block_with_slots ? kShmCopyModes : int(p.mode);
}
const char* choice_name(int c) { return c == kShmCopyModes ? "slots+own" : shm_copy_name(ShmCopy(c)); }

// The trials of a round: kSamplesPerMode calls for each candidate.
uint32_t trial_calls(uint32_t candidates) {
    return ShmCopyChooser::kSamplesPerMode * uint32_t(__builtin_popcount(candidates));
}

// The k-th candidate (from 0), in choice order.
int nth_candidate(uint32_t candidates, uint32_t k) {
    for (int c = 0; c < ShmCopyChooser::kChoices; ++c)
        if ((candidates >> c & 1) && k-- == 0) return c;
    return 0;
}

}  // namespace

CopyProposal ShmCopyChooser::propose(size_t bytes, int variant, uint32_t candidates) {
    Shape& s = shape(bytes, variant);
    s.candidates = candidates & ((1u << kChoices) - 1);
    if (!s.candidates) s.candidates = 1;  // slots
    const uint32_t n = s.calls % kRoundCalls;
    if (n == 0) {
        for (double& b : s.best) b = 0;
        s.slow_calls = 0;
    }
    // A mode's samples are consecutive calls.  A call finds the cache as the
    // call before left it, and a mode that streams its results past the
    // cache is slow right after one that left them there dirty (measured:
    // slots took 10.2 ms for a 64 MiB allgather between CMA calls, 6.9 ms
    // after slots), so only a mode's later samples show its steady state.
    if (n < trial_calls(s.candidates)) return choice(nth_candidate(s.candidates, n / kSamplesPerMode));
    int fastest = -1;
    for (int c = 0; c < kChoices; ++c)
        if ((s.candidates >> c & 1) && s.best[c] > 0 && (fastest < 0 || s.best[c] < s.best[fastest])) fastest = c;
    return choice(fastest < 0 ? nth_candidate(s.candidates, 0) : fastest);
}

bool ShmCopyChooser::record(size_t bytes, int variant, CopyProposal used, double seconds) {
    Shape& s = shape(bytes, variant);
    const uint32_t n = s.calls % kRoundCalls;  // this call's place in its round
    ++s.calls;
    double& b = s.best[choice_index(used)];
    // After the trials: does the chosen mode still run as it measured?
    if (n >= trial_calls(s.candidates))
        s.slow_calls = uint16_t(b > 0 && seconds > kDriftFactor * b ? s.slow_calls + 1 : 0);
    if (seconds > 0 && (b <= 0 || seconds < b)) b = seconds;
    return s.calls % kRoundCalls == trial_calls(s.candidates);
}

bool ShmCopyChooser::wants_new_round(size_t bytes, int variant) {
    Shape& s = shape(bytes, variant);
    return s.slow_calls >= kDriftCalls && s.calls % kRoundCalls >= s.drift_gap;
}

void ShmCopyChooser::start_new_round(size_t bytes, int variant) {
    Shape& s = shape(bytes, variant);
    // The call in flight still records into this round; the next starts one.
    s.calls = (s.calls / kRoundCalls + 1) * kRoundCalls - 1;
    s.drift_gap = uint16_t(s.drift_gap * 2 < kRoundCalls / 2 ? s.drift_gap * 2 : kRoundCalls / 2);
}

void ShmCopyChooser::note_agreed(size_t bytes, int variant, ShmCopy agreed) {
    Shape& s = shape(bytes, variant);
    if (s.calls % kRoundCalls >= trial_calls(s.candidates)) s.agreed = int8_t(agreed);
}

ShmCopy ShmCopyChooser::agreed_or(size_t bytes, int variant, ShmCopy otherwise) {
    const Shape& s = shape(bytes, variant);
    return s.agreed >= 0 ? ShmCopy(s.agreed) : otherwise;
}

std::string ShmCopyChooser::describe(size_t bytes, int variant) {
    Shape& s = shape(bytes, variant);
    std::string out = choice_name(choice_index(propose(bytes, variant, s.candidates)));
    char buf[64];
    const char* sep = " (";
    for (int c = 0; c < kChoices; ++c) {
        if (!(s.candidates >> c & 1)) continue;
        snprintf(buf, sizeof buf, "%s%s %.2f ms", sep, choice_name(c), s.best[c] * 1e3);
        out += buf;
        sep = ", ";
    }
    return out + ")";
}

}  // namespace nexar
