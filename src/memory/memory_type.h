// Where a buffer lives.  The ring needs to know because host and device
// memory take different copy and reduce paths.
#pragma once

namespace nexar {

enum class MemoryType { host, device };

// This build knows host memory only: every pointer is classified as host.
// Device detection (cuPointerGetAttributes, loaded only where a CUDA driver
// exists) plugs in here with the CUDA milestone; until then device buffers
// must not be sent to the ring, which is why host buffers need the explicit
// NEXAR_HOST_BUFFERS=1.
MemoryType detect_memory_type(const void* ptr);

}  // namespace nexar
