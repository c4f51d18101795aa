// A ControlServer of a test's own (its own limits and handler) in a forked
// child, for tests of the socket layer without a whole agent.
#pragma once

#include <sys/types.h>

#include <string>

#include "nodeagent/control_server.h"

namespace egpu::test {

// The child's pid once it listens at `path`; -1 if it could not listen (the
// child is then reaped). The caller kills and reaps it.
pid_t start_control_server(const std::string& path, const agent::ControlLimits& limits,
                           agent::ControlServer::Handler handler);

}  // namespace egpu::test
