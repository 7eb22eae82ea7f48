// A host-emulated GPU behind the nexar_device_api table: "device" memory is
// host memory the fake remembers, each stream is a worker thread running its
// copies and reductions in order after a random delay, and events complete
// when their stream reaches them.  The ring's device engine runs unchanged
// on it, so CI exercises the staged and direct paths' ordering without a GPU.
#pragma once

#include "memory/device_api.h"

namespace fake_device {

const nexar_device_api* api();
// Operations run so far (copies + reductions), to prove the fake was used.
unsigned long operations();

}  // namespace fake_device
