// libFuzzer target: job_submit/egpu's reader of Slurm TRES strings
// (gres/egpu_request.c), which slurmctld runs on every submission: a crash
// there takes the controller down. Checked against a plain count of the
// entries that name egpu: none is NONE, one is FOUND (or BAD), several are
// SEVERAL (or BAD); a count read back from "gres/egpu:N" is N.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gres/egpu_request.h"

namespace {

// Entries whose name, after an optional "gres/" or "gres:", is egpu.
int egpu_entries(std::string_view tres) {
  int n = 0;
  while (true) {
    const size_t comma = tres.find(',');
    std::string_view entry = tres.substr(0, comma);
    if (entry.starts_with("gres/") || entry.starts_with("gres:")) entry.remove_prefix(5);
    if (entry == "egpu" || entry.starts_with("egpu:")) ++n;
    if (comma == std::string_view::npos) return n;
    tres.remove_prefix(comma + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Slurm hands the plugin C strings: everything up to the first NUL.
  const std::string tres(reinterpret_cast<const char*>(data), size);
  const char* text = tres.c_str();
  uint64_t units = 7;
  const egpu_request_status_t st = egpu_request_units(text, &units);
  const int entries = egpu_entries(std::string_view(text));
  switch (st) {
    case EGPU_REQUEST_NONE:
      if (entries != 0 || units != 0) std::abort();
      break;
    case EGPU_REQUEST_FOUND: {
      if (entries != 1) std::abort();
      const std::string again = "gres/egpu:" + std::to_string(units);
      uint64_t back = 0;
      if (egpu_request_units(again.c_str(), &back) != EGPU_REQUEST_FOUND || back != units)
        std::abort();
      break;
    }
    case EGPU_REQUEST_SEVERAL:
      if (entries < 2) std::abort();
      break;
    case EGPU_REQUEST_BAD:
      if (entries < 1) std::abort();
      break;
    default:
      std::abort();
  }
  return 0;
}
