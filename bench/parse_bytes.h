/* A message size on the benchmarks' command lines. */
#ifndef NEXAR_BENCH_PARSE_BYTES_H
#define NEXAR_BENCH_PARSE_BYTES_H

#include <stdlib.h>
#include <string.h>

/* "8388608", "8M", "8MiB", "512K", "1G": powers of 1024; 0 when malformed.
 * A ':' may follow (MIN:MAX). */
static inline size_t parse_bytes(const char *text) {
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text) return 0;
    switch (*end) {
        case 'K': case 'k': v <<= 10; ++end; break;
        case 'M': case 'm': v <<= 20; ++end; break;
        case 'G': case 'g': v <<= 30; ++end; break;
        default: break;
    }
    if (!strncmp(end, "iB", 2)) end += 2;
    else if (*end == 'B') ++end;
    return *end == '\0' || *end == ':' ? (size_t)v : 0;
}

/* -m's argument, "MIN:MAX" or "MAX" (MIN stays as it was): 0 when either
 * is malformed or 0. */
static inline int parse_range(const char *text, size_t *min, size_t *max) {
    const char *colon = strchr(text, ':');
    if (colon) *min = parse_bytes(text);
    *max = parse_bytes(colon ? colon + 1 : text);
    return *min && *max;
}

#endif
