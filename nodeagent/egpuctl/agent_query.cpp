#include "nodeagent/egpuctl/agent_query.h"

#include <charconv>

namespace egpu::ctl {

bool parse_u64(std::string_view s, uint64_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

Result<protocol::Reply> call_agent(const std::string& socket, const protocol::Request& request) {
  // Connect, request and reply (every chunk of a status) within one deadline.
  auto client = protocol::ControlClient::connect(
      socket, Deadline::after_ms(protocol::ControlClient::kDefaultTimeoutMs));
  if (!client) return Error{client.error()};
  return client->call(request);
}

Result<std::string> call_for_text(const std::string& socket, const protocol::Request& request) {
  auto r = call_agent(socket, request);
  if (!r) return Error{r.error()};
  if (r->status != protocol::ReplyStatus::kOk) {
    return Error{std::string(protocol::to_string(r->status)) + ": " + r->text};
  }
  return r->text;
}

Result<nlohmann::json> fetch_status(const std::string& socket) {
  auto text = call_for_text(socket, protocol::StatusRequest{0, 0});
  if (!text) return Error{text.error()};
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Error{"the agent sent a status that is not JSON"};
  return j;
}

Result<Selector> parse_selector(const std::string& text) {
  Selector s;
  // parse_u64 may write a partial number: parse into a temporary.
  if (uint64_t id = 0; parse_u64(text, id)) {
    if (id == 0) return Error{"'" + text + "' is not an instance id (ids start at 1)"};
    s.id = id;
    return s;
  }
  std::string rest = text;
  if (auto at = rest.find('@'); at != std::string::npos) {
    uint64_t gpu = 0;
    if (!parse_u64(std::string_view(rest).substr(at + 1), gpu) || gpu > 63) {
      return Error{"bad GPU in '" + text + "'"};
    }
    s.gpu = static_cast<int>(gpu);
    rest = rest.substr(0, at);
  }
  auto dot = rest.find('.');
  if (dot == std::string::npos || !parse_u64(std::string_view(rest).substr(0, dot), s.job)) {
    return Error{"'" + text + "' is not an instance id, JOB.STEP or JOB.STEP@GPU"};
  }
  s.step = rest.substr(dot + 1);
  uint64_t step_num = 0;
  if (s.step != "batch" && s.step != "interactive" && !parse_u64(s.step, step_num)) {
    return Error{"bad step in '" + text + "' (a number, batch or interactive)"};
  }
  return s;
}

Result<std::vector<nlohmann::json>> resolve(const nlohmann::json& status, const Selector& sel) {
  std::vector<nlohmann::json> found;
  for (const auto& gpu : status.value("gpus", nlohmann::json::array())) {
    for (const auto& inst : gpu.value("instances", nlohmann::json::array())) {
      const bool match = sel.id != 0 ? inst.value("id", uint64_t{0}) == sel.id
                                     : inst.value("job", uint64_t{0}) == sel.job &&
                                           inst.value("step", std::string()) == sel.step &&
                                           (sel.gpu < 0 || inst.value("gpu", -1) == sel.gpu);
      if (match) found.push_back(inst);
    }
  }
  if (found.empty()) {
    return Error{sel.id != 0 ? "no instance " + std::to_string(sel.id) + " that you may see"
                             : "no instance of step " + std::to_string(sel.job) + "." + sel.step +
                                   " that you may see"};
  }
  return found;
}

}  // namespace egpu::ctl
