#include "sparsify/sp_keys.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace st {

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The whole text as a number ("inf" included), or false.
bool parse_number(const std::string& text, double& v) {
  try {
    size_t used = 0;
    v = std::stod(text, &used);
    return used == text.size();
  } catch (const std::exception&) {
    return false;
  }
}

// Exactly representable whole numbers only, so get_int never rounds.
bool is_whole(double v) {
  return std::isfinite(v) && std::floor(v) == v && std::abs(v) <= 9007199254740992.0;
}

}  // namespace

SpRange SpRange::parse(const std::string& interval) {
  const std::string s = trim(interval);
  const size_t comma = s.find(',');
  SpRange r{0, 0, false, false};
  const bool shape = s.size() >= 5 && (s.front() == '[' || s.front() == '(') &&
                     (s.back() == ']' || s.back() == ')') && comma != std::string::npos;
  ST_CHECK(shape && parse_number(trim(s.substr(1, comma - 1)), r.min) &&
               parse_number(trim(s.substr(comma + 1, s.size() - comma - 2)), r.max),
           "sp key range '", interval, "': expected an interval like [0, 1) or (0, inf)");
  r.min_open = s.front() == '(';
  r.max_open = s.back() == ')';
  ST_CHECK(r.min <= r.max && (std::isfinite(r.min) || r.min_open) &&
               (std::isfinite(r.max) || r.max_open),
           "sp key range '", interval, "': ends out of order, or an infinite end is closed");
  return r;
}

bool SpRange::contains(double v) const {
  const bool above = min_open ? v > min : v >= min;
  const bool below = max_open ? v < max : v <= max;
  return above && below;
}

std::string SpRange::str() const {
  std::string s(1, min_open ? '(' : '[');
  s += number_text(min);
  s += ", ";
  s += number_text(max);
  s += max_open ? ')' : ']';
  return s;
}

std::string SpKey::default_text() const {
  if (!is_flag())
    for (const auto& [word, value] : words)
      if (value == default_value) return word;
  return number_text(default_value);
}

bool SpKey::is_flag() const {
  if (!integer || range.min != 0 || range.max != 1 || range.min_open || range.max_open)
    return false;
  for (const auto& [word, value] : words)
    if (value != 0 && value != 1) return false;
  return true;
}

std::string SpKey::allowed() const {
  if (is_flag()) return "0 or 1";
  std::vector<std::string> items;
  const bool few =
      integer && std::isfinite(range.min) && std::isfinite(range.max) && range.max - range.min <= 3;
  if (few) {
    for (double v = std::ceil(range.min); v <= range.max; ++v)
      if (range.contains(v)) items.push_back(number_text(v));
  } else {
    // An integer key holds at most 2^53 (is_whole: above it a double skips integers), so
    // an open upper end is named as that bound: "[1, inf)" would call 1e30 allowed.
    std::string text = range.str();
    if (integer && std::isinf(range.max)) text = text.substr(0, text.rfind(',')) + ", 2^53]";
    items.push_back((integer ? "an integer in " : "a number in ") + text);
  }
  for (const auto& [word, value] : words) items.push_back(word);
  std::string text = items.front();
  for (size_t i = 1; i < items.size(); ++i)
    text += (i + 1 == items.size() ? " or " : ", ") + items[i];
  return text;
}

SpKey real(std::string name, double default_value, const std::string& range, std::string meaning) {
  return {std::move(name), default_value, SpRange::parse(range), false, std::move(meaning)};
}

SpKey whole(std::string name, int64_t default_value, const std::string& range,
            std::string meaning) {
  return {std::move(name), static_cast<double>(default_value), SpRange::parse(range), true,
          std::move(meaning)};
}

SpKey flag(std::string name, bool default_value, std::string meaning) {
  return {std::move(name),          default_value ? 1.0 : 0.0,
          SpRange::parse("[0, 1]"), true,
          std::move(meaning),       {{"true", 1}, {"on", 1}, {"false", 0}, {"off", 0}}};
}

SpValues::SpValues(const std::string& method, const std::vector<SpKey>& keys,
                   const std::map<std::string, std::string>& given)
    : method_(method) {
  for (const SpKey& key : keys) values_[key.name] = key.default_value;
  for (const auto& [name, text] : given) {
    const SpKey* key = nullptr;
    for (const SpKey& k : keys)
      if (k.name == name) key = &k;
    if (!key) {
      std::string list;
      for (const SpKey& k : keys) list += (list.empty() ? "" : ", ") + k.name;
      ST_THROW("--sp ", name, ": not a parameter of --sparsifier ", method,
               list.empty() ? " (it takes none)" : " (it takes: " + list + ")");
    }
    double v = 0;
    bool ok = false;
    for (const auto& [word, value] : key->words)
      if (text == word) v = value, ok = true;
    if (!ok) ok = parse_number(text, v) && key->range.contains(v) && (!key->integer || is_whole(v));
    ST_CHECK(ok, "--sparsifier ", method, ": --sp ", name, "=", text, " is not allowed; ", name,
             " takes ", key->allowed());
    values_[name] = v;
  }
}

double SpValues::get(const std::string& key) const {
  auto it = values_.find(key);
  ST_CHECK(it != values_.end(), "--sparsifier ", method_, " reads --sp ", key,
           ", which its registry row does not declare");
  return it->second;
}

int64_t SpValues::get_int(const std::string& key) const {
  const double v = get(key);
  ST_CHECK(is_whole(v), "--sparsifier ", method_, ": --sp ", key, " is read as an integer but ",
           "holds ", v, " (declare it with whole())");
  return static_cast<int64_t>(v);
}

}  // namespace st
