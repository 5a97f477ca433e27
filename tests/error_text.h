// What a call threw as st::Error, for tests that check an error's one line ("" when the call
// threw nothing).
#pragma once

#include <functional>
#include <string>

#include "core/error.h"

namespace st::test {

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace st::test
