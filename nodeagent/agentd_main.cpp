// egpu-agentd: the egpu node agent.
#include <getopt.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "core/config/egpu_config.h"
#include "core/env/egpu_env_names.h"
#include "core/shm/page_takeover.h"
#include "core/util/log.h"
#include "core/util/trusted_paths.h"
#include "nodeagent/agent.h"

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: egpu-agentd [-f CONFIG] [--check | --check-pages]\n"
               "  -f, --config FILE   configuration (default " EGPU_CONF_DEFAULT_PATH
               "; a missing\n"
               "                      default file means built-in defaults)\n"
               "  --check             validate the configuration and exit\n"
               "  --check-pages       exit 0 when this agent can take over the instances a\n"
               "                      running agent holds (its pages in RuntimeDir), 3 when\n"
               "                      not (another page layout: restart once they ended),\n"
               "                      2 when --check fails (it would not start)\n"
               "  -v, --verbose       debug logging\n"
               "  -h, --help          this text\n");
}

// A metrics port any user may bind (a note, not a failure: a site may
// accept it). Such a user's process could take the port while the agent is
// down and answer the scraper with its own figures.
void warn_unprivileged_metrics_port(const egpu::config::EgpuConfig& config,
                                    const std::string& path) {
  if (config.metrics_address.empty()) return;
  int first_unprivileged = 1024;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_unprivileged_port_start", "re")) {
    if (std::fscanf(f, "%d", &first_unprivileged) != 1) first_unprivileged = 1024;
    std::fclose(f);
  }
  if (config.metrics_port() < first_unprivileged) return;
  std::fprintf(stderr,
               "egpu-agentd: %s: note: MetricsAddress port %d is one any local user can bind "
               "while the agent is down (unprivileged ports start at %d here); the agent then "
               "runs without metrics until the port is free, and the scraper reads whatever "
               "holds it\n",
               path.c_str(), config.metrics_port(), first_unprivileged);
}

// What the file cannot say alone: the group must exist on this node, and
// the directories the agent creates in be root's alone (as far as they
// exist: systemd makes RuntimeDir before --check runs). 0, or 2 having said
// why.
int check_node(const egpu::config::EgpuConfig& config, const std::string& path) {
  if (auto gid = egpu::agent::Agent::monitor_gid(config); !gid) {
    std::fprintf(stderr, "egpu-agentd: %s: %s\n", path.c_str(), gid.error().c_str());
    return 2;
  }
  for (std::string dir :
       {config.socket_path.substr(0, config.socket_path.rfind('/')), config.runtime_dir}) {
    while (dir.size() > 1 && access(dir.c_str(), F_OK) != 0)
      dir = dir.substr(0, dir.rfind('/'));
    if (dir.empty()) dir = "/";
    if (egpu::Status s = egpu::check_trusted_directory(dir, geteuid()); !s) {
      std::fprintf(stderr, "egpu-agentd: %s: %s\n", path.c_str(), s.error().c_str());
      return 2;
    }
  }
  warn_unprivileged_metrics_port(config, path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = EGPU_CONF_DEFAULT_PATH;
  bool explicit_path = false;
  bool check_only = false;
  bool check_pages = false;
  bool verbose = false;
  static const option kOptions[] = {
      {"config", required_argument, nullptr, 'f'}, {"check", no_argument, nullptr, 'c'},
      {"check-pages", no_argument, nullptr, 'p'},  {"verbose", no_argument, nullptr, 'v'},
      {"help", no_argument, nullptr, 'h'},         {nullptr, 0, nullptr, 0}};
  int opt;
  while ((opt = getopt_long(argc, argv, "f:vh", kOptions, nullptr)) != -1) {
    switch (opt) {
      case 'f':
        path = optarg;
        explicit_path = true;
        break;
      case 'c':
        check_only = true;
        break;
      case 'p':
        check_pages = true;
        break;
      case 'v':
        verbose = true;
        break;
      case 'h':
        usage(stdout);
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind != argc) {
    std::fprintf(stderr, "egpu-agentd: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  egpu::config::EgpuConfig config;
  const bool from_file = explicit_path || access(path.c_str(), F_OK) == 0;
  if (from_file) {
    auto loaded = egpu::config::load_egpu_config(path);
    if (!loaded) {
      std::fprintf(stderr, "egpu-agentd: %s\n", loaded.error().c_str());
      return 2;
    }
    config = *loaded;
  }
  if (check_only || check_pages) {
    // --check-pages answers "may the running agent be replaced by this
    // one?": not when this one would not start (2) either.
    if (const int rc = check_node(config, path); rc != 0) return rc;
  }
  if (check_only) {
    if (from_file) {
      std::printf("%s: ok\n", path.c_str());
    } else {
      std::printf("no %s: the built-in defaults are ok\n", path.c_str());
    }
    return 0;
  }
  if (check_pages) {
    if (egpu::Status s = egpu::shm::check_page_takeover(
            config.runtime_dir, static_cast<uint32_t>(config.max_instances_per_gpu));
        !s) {
      std::fprintf(stderr, "egpu-agentd: cannot take over the running agent's instances: %s\n",
                   s.error().c_str());
      return 3;
    }
    std::printf("%s: this agent can take over its pages\n", config.runtime_dir.c_str());
    return 0;
  }
  using egpu::log::Level;
  Level level = verbose ? Level::kDebug : static_cast<Level>(static_cast<int>(config.log_level));
  egpu::log::init("egpu-agentd", config.log_target == egpu::config::LogTarget::kSyslog, level);
  auto agent = egpu::agent::Agent::create(config);
  if (!agent) {
    EGPU_LOG_ERROR("%s", agent.error().c_str());
    return 1;
  }
  return (*agent)->run();
}
