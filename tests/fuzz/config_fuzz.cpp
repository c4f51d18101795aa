// libFuzzer target: egpu.conf parsing (admins' text), byte sizes (users'
// --egpu-mem values), latency objectives (--egpu-slo, egpuctl slo): an
// objective that parses prints as text that parses to the same objective;
// and Slurm's listings egpuctl reads (squeue, scontrol show hostnames): what
// they accept is a plain name, safe on a command line.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/config/byte_size.h"
#include "core/config/egpu_config.h"
#include "core/model/slurm_listing.h"
#include "core/slo/latency_objective.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)egpu::config::parse_egpu_config(text, "fuzz.conf");
  (void)egpu::config::parse_byte_size(text.substr(0, 64));
  const auto objective = egpu::slo::parse_objective(text.substr(0, 64));
  if (objective.ok()) {
    const auto again = egpu::slo::parse_objective(egpu::slo::to_string(*objective));
    // Printed to the microsecond: equal up to that.
    if (!again.ok() || again->has_value() != objective->has_value()) std::abort();
    if (objective->has_value() && ((*again)->percentile_milli != (**objective).percentile_milli ||
                                   (*again)->target_ns / 1000 != (**objective).target_ns / 1000)) {
      std::abort();
    }
  }
  if (auto job = egpu::model::parse_job_listing(text, 12); job.ok()) {
    if (!egpu::model::is_plain_name(job->user)) std::abort();
  }
  if (auto steps = egpu::model::parse_step_listing(text, 12); steps.ok()) {
    for (const auto& s : *steps) {
      if (!egpu::model::is_plain_name(s.step)) std::abort();
    }
  }
  if (auto names = egpu::model::parse_hostnames(text); names.ok()) {
    for (const auto& name : *names) {
      if (!egpu::model::is_plain_name(name)) std::abort();
    }
  }
  return 0;
}
