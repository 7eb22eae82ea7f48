// Copies of host memory into a call's results.
//
// A result the ring will not read again (an allgather segment copied out of
// a shared-memory slot at its last step, an allgather's own block copied
// into place) goes to memory with streaming (non-temporal) stores when the
// call is large (NEXAR_STREAM_BYTES).  A plain store first reads each
// destination line into the cache, then writes it back: a third memory
// pass.  Measured on this project's VM (EPYC, 4 KiB pages), 256 KiB pieces
// into a 64 MiB buffer: memcpy 9.8 GB/s from memory and 13.4 from cache,
// streaming 18.7 and 23.5 (docs/tuning.md).
#pragma once

#include <cstddef>

namespace nexar {

// memcpy with streaming stores, fenced (x86-64: sfence): when it returns
// the bytes are ordered before any later store, as a plain memcpy's are,
// so the caller's release store that tells another process they are there
// still orders them.  dst and src must not overlap.  Other CPUs: memcpy.
void copy_streaming(void* dst, const void* src, size_t bytes);

// Copies src both into `cached` (plain stores: a slot the caller reads or
// hands on next) and into `result` (streaming stores when `streaming`,
// fenced as copy_streaming's), reading src once.  No two of the three may
// overlap.
void copy_twice(void* cached, void* result, const void* src, size_t bytes, bool streaming);

// copy_streaming when `streaming`, else memcpy.
void copy_result(void* dst, const void* src, size_t bytes, bool streaming);

}  // namespace nexar
