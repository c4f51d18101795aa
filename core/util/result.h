// Result<T>: a value or an error message, for APIs whose failures are expected
// (bad config, malformed messages) and must reach the user as clear text.
// C++20 has no std::expected; this is the small subset we need.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <optional>

namespace egpu {

struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}                // NOLINT(google-explicit-constructor)
  Result(Error error) : error_(std::move(error.message)) {}  // NOLINT(google-explicit-constructor)

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

 private:
  std::optional<T> value_;
  std::string error_;
};

// Status: success, or an error message.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : message_(std::move(error.message)), ok_(false) {}  // NOLINT
  static Status Ok() { return {}; }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& error() const { return message_; }

 private:
  std::string message_;
  bool ok_ = true;
};

}  // namespace egpu
