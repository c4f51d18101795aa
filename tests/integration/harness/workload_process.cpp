#include "workload_process.h"

#include <stdexcept>

namespace egpu::harness {

std::unique_ptr<test_child::ChildProcess> start_workload(const SimGpu& gpu,
                                                         const WorkloadOptions& options) {
  test_child::ChildOptions child;
  child.argv.push_back(workload_path(options.program));
  child.argv.insert(child.argv.end(), options.args.begin(), options.args.end());
  if (!options.label.empty()) {
    child.argv.push_back("--label");
    child.argv.push_back(options.label);
  }
  child.env = gpu.environment(options.label);
  for (const auto& [name, value] : options.extra_env)
    child.env[name] = value;
  child.stdout_mode = test_child::OutputMode::kCapture;
  child.stderr_mode = options.stderr_mode;
  child.nice = kWorkloadNice;
  return std::make_unique<test_child::ChildProcess>(child);
}

nlohmann::json parse_summary(const std::string& stdout_text) {
  std::size_t end = stdout_text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) throw std::runtime_error("no summary: stdout is empty");
  const std::size_t start = stdout_text.rfind('\n', end);
  const std::string line =
      stdout_text.substr(start == std::string::npos ? 0 : start + 1,
                         end + 1 - (start == std::string::npos ? 0 : start + 1));
  nlohmann::json summary = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!summary.is_object()) {
    throw std::runtime_error("no JSON object on the last line of stdout: '" + line + "'");
  }
  return summary;
}

}  // namespace egpu::harness
