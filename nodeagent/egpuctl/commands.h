// egpuctl subcommands. Each takes the arguments after its name and returns
// the process exit code (0 ok, 1 refused/failed, 2 usage error).
#pragma once

#include <string>
#include <vector>

namespace egpu::ctl {

struct Globals {
  std::string socket_path;
  bool json = false;
  bool local = false;  // this node's agent only, never through Slurm
};

int cmd_status(const Globals& g, const std::vector<std::string>& args);
int cmd_show(const Globals& g, const std::vector<std::string>& args);
int cmd_create(const Globals& g, const std::vector<std::string>& args);
int cmd_remove(const Globals& g, const std::vector<std::string>& args);
int cmd_resize(const Globals& g, const std::vector<std::string>& args);
int cmd_slo(const Globals& g, const std::vector<std::string>& args);
int cmd_topo(const Globals& g, const std::vector<std::string>& args);
int cmd_usage(const Globals& g, const std::vector<std::string>& args);

// "error: ..." on stderr; returns the exit code for a refused request.
int fail(const std::string& message, int code = 1);

}  // namespace egpu::ctl
