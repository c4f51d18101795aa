// Result<T>: a value or an error message, for APIs whose failures are expected
// (bad config, malformed messages) and must reach the user as clear text.
// C++20 has no std::expected; this is the small subset we need.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace egpu {

struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  // The message; empty when ok().
  const std::string& error() const {
    static const std::string kNone;
    const Error* e = std::get_if<Error>(&v_);
    return e != nullptr ? e->message : kNone;
  }

 private:
  std::variant<T, Error> v_;
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
