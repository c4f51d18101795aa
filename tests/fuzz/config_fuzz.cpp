// libFuzzer target: egpu.conf parsing (admins' text), byte sizes (users'
// --egpu-mem values) and latency objectives (--egpu-slo, egpuctl slo): an
// objective that parses prints as text that parses to the same objective.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/config/byte_size.h"
#include "core/config/egpu_config.h"
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
  return 0;
}
