// inference-like: requests arriving at --rate per second (Poisson, seeded) or
// back to back (--rate 0, closed loop). A request is a few kernels and a wait
// for their completion; its latency runs from arrival to completion, so time a
// request waits behind a late one counts.
//
// --rate-trace replays a production request-rate trace (tests/data/gentd26):
// the rate is --rate times the trace's level at the current trace minute, a
// trace minute lasting --trace-minute-s. --report-latency reports each
// request to egpu (egpu_report_latency, found at run time: the program runs
// the same without the shim).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda_handles.h"
#include "latency_stats.h"
#include "rate_trace.h"
#include "workload.h"

namespace {

using egpu::workload::Clock;
using egpu::workload::Event;
using egpu::workload::OptionParser;
using egpu::workload::UsageError;
using egpu::workload::WorkloadContext;
using egpu::workload::WorkloadResult;

struct InferenceOptions {
  double rate = 50;
  std::uint64_t kernels_per_request = 4;
  double kernel_us = 500;
  std::uint64_t max_requests = 0;
  bool report_samples = false;
  std::string rate_trace;
  double trace_minute_s = 10;
  std::uint64_t trace_start_minute = 0;
  bool report_latency = false;
};

// egpu_report_latency from the preloaded shim, or null without it.
using ReportLatency = int (*)(std::int64_t);
ReportLatency find_report_latency() {
  return reinterpret_cast<ReportLatency>(dlsym(RTLD_DEFAULT, "egpu_report_latency"));
}

WorkloadResult run_inference(const InferenceOptions& options, const WorkloadContext& context) {
  const bool open_loop = options.rate > 0;
  std::mt19937_64 random(context.options.seed);
  std::exponential_distribution<double> gap_s(open_loop ? options.rate : 1.0);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  const std::vector<double> levels = options.rate_trace.empty()
                                         ? std::vector<double>{}
                                         : egpu::test::load_rate_levels(options.rate_trace);
  // The trace's level now: arrivals at the peak rate are kept with this chance.
  auto level_at = [&](Clock::time_point t) {
    if (levels.empty()) return 1.0;
    const double minutes =
        egpu::workload::seconds_between(context.clock.start(), t) / options.trace_minute_s;
    const auto minute = options.trace_start_minute + static_cast<std::uint64_t>(minutes);
    return minute < levels.size() ? levels[minute] : 0.0;
  };
  auto next_arrival = context.clock.start();
  auto draw_next_arrival = [&] {
    do {
      next_arrival +=
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap_s(random)));
    } while (next_arrival < context.clock.deadline() && coin(random) >= level_at(next_arrival));
  };
  if (open_loop) draw_next_arrival();
  const ReportLatency report = options.report_latency ? find_report_latency() : nullptr;
  std::uint64_t reported = 0;
  std::uint64_t report_refused = 0;

  const auto kernel_ns = static_cast<std::uint64_t>(options.kernel_us * 1000.0);
  const Event done;
  std::vector<double> latency_ms;
  std::vector<double> arrival_s;  // CLOCK_MONOTONIC, comparable across processes
  std::uint64_t served = 0;
  while (!context.clock.should_stop() &&
         (options.max_requests == 0 || served < options.max_requests)) {
    Clock::time_point arrival = Clock::now();
    if (open_loop) {
      const auto wake = std::min(next_arrival, context.clock.deadline());
      if (!egpu::workload::sleep_until(wake) || context.clock.expired()) break;
      arrival = next_arrival;
      draw_next_arrival();
    }
    for (std::uint64_t k = 0; k < options.kernels_per_request; ++k)
      context.spin.launch(kernel_ns);
    done.record(context.session.stream());
    done.synchronize();
    const double latency_s = egpu::workload::seconds_between(arrival, Clock::now());
    latency_ms.push_back(latency_s * 1e3);
    if (report != nullptr) {
      ++(report(static_cast<std::int64_t>(latency_s * 1e9)) == 0 ? reported : report_refused);
    }
    if (options.report_samples) {
      arrival_s.push_back(std::chrono::duration<double>(arrival.time_since_epoch()).count());
    }
    ++served;
    context.progress.report(context.clock, "requests=" + std::to_string(served));
  }

  WorkloadResult result;
  result.kernels = served * options.kernels_per_request;
  result.device_time_s = static_cast<double>(result.kernels * kernel_ns) * 1e-9;
  result.work_done = static_cast<double>(served);
  result.throughput_unit = "requests/s";
  const auto latency = egpu::workload::compute_percentiles(latency_ms);
  result.fields = {{"requests", served},
                   {"rate", options.rate},
                   {"kernels_per_request", options.kernels_per_request},
                   {"kernel_us", options.kernel_us},
                   {"request_device_ms",
                    static_cast<double>(options.kernels_per_request) * options.kernel_us * 1e-3},
                   {"latency_ms", to_json(latency)}};
  if (options.report_latency) {
    result.fields["latency_reported"] = {
        {"api_found", report != nullptr}, {"reported", reported}, {"refused", report_refused}};
  }
  if (!options.rate_trace.empty()) {
    result.fields["rate_trace"] = {{"file", options.rate_trace},
                                   {"trace_minute_s", options.trace_minute_s},
                                   {"start_minute", options.trace_start_minute}};
  }
  // Raw samples let a caller pool several runs before taking percentiles, or
  // leave out requests that overlapped something it knows about.
  if (options.report_samples) {
    result.fields["latency_samples_ms"] = latency_ms;
    result.fields["arrival_samples_s"] = arrival_s;
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  InferenceOptions options;
  egpu::workload::WorkloadSpec spec;
  spec.name = "inference-like";
  spec.summary =
      "Requests of a few kernels at a Poisson rate (or closed loop); reports latency percentiles.";
  spec.add_options = [&options](OptionParser& parser) {
    parser.add_double("rate", &options.rate,
                      "mean requests per second (Poisson), 0 = closed loop (default 50)");
    parser.add_u64("kernels-per-request", &options.kernels_per_request,
                   "kernels in one request (default 4)");
    parser.add_double("kernel-us", &options.kernel_us,
                      "duration of each kernel in us (default 500)");
    parser.add_u64("requests", &options.max_requests,
                   "stop after N requests, 0 = no limit (default 0)");
    parser.add_string("rate-trace", &options.rate_trace,
                      "replay a request-rate trace (CSV timestamp,value): the rate is --rate times "
                      "its level at the current trace minute");
    parser.add_double("trace-minute-s", &options.trace_minute_s,
                      "seconds a trace minute lasts (default 10)");
    parser.add_u64("trace-start-minute", &options.trace_start_minute,
                   "trace minute to start at (default 0)");
    parser.add_flag("report-latency", &options.report_latency,
                    "report each request's latency to egpu (egpu_report_latency, if preloaded)");
    parser.add_flag("samples", &options.report_samples,
                    "also report every request's latency (latency_samples_ms) and arrival "
                    "(arrival_samples_s, CLOCK_MONOTONIC seconds)");
  };
  spec.validate = [&options] {
    if (options.rate < 0) throw UsageError("--rate must be >= 0");
    if (options.kernels_per_request == 0) throw UsageError("--kernels-per-request must be >= 1");
    if (options.kernel_us < 0) throw UsageError("--kernel-us must be >= 0");
    if (!(options.trace_minute_s > 0)) throw UsageError("--trace-minute-s must be > 0");
    if (!options.rate_trace.empty() && options.rate <= 0) {
      throw UsageError("--rate-trace needs an open loop (--rate > 0, the peak rate)");
    }
  };
  spec.run = [&options](const WorkloadContext& context) { return run_inference(options, context); };
  return egpu::workload::workload_main(argc, argv, spec);
}
