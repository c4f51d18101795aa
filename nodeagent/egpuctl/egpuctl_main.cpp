// egpuctl: the egpu command line for admins and users.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/protocol/control_client.h"
#include "nodeagent/egpuctl/commands.h"

namespace {

void usage(FILE* out) {
  std::fprintf(
      out,
      "usage: egpuctl [--socket PATH] [--json] [--local] COMMAND [ARGS]\n"
      "commands:\n"
      "  status                          GPUs and your instances (root: all)\n"
      "  status --job JOB                the job's instances on all its nodes, found\n"
      "                                  through Slurm (from any node, e.g. a login node)\n"
      "  show INSTANCE                   one instance in detail, with what it achieved\n"
      "                                  so far (usage: device time, memory peak...)\n"
      "  resize INSTANCE=UNITS[:MODE]... change shares (e.g. 12=30 5.0=70 5.1=burst);\n"
      "                                  shrinks are applied before grows; root adds\n"
      "                                  --force to grow a job past what Slurm granted\n"
      "                                  (on the node, with --local). JOB.STEP acts on\n"
      "                                  every node of the step through Slurm, from any\n"
      "                                  node, all or nothing; an id on this node only\n"
      "  usage JOB                       what each ended step of the job achieved on each\n"
      "                                  GPU (device time, share, memory peak, throttled\n"
      "                                  time), from its AdminComment (sacct or squeue)\n"
      "  slo INSTANCE p99:40ms|off       a latency objective: the instance borrows share\n"
      "                                  from lend instances on its GPU while it is at risk\n"
      "  create --job J --step S --gpu G --units U [--job-units N] [--uid U] [--gid G]\n"
      "         [--mode burst|cap|lend] [--mem SIZE] [--umbrella]      (root)\n"
      "  remove --job J [--step S]                                (root)\n"
      "         prints what each removed instance achieved\n"
      "  topo [--xml FILE] [--gres-conf [--whole-sockets] [--file-pattern P]]\n"
      "                                  the node's GPUs and links; --gres-conf: a\n"
      "                                  gres.conf for it (P: the device files,\n"
      "                                  default /dev/nvidia%%d)\n"
      "INSTANCE is an instance id, or JOB.STEP or JOB.STEP@GPU (STEP: a number,\n"
      "batch or interactive).\n"
      "--local: this node's agent only, never through Slurm (also where Slurm's\n"
      "commands are missing). The socket is $EGPU_SOCKET, else /run/egpu/agent.sock.\n"
      "--json: the agent's answer as JSON. Options may also follow COMMAND.\n"
      "Exit status: 0 done, 1 failed (the message says why), 2 bad usage.\n");
}

}  // namespace

int main(int argc, char** argv) {
  egpu::ctl::Globals g;
  g.socket_path = egpu::protocol::default_socket_path();
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const std::string a = argv[i];
    if (a == "--socket") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "egpuctl: option '--socket' needs a PATH\n");
        return 2;
      }
      g.socket_path = argv[++i];
    } else if (a == "--json") {
      g.json = true;
    } else if (a == "--local") {
      g.local = true;
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "egpuctl: unknown option '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (i >= argc) {
    usage(stderr);
    return 2;
  }
  const std::string cmd = argv[i++];
  std::vector<std::string> args(argv + i, argv + argc);
  // --json, --local and --socket PATH may follow the command too.
  for (auto it = args.begin(); it != args.end();) {
    if (*it == "--json" || *it == "--local") {
      (*it == "--json" ? g.json : g.local) = true;
      it = args.erase(it);
    } else if (*it == "--socket") {
      if (it + 1 == args.end()) {
        std::fprintf(stderr, "egpuctl: option '--socket' needs a PATH\n");
        return 2;
      }
      g.socket_path = *(it + 1);
      it = args.erase(it, it + 2);
    } else {
      ++it;
    }
  }
  // Malformed JSON from an agent or a node (valid, of the wrong shape)
  // throws inside nlohmann::json: a clear error, never an abort.
  try {
    if (cmd == "status") return egpu::ctl::cmd_status(g, args);
    if (cmd == "show") return egpu::ctl::cmd_show(g, args);
    if (cmd == "create") return egpu::ctl::cmd_create(g, args);
    if (cmd == "remove") return egpu::ctl::cmd_remove(g, args);
    if (cmd == "resize") return egpu::ctl::cmd_resize(g, args);
    if (cmd == "slo") return egpu::ctl::cmd_slo(g, args);
    if (cmd == "topo") return egpu::ctl::cmd_topo(g, args);
    if (cmd == "usage") return egpu::ctl::cmd_usage(g, args);
  } catch (const std::exception& e) {
    return egpu::ctl::fail(
        std::string("the agent's answer is not what this egpuctl reads (an agent of another "
                    "version, or not an egpu agent?): ") +
        e.what());
  }
  if (cmd == "help") {
    usage(stdout);
    return 0;
  }
  std::fprintf(stderr, "egpuctl: unknown command '%s'\n", cmd.c_str());
  usage(stderr);
  return 2;
}
