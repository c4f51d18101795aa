// Command-line parsing on getopt_long: each program declares its options with a
// target variable and help text; bad input becomes a UsageError (exit code 2).
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace egpu::workload {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class OptionParser {
 public:
  explicit OptionParser(std::string program, std::string summary);

  void add_u64(std::string name, std::uint64_t* target, std::string help);
  void add_int(std::string name, int* target, std::string help);
  void add_double(std::string name, double* target, std::string help);
  void add_string(std::string name, std::string* target, std::string help);
  void add_flag(std::string name, bool* target, std::string help);
  // An option whose value `parse` checks and stores; it throws UsageError on bad input.
  void add_custom(std::string name, std::string value_name, std::string help,
                  std::function<void(const std::string&)> parse);

  // Parses argv; returns false when --help was given (usage already printed).
  // Throws UsageError on unknown options, missing or malformed values, or
  // positional arguments.
  bool parse(int argc, char** argv);

  std::string usage() const;

 private:
  struct Option {
    std::string name;
    std::string value_name;  // empty for flags
    std::string help;
    std::function<void(const std::string&)> apply;
  };
  std::string program_;
  std::string summary_;
  std::vector<Option> options_;
};

// Strict number parsing: the whole string must be a number in range.
std::uint64_t parse_u64(const std::string& option, const std::string& text);
double parse_double(const std::string& option, const std::string& text);

}  // namespace egpu::workload
