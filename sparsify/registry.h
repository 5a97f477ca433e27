// The sparsifier registry behind --sparsifier: one row per method. Adding a method =
// its own file + one row in registry.cpp + one line in the conformance suite's list.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sparsify/sparsifier.h"

namespace st {

struct SparsifierInfo {
  std::string name;
  std::string summary;  // one line for `sparsetrain sparsifiers`
  std::string params;   // its --sp keys with paper defaults, e.g. "band=1.1 up=1.005"
  std::function<SparsifierPtr(const SparsifierOptions&)> make;
};

const std::vector<SparsifierInfo>& sparsifiers();
std::vector<std::string> sparsifier_names();
// Throws "unknown --sparsifier 'x'; valid: ..." for an unknown name; checks --sp keys.
SparsifierPtr make_sparsifier(const std::string& name, const SparsifierOptions& options);

}  // namespace st
