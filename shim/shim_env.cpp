#include "shim/shim_env.h"

#include <charconv>
#include <cstring>
#include <string_view>

#include "core/env/egpu_env_names.h"
#include "core/protocol/messages.h"

namespace egpu::shim {
namespace {

template <typename T>
bool parse_number(std::string_view text, T* out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool parse_indices(std::string_view text, std::vector<uint32_t>* out) {
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    uint32_t index = 0;
    if (!parse_number(item, &index) || index >= protocol::kMaxGpus) return false;
    out->push_back(index);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (text.empty()) return false;  // trailing comma
  }
  return !out->empty();
}

}  // namespace

ShimEnv parse_shim_env(const char* (*get)(const char*)) {
  ShimEnv env;
  const char* debug = get(EGPU_ENV_DEBUG);
  env.debug = debug != nullptr && debug[0] != '\0' && std::strcmp(debug, "0") != 0;
  const char* job = get(EGPU_ENV_JOB_ID);
  if (job == nullptr || job[0] == '\0') return env;
  env.managed = true;
  if (const char* socket = get(EGPU_ENV_SOCKET); socket != nullptr && socket[0] != '\0') {
    env.socket_path = socket;
  }
  if (const char* mode = get(EGPU_ENV_FAIL_MODE); mode != nullptr && mode[0] != '\0') {
    if (std::strcmp(mode, to_string(FailMode::kOpen)) == 0) {
      env.fail_mode = FailMode::kOpen;
    } else if (std::strcmp(mode, to_string(FailMode::kClosed)) == 0) {
      env.fail_mode = FailMode::kClosed;
    } else {
      env.warning =
          std::string(EGPU_ENV_FAIL_MODE "='") + mode + "' is not open or closed: ignored";
    }
  }
  if (!parse_number(std::string_view(job), &env.job_id) || env.job_id == 0) {
    env.problem = std::string(EGPU_ENV_JOB_ID "='") + job + "' is not a job id";
    return env;
  }
  const char* step = get(EGPU_ENV_STEP_ID);
  if (step == nullptr || !parse_number(std::string_view(step), &env.step_id)) {
    env.problem = std::string(EGPU_ENV_STEP_ID "='") + (step ? step : "") + "' is not a step id";
    return env;
  }
  const char* indices = get(EGPU_ENV_GPU_INDICES);
  if (indices == nullptr || !parse_indices(indices, &env.gpu_indices)) {
    env.problem = std::string(EGPU_ENV_GPU_INDICES "='") + (indices ? indices : "") +
                  "' is not a comma list of GPU indices";
    env.gpu_indices.clear();
  }
  return env;
}

}  // namespace egpu::shim
