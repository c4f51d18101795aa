// Result<T>: a value or an error message, for APIs whose failures are expected
// (bad config, malformed messages) and must reach the user as clear text.
// C++20 has no std::expected; this is the small subset we need.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace egpu {

struct Error {
  std::string message;
  // The errno of the system call that failed, where the caller acts on
  // which (ENOSPC: try again once room is made); 0 otherwise.
  int code = 0;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error)                            // NOLINT(google-explicit-constructor)
      : error_(std::move(error.message)), code_(error.code) {}

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return *std::move(value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // The message; empty when ok().
  const std::string& error() const { return error_; }
  // Error::code; 0 when ok().
  int error_code() const { return code_; }
  // The error, to pass on as it is or with words in front.
  Error failure(const std::string& prefix = {}) const { return Error{prefix + error_, code_}; }

 private:
  std::optional<T> value_;
  std::string error_;
  int code_ = 0;
};

// Status: success, or an error message.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error)  // NOLINT(google-explicit-constructor)
      : message_(std::move(error.message)), code_(error.code), ok_(false) {}
  static Status Ok() { return {}; }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& error() const { return message_; }
  int error_code() const { return code_; }
  Error failure(const std::string& prefix = {}) const { return Error{prefix + message_, code_}; }

 private:
  std::string message_;
  int code_ = 0;
  bool ok_ = true;
};

}  // namespace egpu
