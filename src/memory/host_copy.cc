#include "memory/host_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace nexar {

void copy_streaming(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    // Up to the destination's first 64-byte line with plain stores.
    size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
    if (head > bytes) head = bytes;
    memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    // Whole lines: four 16-byte streaming stores each (SSE2, every x86-64).
    for (; bytes >= 64; d += 64, s += 64, bytes -= 64) {
        __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
        __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
        __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
        __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
        _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    }
    memcpy(d, s, bytes);
    // Streaming stores are weakly ordered: fence them before whatever says
    // the bytes are there.
    _mm_sfence();
#else
    memcpy(dst, src, bytes);
#endif
}

void copy_twice(void* cached, void* result, const void* src, size_t bytes, bool streaming) {
#if defined(__x86_64__)
    char* c = static_cast<char*>(cached);
    char* d = static_cast<char*>(result);
    const char* s = static_cast<const char*>(src);
    // As copy_streaming: up to the result's first 64-byte line, then whole
    // lines, then the tail.
    size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
    if (head > bytes) head = bytes;
    memcpy(c, s, head);
    memcpy(d, s, head);
    c += head, d += head, s += head, bytes -= head;
    for (; bytes >= 64; c += 64, d += 64, s += 64, bytes -= 64) {
        __m128i v[4];
        for (int i = 0; i < 4; ++i) v[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * i));
        for (int i = 0; i < 4; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(c + 16 * i), v[i]);
        if (streaming)
            for (int i = 0; i < 4; ++i) _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16 * i), v[i]);
        else
            for (int i = 0; i < 4; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16 * i), v[i]);
    }
    memcpy(c, s, bytes);
    memcpy(d, s, bytes);
    if (streaming) _mm_sfence();
#else
    memcpy(cached, src, bytes);
    memcpy(result, src, bytes);
    (void)streaming;
#endif
}

void copy_result(void* dst, const void* src, size_t bytes, bool streaming) {
    if (streaming)
        copy_streaming(dst, src, bytes);
    else
        memcpy(dst, src, bytes);
}

}  // namespace nexar
