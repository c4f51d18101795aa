#include "core/accounting/admin_comment.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/accounting/step_record.h"

namespace egpu::accounting {
namespace {

constexpr std::string_view kDropped = "egpu dropped=";

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> parts;
  if (text.empty()) return parts;
  for (;;) {
    const size_t at = text.find(kSeparator);
    parts.emplace_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + kSeparator.size());
  }
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += kSeparator;
    out += parts[i];
  }
  return out;
}

// Our "egpu dropped=N" entry: N when `entry` is exactly that (an admin's
// own text that merely starts the same way is not ours).
std::optional<uint64_t> dropped_count(std::string_view entry) {
  if (!entry.starts_with(kDropped)) return std::nullopt;
  const std::string_view digits = entry.substr(kDropped.size());
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  uint64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

// The job a record's step belongs to ("42" of "42.batch").
std::string_view job_of(const RecordKey& key) {
  return std::string_view(key.step).substr(0, key.step.find('.'));
}

}  // namespace

bool is_append_request(std::string_view admin_comment) {
  return admin_comment.starts_with(kAppendPrefix);
}

std::string append_request(const std::vector<std::string>& records) {
  return std::string(kAppendPrefix) + join(records);
}

Result<std::string> merge_append_request(std::string_view existing, std::string_view request,
                                         uint64_t job_id, size_t max_length) {
  if (!is_append_request(request))
    return Error{"not an egpu append request (it starts with '" + std::string(kAppendPrefix) +
                 "')"};
  const std::vector<std::string> incoming = split(request.substr(kAppendPrefix.size()));
  if (incoming.empty()) return Error{"an egpu append request with no record"};
  std::vector<RecordKey> keys;
  for (const std::string& r : incoming) {
    auto key = parse_step_record(r);
    if (!key) return Error{key.error()};
    if (job_of(*key) != std::to_string(job_id))
      return Error{"record '" + r + "' is not job " + std::to_string(job_id) + "'s"};
    keys.push_back(*key);
  }
  // Our dropped count, if any, is taken out and put back last.
  std::vector<std::string> parts;
  uint64_t dropped = 0;
  for (std::string& p : split(existing)) {
    if (const auto n = dropped_count(p))
      dropped += std::min(*n, UINT64_MAX / 4 - dropped);
    else
      parts.push_back(std::move(p));
  }
  size_t length = 0;
  for (const auto& p : parts)
    length += p.size() + kSeparator.size();
  for (size_t r = 0; r < incoming.size(); ++r) {
    // A checkpoint that does not fit is not counted: the next one would
    // count again, and the count is of records lost.
    const bool checkpoint = is_running_record(incoming[r]);
    bool replaced = false;
    for (auto& p : parts) {
      if (!p.starts_with("egpu step=")) continue;
      if (auto key = parse_step_record(p); key && *key == keys[r]) {
        replaced = true;
        // A checkpoint that comes late (from a step's own checkpoint thread)
        // never undoes the step's final record.
        if (checkpoint && !is_running_record(p)) break;
        // A longer one must fit too; else the old one stays and this counts.
        if (length - p.size() + incoming[r].size() + kDropped.size() + 20 > max_length) {
          dropped += checkpoint ? 0 : 1;
          break;
        }
        length = length - p.size() + incoming[r].size();
        p = incoming[r];
        break;
      }
    }
    if (replaced) continue;
    // Room for the record and for the dropped count that may follow it.
    const size_t needed = incoming[r].size() + kSeparator.size();
    if (length + needed + kDropped.size() + 20 > max_length) {
      dropped += checkpoint ? 0 : 1;
      continue;
    }
    parts.push_back(incoming[r]);
    length += needed;
  }
  if (dropped > 0) parts.push_back(std::string(kDropped) + std::to_string(dropped));
  return join(parts);
}

CommentRecords records_in_comment(std::string_view admin_comment) {
  CommentRecords out;
  for (std::string& part : split(admin_comment)) {
    if (const auto n = dropped_count(part))
      out.dropped += *n;
    else if (parse_step_record(part))
      out.records.push_back(std::move(part));
  }
  return out;
}

}  // namespace egpu::accounting
