#include "core/model/gang_offsets_codec.h"

#include <nlohmann/json.hpp>

#include "core/util/json_integer.h"

namespace egpu::model {

using nlohmann::json;

std::string encode_gang_offsets(const GangOffsets& offsets) {
  json gangs = json::array();
  for (const auto& [key, offset] : offsets.offsets)
    gangs.push_back({{"job", key.first}, {"step", key.second}, {"offset_ns", offset}});
  return json{{"version", GangOffsets::kVersion}, {"period_ns", offsets.period}, {"gangs", gangs}}
      .dump();
}

Result<GangOffsets> decode_gang_offsets(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error{"not a JSON object"};
  const auto version = j.find("version");
  if (version == j.end() || json_integer<int64_t>(*version) != GangOffsets::kVersion)
    return Error{"not version " + std::to_string(GangOffsets::kVersion) + " of the format"};
  GangOffsets out;
  const auto period = j.find("period_ns");
  const auto p = period == j.end() ? std::nullopt : json_integer<faa::Nanos>(*period);
  if (!p || *p <= 0) return Error{"period_ns: missing or not a positive integer"};
  out.period = *p;
  const auto gangs = j.find("gangs");
  if (gangs == j.end() || !gangs->is_array()) return Error{"gangs: missing or not an array"};
  if (gangs->size() > GangOffsets::kMaxGangs)
    return Error{"gangs: more than " + std::to_string(GangOffsets::kMaxGangs)};
  for (std::size_t i = 0; i < gangs->size(); ++i) {
    const json& g = (*gangs)[i];
    const std::string at = "gangs[" + std::to_string(i) + "]: ";
    if (!g.is_object()) return Error{at + "not an object"};
    const auto field = [&g](const char* name) {
      const auto it = g.find(name);
      return it == g.end() ? json() : *it;
    };
    const auto job = json_integer<uint64_t>(field("job"));
    const auto step = json_integer<uint32_t>(field("step"));
    const auto offset = json_integer<faa::Nanos>(field("offset_ns"));
    if (!job || *job == 0) return Error{at + "job: missing or not a job id"};
    if (!step) return Error{at + "step: missing or not a step id"};
    if (!offset || *offset < 0 || *offset >= out.period)
      return Error{at + "offset_ns: missing or not in [0, period_ns)"};
    if (!out.offsets.emplace(std::make_pair(*job, *step), *offset).second)
      return Error{at + "job " + std::to_string(*job) + " step " + std::to_string(*step) +
                   " a second time"};
  }
  return out;
}

}  // namespace egpu::model
