// Whether an agent of this build can take over the GPU pages a running agent
// wrote in its runtime directory (and so the running steps' instances). An
// upgrade that changes the page layout cannot: the package's postinst asks
// `egpu-agentd --check-pages` before it restarts a running agent, and leaves
// it running when the answer is no (packaging/egpu.postinst).
#pragma once

#include <string>

#include "core/util/result.h"

namespace egpu::shm {

// OK when every GPU page in `runtime_dir` (gpu0..gpu63) is absent or of this
// build's layout; else an error naming each page that is not and why.
Status check_page_takeover(const std::string& runtime_dir);

}  // namespace egpu::shm
