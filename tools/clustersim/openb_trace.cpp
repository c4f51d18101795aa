#include "tools/clustersim/openb_trace.h"

#include <charconv>
#include <limits>

#include "tools/clustersim/csv_table.h"

namespace egpu::clustersim {
namespace {

// Reads columns of one table by name, remembering the first problem.
class RowReader {
 public:
  explicit RowReader(const CsvTable& table) : table_(table) {}

  std::size_t require(const std::string& name) {
    const auto column = table_.column(name);
    if (!column && error_.empty())
      error_ = table_.path + ": no column '" + name + "' in the header";
    return column.value_or(0);
  }

  template <typename T>
  T number(std::size_t row, std::size_t column, bool empty_is_zero = false) {
    const std::string& text = table_.rows[row][column];
    T value{};
    if (text.empty() && empty_is_zero) return value;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if ((ec != std::errc{} || end != text.data() + text.size()) && error_.empty()) {
      error_ = table_.where(row) + ": column '" + table_.header[column] + "' is '" + text +
               "', not a whole number" + (std::numeric_limits<T>::is_signed ? "" : " >= 0");
    }
    return value;
  }

  void fail(std::size_t row, const std::string& why) {
    if (error_.empty()) error_ = table_.where(row) + ": " + why;
  }
  const std::string& error() const { return error_; }

 private:
  const CsvTable& table_;
  std::string error_;
};

std::vector<std::string> split_models(const std::string& spec) {
  std::vector<std::string> models;
  std::size_t start = 0;
  while (start <= spec.size() && !spec.empty()) {
    const std::size_t bar = spec.find('|', start);
    const std::size_t end = bar == std::string::npos ? spec.size() : bar;
    if (end > start) models.push_back(spec.substr(start, end - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return models;
}

Result<std::vector<NodeSpec>> nodes_from(const Result<CsvTable>& table) {
  if (!table) return Error{table.error()};
  const std::string& path = table->path;
  RowReader reader(*table);
  const std::size_t name = reader.require("sn"), cpu = reader.require("cpu_milli"),
                    memory = reader.require("memory_mib"), gpus = reader.require("gpu"),
                    model = reader.require("model");
  if (!reader.error().empty()) return Error{reader.error()};
  std::vector<NodeSpec> nodes;
  nodes.reserve(table->rows.size());
  for (std::size_t row = 0; row < table->rows.size(); ++row) {
    NodeSpec node;
    node.name = table->rows[row][name];
    node.cpu_milli = reader.number<uint32_t>(row, cpu);
    node.memory_mib = reader.number<uint64_t>(row, memory);
    node.gpus = reader.number<uint32_t>(row, gpus);
    node.model = table->rows[row][model];
    if (node.gpus > 64) reader.fail(row, "a node with " + std::to_string(node.gpus) + " GPUs");
    if (node.cpu_milli == 0) reader.fail(row, "a node with no CPUs");
    if (!reader.error().empty()) return Error{reader.error()};
    nodes.push_back(std::move(node));
  }
  if (nodes.empty()) return Error{path + ": no nodes"};
  return nodes;
}

Result<std::vector<TaskSpec>> tasks_from(const Result<CsvTable>& table) {
  if (!table) return Error{table.error()};
  const std::string& path = table->path;
  RowReader reader(*table);
  const std::size_t name = reader.require("name"), cpu = reader.require("cpu_milli"),
                    memory = reader.require("memory_mib"), gpus = reader.require("num_gpu"),
                    milli = reader.require("gpu_milli"), spec = reader.require("gpu_spec"),
                    qos = reader.require("qos"), created = reader.require("creation_time");
  if (!reader.error().empty()) return Error{reader.error()};
  std::vector<TaskSpec> tasks;
  tasks.reserve(table->rows.size());
  for (std::size_t row = 0; row < table->rows.size(); ++row) {
    const auto& fields = table->rows[row];
    TaskSpec task;
    task.name = fields[name];
    task.cpu_milli = reader.number<uint32_t>(row, cpu);
    task.memory_mib = reader.number<uint64_t>(row, memory);
    task.gpus = reader.number<uint32_t>(row, gpus);
    task.gpu_milli = reader.number<uint32_t>(row, milli, /*empty_is_zero=*/true);
    task.gpu_models = split_models(fields[spec]);
    task.qos = fields[qos] == "LS"   ? Qos::kLatencySensitive
               : fields[qos] == "BE" ? Qos::kBestEffort
                                     : Qos::kOther;
    task.creation_s = reader.number<int64_t>(row, created, /*empty_is_zero=*/true);
    if (task.gpus == 0) task.gpu_milli = 0;
    if (task.gpus > 0 && (task.gpu_milli == 0 || task.gpu_milli > 1000)) {
      reader.fail(row, "gpu_milli " + std::to_string(task.gpu_milli) + " is not in 1..1000");
    } else if (task.gpus > 1 && task.gpu_milli != 1000) {
      reader.fail(row, std::to_string(task.gpus) + " GPUs of " + std::to_string(task.gpu_milli) +
                           " milli each: several GPUs must be whole ones");
    } else if (task.gpus > 64) {
      reader.fail(row, std::to_string(task.gpus) + " GPUs for one task");
    }
    if (!reader.error().empty()) return Error{reader.error()};
    tasks.push_back(std::move(task));
  }
  if (tasks.empty()) return Error{path + ": no tasks"};
  return tasks;
}

}  // namespace

Result<std::vector<NodeSpec>> load_openb_nodes(const std::string& path) {
  return nodes_from(read_csv(path));
}

Result<std::vector<NodeSpec>> parse_openb_nodes(std::string_view text, const std::string& name) {
  return nodes_from(parse_csv(text, name));
}

Result<std::vector<TaskSpec>> load_openb_tasks(const std::string& path) {
  return tasks_from(read_csv(path));
}

Result<std::vector<TaskSpec>> parse_openb_tasks(std::string_view text, const std::string& name) {
  return tasks_from(parse_csv(text, name));
}

}  // namespace egpu::clustersim
