// Error reporting for the FAA library: a Status (ok or a message) and a Result<T>
// (a value or a message). No exceptions leave the library; callers such as the
// agent turn the message into a reply or a log line.
#ifndef EGPU_CORE_FAA_STATUS_H
#define EGPU_CORE_FAA_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace egpu::faa {

class [[nodiscard]] Status {
 public:
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !failed_; }
  // Empty when ok().
  const std::string& message() const { return message_; }

 private:
  Status() = default;
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}

  bool failed_ = false;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit on purpose
  // Precondition: !error.ok().
  Result(Status error) : error_(std::move(error)) {}  // NOLINT: implicit on purpose

  bool ok() const { return value_.has_value(); }
  // Precondition: ok().
  const T& value() const { return *value_; }
  T& value() { return *value_; }
  // Empty when ok().
  const std::string& message() const { return error_.message(); }

 private:
  std::optional<T> value_;
  Status error_ = Status::Ok();
};

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_STATUS_H
