#include "core/topo/int_list.h"

#include <algorithm>
#include <charconv>

namespace egpu::topo {
namespace {

std::optional<int> parse_non_negative(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

void append_run(std::string& out, int first, int last) {
  if (!out.empty()) out += ',';
  out += std::to_string(first);
  if (last != first) out += '-' + std::to_string(last);
}

}  // namespace

std::string format_ranged_list(std::vector<int> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::string out;
  size_t run_start = 0;
  for (size_t i = 1; i <= values.size(); ++i) {
    if (i == values.size() || values[i] != values[i - 1] + 1) {
      if (!values.empty()) append_run(out, values[run_start], values[i - 1]);
      run_start = i;
    }
  }
  return out;
}

std::optional<std::vector<int>> parse_ranged_list(std::string_view text) {
  std::vector<int> values;
  if (text.empty()) return values;
  while (true) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    size_t dash = item.find('-');
    auto first = parse_non_negative(item.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : parse_non_negative(item.substr(dash + 1));
    if (!first || !last || *last < *first) return std::nullopt;
    for (int v = *first; v <= *last; ++v)
      values.push_back(v);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return values;
}

std::string join_comma(const std::vector<int>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(values[i]);
  }
  return out;
}

}  // namespace egpu::topo
