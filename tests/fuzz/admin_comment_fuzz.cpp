// libFuzzer target: the AdminComment records (core/accounting). Input: job
// 42's comment, a newline, an append request. A merge that succeeds keeps
// the comment's own text, and merging the same request again changes nothing
// unless records were dropped for room (a retried update replaces its
// records), and no final record of the comment gives way to a checkpoint
// (running=1). Also the record grammar and the agent's usage reply alone.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/accounting/admin_comment.h"
#include "core/accounting/step_record.h"
#include "core/accounting/step_usage.h"

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
  for (const std::string& before : egpu::accounting::records_in_comment(existing).records) {
    if (egpu::accounting::is_running_record(before)) continue;
    const auto key = egpu::accounting::parse_step_record(before);
    bool kept = false;
    for (const std::string& after : egpu::accounting::records_in_comment(*merged).records)
      kept = kept || (!egpu::accounting::is_running_record(after) &&
                      egpu::accounting::parse_step_record(after).value() == key.value());
    if (!kept) std::abort();
  }
  if (merged->find("egpu dropped=") == std::string::npos) {
    const auto again = egpu::accounting::merge_append_request(*merged, request, 42, kLimit);
    if (!again || *again != *merged) std::abort();
  }
  return 0;
}
