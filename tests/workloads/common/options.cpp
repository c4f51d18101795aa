#include "options.h"

#include <getopt.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace egpu::workload {

namespace {

[[noreturn]] void bad_value(const std::string& option, const std::string& text,
                            const char* expected) {
  throw UsageError("--" + option + ": '" + text + "' is not " + expected);
}

}  // namespace

std::uint64_t parse_u64(const std::string& option, const std::string& text) {
  if (text.empty() || text[0] == '-' || text[0] == '+') {
    bad_value(option, text, "a non-negative integer");
  }
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    bad_value(option, text, "a non-negative integer");
  }
  return value;
}

double parse_double(const std::string& option, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || end == text.c_str() || *end != '\0' || !std::isfinite(value)) {
    bad_value(option, text, "a finite number");
  }
  return value;
}

OptionParser::OptionParser(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void OptionParser::add_u64(std::string name, std::uint64_t* target, std::string help) {
  std::string option = name;
  add_custom(std::move(name), "N", std::move(help),
             [target, option](const std::string& text) { *target = parse_u64(option, text); });
}

void OptionParser::add_int(std::string name, int* target, std::string help) {
  std::string option = name;
  add_custom(std::move(name), "N", std::move(help), [target, option](const std::string& text) {
    std::uint64_t value = parse_u64(option, text);
    if (value > static_cast<std::uint64_t>(INT_MAX)) bad_value(option, text, "a small integer");
    *target = static_cast<int>(value);
  });
}

void OptionParser::add_double(std::string name, double* target, std::string help) {
  std::string option = name;
  add_custom(std::move(name), "X", std::move(help),
             [target, option](const std::string& text) { *target = parse_double(option, text); });
}

void OptionParser::add_string(std::string name, std::string* target, std::string help) {
  add_custom(std::move(name), "TEXT", std::move(help),
             [target](const std::string& text) { *target = text; });
}

void OptionParser::add_flag(std::string name, bool* target, std::string help) {
  options_.push_back(
      {std::move(name), "", std::move(help), [target](const std::string&) { *target = true; }});
}

void OptionParser::add_custom(std::string name, std::string value_name, std::string help,
                              std::function<void(const std::string&)> parse) {
  options_.push_back({std::move(name), std::move(value_name), std::move(help), std::move(parse)});
}

std::string OptionParser::usage() const {
  std::string text = "usage: " + program_ + " [options]\n" + summary_ + "\n\noptions:\n";
  for (const Option& option : options_) {
    std::string left = "  --" + option.name;
    if (!option.value_name.empty()) left += " " + option.value_name;
    if (left.size() < 26) left.resize(26, ' ');
    text += left + " " + option.help + "\n";
  }
  text += "  --help                   this text\n";
  return text;
}

bool OptionParser::parse(int argc, char** argv) {
  const int help_index = static_cast<int>(options_.size());
  std::vector<struct option> table;
  table.reserve(options_.size() + 2);
  for (const Option& option : options_) {
    table.push_back({option.name.c_str(),
                     option.value_name.empty() ? no_argument : required_argument, nullptr, 0});
  }
  table.push_back({"help", no_argument, nullptr, 0});
  table.push_back({nullptr, 0, nullptr, 0});

  opterr = 0;  // we print our own messages
  optind = 1;
  for (;;) {
    int index = -1;
    // A leading ':' makes getopt_long report a missing value as ':'.
    const int rc = getopt_long(argc, argv, ":", table.data(), &index);
    if (rc == -1) break;
    const std::string given = (optind > 0 && optind <= argc) ? argv[optind - 1] : "?";
    if (rc == ':') throw UsageError("option '" + given + "' needs a value (see --help)");
    if (rc != 0 || index < 0) throw UsageError("unknown option '" + given + "' (see --help)");
    if (index == help_index) {
      std::fputs(usage().c_str(), stdout);
      return false;
    }
    const Option& option = options_[static_cast<std::size_t>(index)];
    option.apply(optarg != nullptr ? std::string(optarg) : std::string());
  }
  if (optind < argc) {
    throw UsageError(std::string("unexpected argument '") + argv[optind] + "' (see --help)");
  }
  return true;
}

}  // namespace egpu::workload
