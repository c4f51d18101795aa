#include "core/model/slurm_listing.h"

#include <algorithm>
#include <cctype>

namespace egpu::model {
namespace {

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ')
      line.remove_prefix(1);
    if (!line.empty()) lines.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> fields;
  for (;;) {
    const size_t bar = line.find('|');
    fields.push_back(line.substr(0, bar));
    if (bar == std::string_view::npos) return fields;
    line.remove_prefix(bar + 1);
  }
}

// Host lists are names, brackets, digits, commas and dashes.
bool is_host_list(std::string_view list) {
  return !list.empty() && std::all_of(list.begin(), list.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
           c == '[' || c == ']' || c == ',';
  });
}

std::string quoted(std::string_view line) {
  return "'" + std::string(line.substr(0, 120)) + (line.size() > 120 ? "...'" : "'");
}

}  // namespace

bool is_plain_name(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name.front() != '-' &&
         std::all_of(name.begin(), name.end(), [](char c) {
           // '@': user names of directory-backed sites (alice@example.org).
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
                  c == '@';
         });
}

Result<JobPlacement> parse_job_listing(std::string_view text, uint64_t job) {
  const auto lines = lines_of(text);
  const std::string name = "job " + std::to_string(job);
  if (lines.empty()) return Error{name + " is not known to Slurm (ended, or never submitted)"};
  // Several lines: the components of a heterogeneous job, or the tasks of an
  // array; one owner, their nodes together.
  JobPlacement p;
  for (auto line : lines) {
    const auto f = fields_of(line);
    if (f.size() != 3 || f[0].empty() || !is_plain_name(f[1])) {
      return Error{"squeue's line for " + name + " is not STATE|USER|NODES: " + quoted(line)};
    }
    if (!p.user.empty() && p.user != f[1]) {
      return Error{"squeue lists " + name + " for two users: " + p.user + " and " +
                   std::string(f[1])};
    }
    const std::string state(f[0]);
    if (state != "RUNNING" && state != "COMPLETING" && state != "SUSPENDED") {
      if (lines.size() == 1) return Error{name + " is " + state + ", not running"};
      continue;  // a component or task that does not run (yet)
    }
    if (!is_host_list(f[2])) {
      return Error{"squeue gives " + name + " no usable node list: " + quoted(line)};
    }
    if (p.state.empty()) p.state = state;
    p.user = std::string(f[1]);
    p.nodelist += (p.nodelist.empty() ? "" : ",") + std::string(f[2]);
  }
  if (p.nodelist.empty()) return Error{name + " has nothing running"};
  return p;
}

Result<std::vector<StepPlacement>> parse_step_listing(std::string_view text, uint64_t job) {
  std::vector<StepPlacement> steps;
  const std::string id = std::to_string(job);
  for (auto line : lines_of(text)) {
    // JOB.STEP, or ARRAYJOB_TASK.STEP for a task of an array and
    // JOB+COMPONENT.STEP for a heterogeneous job (squeue's own forms). A
    // line of any other shape names no step of this job: it is left out, and
    // asking for a step it might have been says the step is not running.
    const auto f = fields_of(line);
    if (f.size() != 2 || !is_host_list(f[1])) continue;
    const size_t dot = f[0].rfind('.');
    if (dot == std::string_view::npos) continue;
    const std::string_view owner = f[0].substr(0, dot);
    const std::string_view step = f[0].substr(dot + 1);
    const bool array_or_het = !owner.empty() &&
                              std::isdigit(static_cast<unsigned char>(owner.front())) &&
                              owner.find_first_not_of("0123456789_+") == std::string_view::npos &&
                              owner.find_first_of("_+") != std::string_view::npos;
    if ((owner != id && !array_or_het) || !is_plain_name(step)) continue;
    steps.push_back({std::string(step), std::string(f[1])});
  }
  return steps;
}

Result<std::string> step_nodelist(const std::vector<StepPlacement>& steps, uint64_t job,
                                  const std::string& step) {
  std::string running;
  for (const auto& s : steps) {
    if (s.step == step) return s.nodelist;
    running += (running.empty() ? "" : ", ") + std::to_string(job) + "." + s.step;
  }
  return Error{"step " + std::to_string(job) + "." + step + " is not running" +
               (running.empty() ? " (the job runs no steps)" : " (running: " + running + ")")};
}

Result<std::vector<std::string>> parse_hostnames(std::string_view text) {
  std::vector<std::string> names;
  for (auto line : lines_of(text)) {
    if (!is_plain_name(line))
      return Error{"scontrol gave a node name that is not one: " + quoted(line)};
    names.emplace_back(line);
  }
  if (names.empty()) return Error{"scontrol expanded the node list to no nodes"};
  return names;
}

}  // namespace egpu::model
