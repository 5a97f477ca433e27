// The --sp keys of a sparsifier: each declared once (default, allowed values, meaning) in the
// method's keys(), which its registry row lists. The registry checks key=value pairs against
// them (SpValues) and prints the listing, the JSON and the docs table from them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/number_text.h"  // number_text, which the listings use

namespace st {

// An interval of allowed values, written and read in math notation: "[1, inf)",
// "(0, 1]", "(-inf, 1)". Infinite ends are always open.
struct SpRange {
  double min, max;
  bool min_open, max_open;
  static SpRange parse(const std::string& interval);  // throws on a malformed interval
  bool contains(double v) const;                      // false for NaN
  std::string str() const;
};

// One --sp key. Values are numbers; `words` spell extra values (sidco's adapt=auto) or
// aliases (a flag's true/on/false/off), each standing for a number.
struct SpKey {
  std::string name;
  double default_value;
  SpRange range;
  bool integer;
  std::string meaning;  // one line
  std::vector<std::pair<std::string, double>> words = {};

  std::string default_text() const;  // as typed on the command line: "1.1", "auto"
  std::string allowed() const;       // "number in (0, 1)", "integer in [1, inf)", "0 or 1"
  bool is_flag() const;
};

// Declaration helpers, so a row reads like the listing.
SpKey real(std::string name, double default_value, const std::string& range, std::string meaning);
SpKey whole(std::string name, int64_t default_value, const std::string& range, std::string meaning);
SpKey flag(std::string name, bool default_value, std::string meaning);  // 0/1, true/false, on/off

// The validated --sp values of one method: every declared key, its default unless given.
// Throws one line naming the method, key, value and allowed range for a bad value, and
// listing the valid keys for an unknown one.
class SpValues {
 public:
  SpValues(const std::string& method, const std::vector<SpKey>& keys,
           const std::map<std::string, std::string>& given);
  double get(const std::string& key) const;  // a key the method did not declare throws
  int64_t get_int(const std::string& key) const;
  bool get_bool(const std::string& key) const { return get(key) != 0; }

 private:
  std::string method_;
  std::map<std::string, double> values_;
};

}  // namespace st
