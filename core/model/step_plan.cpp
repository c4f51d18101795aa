#include "core/model/step_plan.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/config/byte_size.h"
#include "core/env/egpu_env_names.h"

namespace egpu::model {
namespace {

Result<std::vector<uint64_t>> parse_list(const std::string& name, const std::string& text,
                                         uint64_t max) {
  std::vector<uint64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v > max) {
      return Error{name + "='" + text + "' is not a comma list of numbers up to " +
                   std::to_string(max)};
    }
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

}  // namespace

bool is_umbrella_step(uint32_t step_id) {
  return step_id == protocol::kStepBatch || step_id == protocol::kStepInteractive;
}

Result<Mode> parse_mode_option(const std::string& text) {
  auto m = parse_mode(text);
  if (!m) return Error{"--egpu-mode " + m.error()};
  return *m;
}

Result<uint64_t> parse_mem_option(const std::string& text, uint64_t max_bytes) {
  // Slurm's own --mem reads a bare number as megabytes; a quota read as
  // bytes would fail the step's first allocation, far from the cause.
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text.back())) != 0) {
    return Error{"--egpu-mem=" + text + " has no unit: give one, e.g. " + text + "M or " + text +
                 "G (a bare number is not read as megabytes, as --mem does)"};
  }
  auto b = config::parse_byte_size(text);
  if (!b) return Error{"--egpu-mem=" + text + ": " + b.error()};
  if (*b == 0) return Error{"--egpu-mem must be more than 0"};
  if (max_bytes != 0 && *b > max_bytes) {
    return Error{"--egpu-mem=" + text + " is more than a GPU of this cluster has (" +
                 config::format_byte_size(max_bytes) + ")"};
  }
  return *b;
}

Result<std::optional<slo::LatencyObjective>> parse_slo_option(const std::string& text) {
  auto o = slo::parse_objective(text);
  if (!o) return Error{"--egpu-slo=" + text + ": " + o.error()};
  return *o;
}

std::string options_without_egpu(const StepOptions& options) {
  std::string named;
  const auto add = [&](const char* option) {
    named += (named.empty() ? "" : ", ") + std::string(option);
  };
  if (options.mode) add("--egpu-mode");
  if (options.mem_bytes) add("--egpu-mem");
  if (options.objective) add("--egpu-slo");
  if (named.empty()) return named;
  return named + " given to a step without egpu units (--gres=egpu:N): ignored";
}

Status check_step_options(const StepOptions& options, Mode default_mode) {
  if (!options.objective) return {};
  const Mode mode = options.mode.value_or(default_mode);
  if (mode == Mode::kCap) {
    return Error{std::string("--egpu-slo needs burst mode: cap never goes above its share") +
                 (options.mode ? " (drop --egpu-mode=cap)"
                               : " (the site's default is cap: add --egpu-mode=burst)")};
  }
  if (mode == Mode::kLend) {
    return Error{
        "--egpu-slo and --egpu-mode=lend do not go together: a lend step gives share, an "
        "objective borrows it"};
  }
  return {};
}

Result<std::vector<protocol::CreateRequest>> plan_step_instances(const StepEnv& env,
                                                                 const StepIdentity& id,
                                                                 const StepOptions& options,
                                                                 Mode default_mode) {
  std::vector<protocol::CreateRequest> out;
  if (env.units.empty() && env.gpu_indices.empty()) return out;  // no egpu in this step
  if (Status ok = check_step_options(options, default_mode); !ok) return Error{ok.error()};
  auto gpus = parse_list(EGPU_ENV_GPU_INDICES, env.gpu_indices, protocol::kMaxGpus - 1);
  if (!gpus) return Error{gpus.error()};
  auto units = parse_list(EGPU_ENV_UNITS, env.units, protocol::kUnitsPerGpu);
  if (!units) return Error{units.error()};
  std::vector<uint64_t> quotas(gpus->size(), 0);
  if (!env.mem_quota.empty()) {
    auto q = parse_list(EGPU_ENV_MEM_QUOTA, env.mem_quota, UINT64_MAX);
    if (!q) return Error{q.error()};
    quotas = *q;
  }
  std::vector<uint64_t> job_units(gpus->size(), 0);
  if (!env.job_units.empty()) {
    auto j = parse_list(EGPU_ENV_JOB_UNITS, env.job_units, protocol::kUnitsPerGpu);
    if (!j) return Error{j.error()};
    job_units = *j;
  }
  if (job_units.size() != gpus->size()) {
    return Error{EGPU_ENV_JOB_UNITS " lists " + std::to_string(job_units.size()) +
                 " GPUs, " EGPU_ENV_GPU_INDICES " " + std::to_string(gpus->size()) + " ('" +
                 env.job_units + "', '" + env.gpu_indices + "')"};
  }
  if (units->size() != gpus->size() || quotas.size() != gpus->size()) {
    return Error{EGPU_ENV_GPU_INDICES ", " EGPU_ENV_UNITS " and " EGPU_ENV_MEM_QUOTA
                                      " list different numbers of GPUs ('" +
                 env.gpu_indices + "', '" + env.units + "', '" + env.mem_quota + "')"};
  }
  const Mode mode = options.mode.value_or(default_mode);
  for (size_t i = 0; i < gpus->size(); ++i) {
    if ((*units)[i] == 0) continue;  // a GPU listed with nothing of ours on it
    uint64_t quota = 0;              // 0: the agent derives it from the units
    if (options.mem_bytes) {
      if (quotas[i] != 0 && *options.mem_bytes > quotas[i]) {
        return Error{"--egpu-mem=" + config::format_byte_size(*options.mem_bytes) +
                     " is more than this step's share of GPU " + std::to_string((*gpus)[i]) + " (" +
                     config::format_byte_size(quotas[i]) + " for " + std::to_string((*units)[i]) +
                     " units)"};
      }
      quota = *options.mem_bytes;
    }
    protocol::CreateRequest r{};
    r.job_id = id.job_id;
    r.step_id = id.step_id;
    r.gpu_index = static_cast<uint32_t>((*gpus)[i]);
    r.uid = id.uid;
    r.gid = id.gid;
    r.units = static_cast<uint32_t>((*units)[i]);
    // Slurm's figure for the job when slurmstepd knew it; a step never holds
    // less than its own units.
    r.job_units = std::max(r.units, static_cast<uint32_t>(job_units[i]));
    r.mem_quota = quota;
    r.mode = mode_value(mode);
    // slurmstepd asks: the step's instances end with it (see the flag).
    r.flags = (is_umbrella_step(id.step_id) ? protocol::kCreateUmbrella : 0) |
              protocol::kCreateEndsWithCaller |
              (id.spans_nodes && !is_umbrella_step(id.step_id) ? protocol::kCreateSpansNodes : 0);
    out.push_back(r);
  }
  return out;
}

}  // namespace egpu::model
