#include "core/accounting/admin_comment.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
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

// The device time a final record says its step used; nullopt for a
// checkpoint and for anything that is not a record.
std::optional<double> final_device_seconds(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> fields;
  if (!text.starts_with("egpu step=") || !parse_step_record(text, &fields) ||
      is_running_record(text))
    return std::nullopt;
  for (const auto& [key, value] : fields) {
    if (key == "device_s") return std::strtod(value.c_str(), nullptr);
  }
  return std::nullopt;
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
  // One record per key: a final one wins over a checkpoint whatever the
  // order, and of two of a kind the later.
  std::vector<size_t> chosen;  // indices into incoming
  for (size_t r = 0; r < incoming.size(); ++r) {
    bool superseded = false;
    for (size_t& c : chosen) {
      if (keys[c] != keys[r]) continue;
      superseded = true;
      if (is_running_record(incoming[c]) || !is_running_record(incoming[r])) c = r;
    }
    if (!superseded) chosen.push_back(r);
  }
  // Records that replace one of the comment's go first, those that shorten
  // it before those that lengthen it (least first), then new ones in the
  // request's order: each is judged against the room the others leave in
  // the end, so merging the same request again changes nothing (a record
  // that did not fit would not fit the second time either).
  struct Replacement {
    size_t record;
    size_t part;
    long long growth;
  };
  std::vector<Replacement> replacements;
  // Parts this request names (replaced or kept) or adds: never made room
  // from, so that merging the request again finds them.
  std::vector<bool> fresh(parts.size(), false);
  std::vector<size_t> additions;
  for (size_t r : chosen) {
    bool found = false;
    for (size_t i = 0; i < parts.size() && !found; ++i) {
      if (!parts[i].starts_with("egpu step=")) continue;
      const auto key = parse_step_record(parts[i]);
      if (!key || *key != keys[r]) continue;
      found = true;
      fresh[i] = true;
      // A checkpoint that comes late (from a step's own checkpoint thread)
      // never undoes the step's final record.
      if (is_running_record(incoming[r]) && !is_running_record(parts[i])) continue;
      replacements.push_back(
          {r, i,
           static_cast<long long>(incoming[r].size()) - static_cast<long long>(parts[i].size())});
    }
    if (!found) additions.push_back(r);
  }
  std::stable_sort(replacements.begin(), replacements.end(),
                   [](const Replacement& a, const Replacement& b) { return a.growth < b.growth; });
  // A checkpoint that does not fit is not counted: the next one would
  // count again, and the count is of records lost.
  const auto lost = [&](size_t r) { dropped += is_running_record(incoming[r]) ? 0 : 1; };
  for (const Replacement& rep : replacements) {
    const std::string& p = parts[rep.part];
    // A longer one must fit too; else the old one stays and this counts.
    if (length - p.size() + incoming[rep.record].size() + kDropped.size() + 20 > max_length) {
      lost(rep.record);
      continue;
    }
    length = length - p.size() + incoming[rep.record].size();
    parts[rep.part] = incoming[rep.record];
  }
  for (size_t r : additions) {
    // Room for the record and for the dropped count that may follow it.
    const size_t needed = incoming[r].size() + kSeparator.size();
    const auto room_after = [&](size_t freed) {
      return length - freed + needed + kDropped.size() + 20 <= max_length;
    };
    // A full comment keeps the records of most device time: a final record
    // takes the place of those that used less (a job's many trivial steps
    // cannot push its heavy ones out), each counted as dropped.
    const auto mine = final_device_seconds(incoming[r]);
    if (!room_after(0) && mine) {
      std::vector<std::pair<double, size_t>> less;  // (device_s, index into parts)
      for (size_t i = 0; i < parts.size(); ++i) {
        const auto theirs = final_device_seconds(parts[i]);
        if (theirs && *theirs < *mine && !fresh[i]) less.emplace_back(*theirs, i);
      }
      std::stable_sort(less.begin(), less.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      size_t freed = 0, taken = 0;
      while (taken < less.size() && !room_after(freed))
        freed += parts[less[taken++].second].size() + kSeparator.size();
      if (room_after(freed)) {
        std::vector<bool> evicted(parts.size(), false);
        for (size_t k = 0; k < taken; ++k)
          evicted[less[k].second] = true;
        std::vector<std::string> kept;
        std::vector<bool> kept_fresh;
        for (size_t i = 0; i < parts.size(); ++i) {
          if (evicted[i]) continue;
          kept.push_back(std::move(parts[i]));
          kept_fresh.push_back(fresh[i]);
        }
        parts = std::move(kept);
        fresh = std::move(kept_fresh);
        length -= freed;
        dropped += taken;
      }
    }
    if (!room_after(0)) {
      lost(r);
      continue;
    }
    parts.push_back(incoming[r]);
    fresh.push_back(true);
    length += needed;
  }
  if (dropped > 0) parts.push_back(std::string(kDropped) + std::to_string(dropped));
  return join(parts);
}

CommentRecords records_in_comment(std::string_view admin_comment) {
  CommentRecords out;
  // Lines are comments of their own: sacct and squeue print one per job of
  // a heterogeneous or array job.
  for (;;) {
    const size_t eol = admin_comment.find('\n');
    for (std::string& part : split(admin_comment.substr(0, eol))) {
      if (const auto n = dropped_count(part))
        out.dropped += *n;
      else if (parse_step_record(part))
        out.records.push_back(std::move(part));
    }
    if (eol == std::string_view::npos) return out;
    admin_comment.remove_prefix(eol + 1);
  }
}

}  // namespace egpu::accounting
