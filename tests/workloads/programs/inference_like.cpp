// inference-like: requests arriving at --rate per second (Poisson, seeded) or
// back to back (--rate 0, closed loop). A request is a few kernels and a wait
// for their completion; its latency runs from arrival to completion, so time a
// request waits behind a late one counts.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda_handles.h"
#include "latency_stats.h"
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
};

WorkloadResult run_inference(const InferenceOptions& options, const WorkloadContext& context) {
  const bool open_loop = options.rate > 0;
  std::mt19937_64 random(context.options.seed);
  std::exponential_distribution<double> gap_s(open_loop ? options.rate : 1.0);
  auto next_arrival = context.clock.start();
  auto draw_next_arrival = [&] {
    next_arrival +=
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap_s(random)));
  };
  if (open_loop) draw_next_arrival();

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
    latency_ms.push_back(egpu::workload::seconds_between(arrival, Clock::now()) * 1e3);
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
    parser.add_flag("samples", &options.report_samples,
                    "also report every request's latency (latency_samples_ms) and arrival "
                    "(arrival_samples_s, CLOCK_MONOTONIC seconds)");
  };
  spec.validate = [&options] {
    if (options.rate < 0) throw UsageError("--rate must be >= 0");
    if (options.kernels_per_request == 0) throw UsageError("--kernels-per-request must be >= 1");
    if (options.kernel_us < 0) throw UsageError("--kernel-us must be >= 0");
  };
  spec.run = [&options](const WorkloadContext& context) { return run_inference(options, context); };
  return egpu::workload::workload_main(argc, argv, spec);
}
