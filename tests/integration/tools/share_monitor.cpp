// egpu-share-monitor: prints, every interval, each workload's share of its
// simulated GPU's device time (from simgpu's ground truth), then the whole-run
// shares; optionally writes them as JSON. Used by scripts/demo.
//
//   egpu-share-monitor --shm NAME [--label L]... [--duration-s 5] [--interval-ms 500]
//                      [--start-timeout-s 10] [--json-out FILE]
#include <getopt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "share_math.h"
#include "share_sampler.h"

namespace {

using egpu::harness::UsageSample;
using std::chrono::milliseconds;

struct MonitorOptions {
  std::string shm;
  std::vector<std::string> labels;  // columns; empty: every label seen
  double duration_s = 5;
  int interval_ms = 500;
  double start_timeout_s = 10;
  std::string json_out;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr,
               "egpu-share-monitor: %s\nusage: egpu-share-monitor --shm NAME [--label L]... "
               "[--duration-s S] [--interval-ms MS] [--start-timeout-s S] [--json-out FILE]\n",
               message.c_str());
  std::exit(2);
}

double number(const char* option, const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || value < 0) {
    usage_error(std::string("--") + option + ": '" + text + "' is not a non-negative number");
  }
  return value;
}

MonitorOptions parse(int argc, char** argv) {
  static const option table[] = {{"shm", required_argument, nullptr, 's'},
                                 {"label", required_argument, nullptr, 'l'},
                                 {"duration-s", required_argument, nullptr, 'd'},
                                 {"interval-ms", required_argument, nullptr, 'i'},
                                 {"start-timeout-s", required_argument, nullptr, 't'},
                                 {"json-out", required_argument, nullptr, 'j'},
                                 {nullptr, 0, nullptr, 0}};
  MonitorOptions options;
  opterr = 0;
  for (int rc; (rc = getopt_long(argc, argv, ":", table, nullptr)) != -1;) {
    switch (rc) {
      case 's':
        options.shm = optarg;
        break;
      case 'l':
        options.labels.emplace_back(optarg);
        break;
      case 'd':
        options.duration_s = number("duration-s", optarg);
        break;
      case 'i':
        options.interval_ms = static_cast<int>(number("interval-ms", optarg));
        break;
      case 't':
        options.start_timeout_s = number("start-timeout-s", optarg);
        break;
      case 'j':
        options.json_out = optarg;
        break;
      case ':':
        usage_error(std::string("option '") + argv[optind - 1] + "' needs a value");
      default:
        usage_error(std::string("unknown option '") + argv[optind - 1] + "'");
    }
  }
  if (optind < argc) usage_error(std::string("unexpected argument '") + argv[optind] + "'");
  if (options.shm.empty()) usage_error("--shm is required");
  if (options.interval_ms < 10) usage_error("--interval-ms must be >= 10");
  return options;
}

// Each label's share of the device it runs on, over the given samples.
std::map<std::string, double> label_shares(const std::vector<UsageSample>& samples) {
  std::set<int> devices;
  for (const UsageSample& sample : samples) {
    for (const auto& context : sample.contexts)
      devices.insert(context.device);
  }
  std::map<std::string, double> shares;
  for (int device : devices) {
    const auto report = egpu::harness::compute_shares(
        samples, device, egpu::harness::GroupBy::kLabel, milliseconds(0));
    for (const auto& [label, share] : report.whole_run)
      shares[label] += share;
  }
  return shares;
}

void print_row(const std::string& first, const std::vector<std::string>& labels,
               const std::map<std::string, double>& shares) {
  std::printf("  %-10s", first.c_str());
  for (const std::string& label : labels) {
    const auto found = shares.find(label);
    std::printf(" %16.1f%%", found == shares.end() ? 0.0 : found->second * 100.0);
  }
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  MonitorOptions options = parse(argc, argv);
  auto source = egpu::harness::simgpu_usage_source(options.shm);

  // Wait for the segment and, when labels are given, for all of them to run.
  const auto start_deadline = std::chrono::steady_clock::now() +
                              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(options.start_timeout_s));
  std::optional<UsageSample> first;
  for (;;) {
    first = source();
    if (first && egpu::harness::labels_busy(options.labels)(*first)) break;
    if (std::chrono::steady_clock::now() >= start_deadline) {
      std::fprintf(stderr, "egpu-share-monitor: %s: the workloads did not start in time\n",
                   options.shm.c_str());
      return 1;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  if (options.labels.empty()) {
    for (const auto& context : first->contexts) {
      if (std::find(options.labels.begin(), options.labels.end(), context.label) ==
          options.labels.end()) {
        options.labels.push_back(context.label);
      }
    }
  }

  std::printf("  %-10s", "time");
  for (const std::string& label : options.labels)
    std::printf(" %17s", label.c_str());
  std::printf("\n");

  nlohmann::json windows = nlohmann::json::array();
  std::vector<UsageSample> all{*first};
  auto next = std::chrono::steady_clock::now();
  const auto end = next + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(options.duration_s));
  while (next + milliseconds(options.interval_ms) <= end + milliseconds(1)) {
    next += milliseconds(options.interval_ms);
    std::this_thread::sleep_until(next);
    std::optional<UsageSample> sample = source();
    if (!sample) continue;
    const auto shares = label_shares({all.back(), *sample});
    all.push_back(*sample);
    const double t = static_cast<double>(all.back().clock_ns - all.front().clock_ns) * 1e-9;
    char when[32];
    std::snprintf(when, sizeof when, "%.1fs", t);
    print_row(when, options.labels, shares);
    windows.push_back({{"t_s", t}, {"shares", shares}});
  }
  const auto whole = label_shares(all);
  print_row("whole run", options.labels, whole);

  if (!options.json_out.empty()) {
    const double span = static_cast<double>(all.back().clock_ns - all.front().clock_ns) * 1e-9;
    std::ofstream out(options.json_out);
    out << nlohmann::json{{"span_s", span}, {"shares", whole}, {"windows", windows}}.dump() << "\n";
    if (!out) {
      std::fprintf(stderr, "egpu-share-monitor: cannot write %s\n", options.json_out.c_str());
      return 1;
    }
  }
  return 0;
}
