#include "core/config/key_value_file.h"

#include <cctype>
#include <cstdio>
#include <string>

namespace egpu::config {
namespace {

constexpr size_t kMaxLineLength = 4096;

bool is_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-';
}

std::string where(std::string_view source, int line) {
  return std::string(source) + ":" + std::to_string(line) + ": ";
}

// Parses one line into pairs; returns an error message or "".
std::string parse_line(std::string_view text, int line, std::vector<KeyValue>& out) {
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r'))
      ++i;
    if (i >= n || text[i] == '#') return "";
    const size_t key_start = i;
    while (i < n && is_key_char(text[i]))
      ++i;
    if (i == key_start) {
      const auto c = static_cast<unsigned char>(text[i]);
      if (c >= 0x20 && c < 0x7f) {
        return "unexpected character '" + std::string(1, text[i]) + "' where a key was expected";
      }
      // Not printed as is: a terminal would take it for part of a sequence.
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", c);
      const bool bom = line == 1 && i == 0 && text.substr(0, 3) == "\xEF\xBB\xBF";
      return std::string("unexpected byte ") + hex + " where a key was expected" +
             (bom ? " (a UTF-8 byte order mark: save the file without one)" : "");
    }
    std::string key(text.substr(key_start, i - key_start));
    if (i >= n || text[i] != '=') {
      // Pairs are separated by blanks: "SliceMs=10 ms" reads "ms" as a key,
      // and "Key = Value" reads as three.
      return "key '" + key + "' has no '=' after it: write Key=Value, no blanks around '=' " +
             "(pairs are separated by blanks; quote a value that has any)";
    }
    ++i;  // '='
    std::string value;
    if (i < n && text[i] == '"') {
      ++i;
      while (i < n && text[i] != '"')
        value.push_back(text[i++]);
      if (i >= n) return "value of '" + key + "' has an unterminated quote";
      ++i;  // closing quote
      if (i < n && text[i] != ' ' && text[i] != '\t' && text[i] != '#' && text[i] != '\r') {
        return "text after the closing quote of '" + key + "'";
      }
    } else {
      while (i < n && text[i] != ' ' && text[i] != '\t' && text[i] != '#' && text[i] != '\r') {
        if (text[i] == '"') return "stray quote in the value of '" + key + "'";
        value.push_back(text[i++]);
      }
    }
    out.push_back(KeyValue{std::move(key), std::move(value), line});
  }
  return "";
}

}  // namespace

Result<std::vector<KeyValue>> parse_key_values(std::string_view text, std::string_view source) {
  std::vector<KeyValue> out;
  int line = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    ++line;
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view row = text.substr(pos, end - pos);
    if (row.size() > kMaxLineLength) {
      return Error{where(source, line) + "line longer than " + std::to_string(kMaxLineLength) +
                   " characters"};
    }
    for (char c : row) {
      if (c == '\0') return Error{where(source, line) + "NUL byte in configuration text"};
    }
    if (std::string problem = parse_line(row, line, out); !problem.empty()) {
      return Error{where(source, line) + problem};
    }
    if (end == text.size()) break;
    pos = end + 1;
  }
  return out;
}

}  // namespace egpu::config
