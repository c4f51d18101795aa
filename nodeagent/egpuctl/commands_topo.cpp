#include <cstdio>

#include "core/topo/topo_report.h"
#include "core/topo/topology.h"
#include "nodeagent/egpuctl/commands.h"

namespace egpu::ctl {

int cmd_topo(const Globals&, const std::vector<std::string>& args) {
  std::string xml;
  bool gres_conf = false;
  topo::GresConfOptions opts;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--xml" && i + 1 < args.size()) {
      xml = args[++i];
    } else if (args[i] == "--gres-conf") {
      gres_conf = true;
    } else if (args[i] == "--whole-sockets") {
      opts.whole_sockets = true;
    } else if (args[i] == "--file-pattern" && i + 1 < args.size()) {
      opts.file_pattern = args[++i];
    } else {
      return fail("topo: unknown or incomplete option '" + args[i] + "'", 2);
    }
  }
  auto log = [](std::string_view line) {
    std::fprintf(stderr, "egpuctl: %.*s\n", static_cast<int>(line.size()), line.data());
  };
  topo::LoadResult loaded;
  if (!xml.empty()) {
    loaded = topo::load_from_xml(xml, topo::XmlOptions{log});
  } else {
    topo::LiveOptions live;
    live.log = log;
    loaded = topo::load_live(live);
  }
  if (!loaded.ok()) return fail(loaded.error);
  if (!gres_conf) {
    std::printf("%s", topo::format_gpu_table(*loaded.topology).c_str());
    return 0;
  }
  auto conf = topo::format_gres_conf(*loaded.topology, opts);
  if (!conf.error.empty()) return fail(conf.error);
  for (const auto& line : conf.lines)
    std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace egpu::ctl
