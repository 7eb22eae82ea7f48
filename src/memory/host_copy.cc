#include "memory/host_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace nexar {

namespace {

#if defined(__x86_64__)
inline void store_line(char* d, __m128i a, __m128i b, __m128i c, __m128i e, bool streaming) {
    if (streaming) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d), a);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16), b);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 32), c);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
}
#endif

// Copies src into `result` (streaming stores when kStreaming) and, when
// kTwice, into `cached` too with plain stores, loading each byte once.
// Templates, so that each loop has no branch in it.
template <bool kTwice, bool kStreaming>
void copy_lines(char* cached, char* result, const char* src, size_t bytes) {
#if defined(__x86_64__)
    // Up to the result's first 64-byte line with plain stores.
    size_t head = (64 - (reinterpret_cast<uintptr_t>(result) & 63)) & 63;
    if (head > bytes) head = bytes;
    if (kTwice) memcpy(cached, src, head), cached += head;
    memcpy(result, src, head);
    result += head, src += head, bytes -= head;
    // Whole lines: four 16-byte loads, four stores to each destination
    // (SSE2, every x86-64).
    for (; bytes >= 64; result += 64, src += 64, bytes -= 64) {
        __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
        __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
        __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
        __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
        if (kTwice) store_line(cached, a, b, c, e, false), cached += 64;
        store_line(result, a, b, c, e, kStreaming);
    }
    if (kTwice) memcpy(cached, src, bytes);
    memcpy(result, src, bytes);
    // Streaming stores are weakly ordered: fence them before whatever says
    // the bytes are there.
    if (kStreaming) _mm_sfence();
#else
    if (kTwice) memcpy(cached, src, bytes);
    memcpy(result, src, bytes);
#endif
}

}  // namespace

void copy_streaming(void* dst, const void* src, size_t bytes) {
    copy_lines<false, true>(nullptr, static_cast<char*>(dst), static_cast<const char*>(src), bytes);
}

void copy_twice(void* cached, void* result, const void* src, size_t bytes, bool streaming) {
    char* c = static_cast<char*>(cached);
    char* r = static_cast<char*>(result);
    const char* s = static_cast<const char*>(src);
    if (streaming)
        copy_lines<true, true>(c, r, s, bytes);
    else
        copy_lines<true, false>(c, r, s, bytes);
}

void copy_result(void* dst, const void* src, size_t bytes, bool streaming) {
    if (streaming)
        copy_streaming(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

}  // namespace nexar
