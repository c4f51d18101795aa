#include <getopt.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

#include "core/config/byte_size.h"
#include "core/util/mode.h"
#include "nodeagent/egpuctl/agent_query.h"
#include "nodeagent/egpuctl/commands.h"
#include "nodeagent/egpuctl/removal_table.h"

namespace egpu::ctl {
namespace {

using nlohmann::json;

Result<uint64_t> number(const std::string& name, const std::string& text, uint64_t max) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty() || v > max) {
    return Error{"--" + name + " wants a number up to " + std::to_string(max) + ", got '" + text +
                 "'"};
  }
  return v;
}

Result<uint32_t> step_number(const std::string& text) {
  if (text == "batch") return protocol::kStepBatch;
  if (text == "interactive") return protocol::kStepInteractive;
  auto n = number("step", text, 0xfffffff0u);
  if (!n) return Error{n.error() + " (or batch, interactive)"};
  return static_cast<uint32_t>(*n);
}

// Parses `--name value` pairs; flags listed in `switches` take no value.
Result<std::map<std::string, std::string>> options(const std::vector<std::string>& args,
                                                   const std::vector<std::string>& known,
                                                   const std::vector<std::string>& switches) {
  std::map<std::string, std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--", 0) != 0) return Error{"unexpected argument '" + args[i] + "'"};
    const std::string name = args[i].substr(2);
    if (std::find(switches.begin(), switches.end(), name) != switches.end()) {
      out[name] = "1";
      continue;
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Error{"unknown option '" + args[i] + "'"};
    }
    if (i + 1 >= args.size()) return Error{"option '" + args[i] + "' needs a value"};
    out[name] = args[++i];
  }
  return out;
}

}  // namespace

int cmd_create(const Globals& g, const std::vector<std::string>& args) {
  auto o = options(args, {"job", "step", "gpu", "units", "job-units", "uid", "gid", "mode", "mem"},
                   {"umbrella"});
  if (!o) return fail(o.error(), 2);
  for (const char* req : {"job", "step", "gpu", "units"}) {
    if (!o->contains(req)) return fail(std::string("create needs --") + req, 2);
  }
  protocol::CreateRequest r{};
  auto job = number("job", (*o)["job"], UINT64_MAX);
  auto step = step_number((*o)["step"]);
  auto gpu = number("gpu", (*o)["gpu"], 63);
  auto units = number("units", (*o)["units"], 100);
  if (!job) return fail(job.error(), 2);
  if (!step) return fail(step.error(), 2);
  if (!gpu) return fail(gpu.error(), 2);
  if (!units) return fail(units.error(), 2);
  r.job_id = *job;
  r.step_id = *step;
  r.gpu_index = static_cast<uint32_t>(*gpu);
  r.units = static_cast<uint32_t>(*units);
  r.job_units = r.units;
  if (o->contains("job-units")) {
    auto ju = number("job-units", (*o)["job-units"], 100);
    if (!ju) return fail(ju.error(), 2);
    r.job_units = static_cast<uint32_t>(*ju);
  }
  r.uid = getuid();
  r.gid = getgid();
  if (o->contains("uid")) {
    auto v = number("uid", (*o)["uid"], UINT32_MAX);
    if (!v) return fail(v.error(), 2);
    r.uid = static_cast<uint32_t>(*v);
  }
  if (o->contains("gid")) {
    auto v = number("gid", (*o)["gid"], UINT32_MAX);
    if (!v) return fail(v.error(), 2);
    r.gid = static_cast<uint32_t>(*v);
  }
  if (o->contains("mode")) {
    auto m = parse_mode((*o)["mode"]);
    if (!m) return fail("--mode " + m.error(), 2);
    r.mode = mode_value(*m);
  }
  if (o->contains("mem")) {
    auto m = config::parse_byte_size((*o)["mem"]);
    if (!m) return fail("--mem: " + m.error(), 2);
    r.mem_quota = *m;
  }
  if (o->contains("umbrella")) r.flags |= protocol::kCreateUmbrella;
  auto reply = call_agent(g.socket_path, r);
  if (!reply) return fail(reply.error());
  if (reply->status != protocol::ReplyStatus::kOk) {
    return fail(std::string(protocol::to_string(reply->status)) + ": " + reply->text);
  }
  std::printf("%llu\n", static_cast<unsigned long long>(reply->instance_id));
  return 0;
}

int cmd_remove(const Globals& g, const std::vector<std::string>& args) {
  auto o = options(args, {"job", "step"}, {});
  if (!o) return fail(o.error(), 2);
  if (!o->contains("job")) return fail("remove needs --job", 2);
  auto job = number("job", (*o)["job"], UINT64_MAX);
  if (!job) return fail(job.error(), 2);
  protocol::RemoveRequest r{*job, protocol::kAllSteps, 0};
  if (o->contains("step")) {
    auto step = step_number((*o)["step"]);
    if (!step) return fail(step.error(), 2);
    r.step_id = *step;
  }
  auto text = call_for_text(g.socket_path, r);
  if (!text) return fail(text.error());
  if (g.json) {
    std::printf("%s\n", text->c_str());
    return 0;
  }
  auto table = removal_table(*text);
  if (!table) return fail(table.error());
  std::fputs(table->c_str(), stdout);
  return 0;
}

}  // namespace egpu::ctl
