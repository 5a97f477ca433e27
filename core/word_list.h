// The one way messages and help texts list words: "a, b, c".
#pragma once

#include <string>
#include <vector>

namespace st {

inline std::string word_list(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : ", ") + w;
  return s;
}

}  // namespace st
