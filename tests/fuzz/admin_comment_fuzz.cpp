// libFuzzer target: the AdminComment records (core/accounting). Input: job
// 42's comment, a newline, an append request. A merge that succeeds keeps
// the comment's own text, and merging the same request again changes nothing
// unless records were dropped for room (a retried update replaces its
// records), and a final record of the comment gives way only to a new
// final record of more device time, counted as dropped (never to a
// checkpoint, running=1). Also the record grammar and the agent's usage
// reply alone.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/accounting/admin_comment.h"
#include "core/accounting/step_record.h"
#include "core/accounting/step_usage.h"

namespace {

double device_seconds(const std::string& record) {
  std::vector<std::pair<std::string, std::string>> fields;
  if (!egpu::accounting::parse_step_record(record, &fields)) return 0;
  for (const auto& [key, value] : fields)
    if (key == "device_s") return std::strtod(value.c_str(), nullptr);
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)egpu::accounting::parse_step_record(text);
  (void)egpu::accounting::usage_from_json(text);
  const size_t nl = text.find('\n');
  if (nl == std::string_view::npos) return 0;
  const std::string_view existing = text.substr(0, nl), request = text.substr(nl + 1);
  constexpr size_t kLimit = 2000;  // small, so the dropping is reached
  const auto merged = egpu::accounting::merge_append_request(existing, request, 42, kLimit);
  if (!merged) return 0;
  if (merged->size() > existing.size() + request.size() + 64) std::abort();
  const auto was = egpu::accounting::records_in_comment(existing);
  const auto now = egpu::accounting::records_in_comment(*merged);
  for (const std::string& before : was.records) {
    if (egpu::accounting::is_running_record(before)) continue;
    const auto key = egpu::accounting::parse_step_record(before);
    bool kept = false, outweighed = false;
    for (const std::string& after : now.records) {
      const bool final = !egpu::accounting::is_running_record(after);
      kept = kept || (final && egpu::accounting::parse_step_record(after).value() == key.value());
      const bool added =
          std::find(was.records.begin(), was.records.end(), after) == was.records.end();
      outweighed = outweighed || (final && added && device_seconds(after) > device_seconds(before));
    }
    if (!kept && !(outweighed && now.dropped > was.dropped)) std::abort();
  }
  if (merged->find("egpu dropped=") == std::string::npos) {
    const auto again = egpu::accounting::merge_append_request(*merged, request, 42, kLimit);
    if (!again || *again != *merged) std::abort();
  }
  return 0;
}
