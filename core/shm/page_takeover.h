// Whether an agent of this build can take over the GPU pages a running agent
// wrote in its runtime directory (and so the running steps' instances). An
// upgrade that changes the page layout cannot: the package's postinst asks
// `egpu-agentd --check-pages` before it restarts a running agent, and leaves
// it running when the answer is no (packaging/egpu.postinst).
#pragma once

#include <cstdint>
#include <string>

#include "core/util/result.h"

namespace egpu::shm {

// OK when the running agent holds no instance (no instance page in
// `runtime_dir`: an idle node restarts whatever its pages), or every GPU page
// (gpu0..gpu63) is absent or one this build, with `max_slots` instances per
// GPU, reuses, with its record page (gpuN.records) beside it; else an error
// naming each page it cannot and why.
Status check_page_takeover(const std::string& runtime_dir, uint32_t max_slots);

}  // namespace egpu::shm
