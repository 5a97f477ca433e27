// Errors are values with context: every failure throws st::Error carrying the
// source location and a message that names the tensor, flag, file or rank involved.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace st {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
// Builds "message (file:line)" from any streamable pieces.
template <typename... Args>
[[noreturn]] void throw_error(const char* file, int line, const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  os << " (" << file << ":" << line << ")";
  throw Error(os.str());
}
}  // namespace detail

}  // namespace st

// ST_CHECK(cond, msg...) throws st::Error with the message when cond is false.
#define ST_CHECK(cond, ...)                                                  \
  do {                                                                       \
    if (!(cond)) ::st::detail::throw_error(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define ST_THROW(...) ::st::detail::throw_error(__FILE__, __LINE__, __VA_ARGS__)
