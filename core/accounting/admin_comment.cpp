#include "core/accounting/admin_comment.h"

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

uint64_t dropped_count(std::string_view entry) {
  uint64_t n = 0;
  for (char c : entry.substr(kDropped.size())) {
    if (c < '0' || c > '9' || n > UINT64_MAX / 20) return n;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

bool is_append_request(std::string_view admin_comment) {
  return admin_comment.starts_with(kAppendPrefix);
}

std::string append_request(const std::vector<std::string>& records) {
  return std::string(kAppendPrefix) + join(records);
}

Result<std::string> merge_append_request(std::string_view existing, std::string_view request,
                                         size_t max_length) {
  if (!is_append_request(request))
    return Error{"not an egpu append request (it starts with '" + std::string(kAppendPrefix) +
                 "')"};
  const std::vector<std::string> incoming = split(request.substr(kAppendPrefix.size()));
  if (incoming.empty()) return Error{"an egpu append request with no record"};
  std::vector<RecordKey> keys;
  for (const std::string& r : incoming) {
    auto key = parse_step_record(r);
    if (!key) return Error{key.error()};
    keys.push_back(*key);
  }
  // Our dropped count, if any, is taken out and put back last.
  std::vector<std::string> parts;
  uint64_t dropped = 0;
  for (std::string& p : split(existing)) {
    if (p.starts_with(kDropped))
      dropped = dropped_count(p);
    else
      parts.push_back(std::move(p));
  }
  size_t length = 0;
  for (const auto& p : parts)
    length += p.size() + kSeparator.size();
  for (size_t r = 0; r < incoming.size(); ++r) {
    bool replaced = false;
    for (auto& p : parts) {
      if (!p.starts_with("egpu step=")) continue;
      if (auto key = parse_step_record(p); key && *key == keys[r]) {
        length = length - p.size() + incoming[r].size();
        p = incoming[r];
        replaced = true;
        break;
      }
    }
    if (replaced) continue;
    // Room for the record and for the dropped count that may follow it.
    const size_t needed = incoming[r].size() + kSeparator.size();
    if (length + needed + kDropped.size() + 20 > max_length) {
      ++dropped;
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
    if (part.starts_with(kDropped))
      out.dropped = dropped_count(part);
    else if (parse_step_record(part))
      out.records.push_back(std::move(part));
  }
  return out;
}

}  // namespace egpu::accounting
