// Starting the bench's children on a simulated GPU without the shim (the
// baseline of every A/B comparison) and reading their JSON summaries.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "child_process.h"
#include "simgpu_env.h"

namespace egpu::bench {

// `argv` on `gpu` with no shim and no EGPU_* job coordinates, whatever the
// bench's own environment holds.
std::unique_ptr<test_child::ChildProcess> start_unmanaged(const harness::SimGpu& gpu,
                                                          std::vector<std::string> argv,
                                                          const std::string& label = {});

// The JSON summary `child` prints, after waiting up to `timeout` for it to end;
// an empty object (and a message on stderr naming `what`) when it failed.
nlohmann::json wait_summary(test_child::ChildProcess& child, const std::string& what,
                            std::chrono::seconds timeout);

}  // namespace egpu::bench
