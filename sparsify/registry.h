// The sparsifier registry behind --sparsifier: one row per method, its only declaration.
// Everything else reads the row: the factory and --sp validation (make_sparsifier), the
// listing and JSON of `sparsetrain sparsifiers` (registry_listing.cpp), the table in
// docs/SPARSIFIERS.md and the scaling model (both from the JSON).
// Adding a method in the tree = its own file + one row in registry.cpp + one line in the
// conformance suite's list. Outside the tree, a program or library adds the same kind of
// row with register_sparsifier (or a static SparsifierRegistrar) and runs
// conformance::check_conformance (sparsify/testing/conformance.h) on it.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sparsify/sp_keys.h"
#include "sparsify/sparsifier.h"

namespace st {

struct Paper {
  std::string authors;  // "Yoon & Oh"; empty for a method without one (dense)
  std::string venue;    // "HiPC", or "arXiv 1911.08772"
  int year = 0;
};

// A default lives in one place: the method's options struct or constant when the class
// has one (the key then reads it from there: `real("hi", rule.hi, ...)`), else the key.
// The exchange pattern is not restated here: it is the method's pattern().
struct SparsifierInfo {
  std::string name;     // the --sparsifier value
  std::string summary;  // one line
  Paper paper;
  std::vector<SpKey> keys;
  std::function<SparsifierPtr(const SpValues&)> make;

  // options.params checked against `keys`, except the hook's keys (SparsifyHook::keys():
  // scope, min_tensor), which every method accepts and which are checked against theirs.
  SpValues values(const SparsifierOptions& options) const;
  // Validates options.params (values()) and constructs.
  SparsifierPtr build(const SparsifierOptions& options) const;
  // From an instance with default keys, so it always agrees with the class.
  ExchangePattern pattern() const;
  bool partitioned() const;
};

// Every method: the built-in rows, then the registered ones in registration order.
const std::vector<SparsifierInfo>& sparsifiers();
// Adds a method next to the built-in ones: from then on --sparsifier, --sp validation,
// the listing and make_sparsifier know it. Throws st::Error for an empty name, a name
// already taken or a row without a factory. Register before training starts (at static
// initialisation or early in main): the table is not locked against concurrent readers,
// and references from sparsifier_info() may move when a row is added.
void register_sparsifier(SparsifierInfo row);
// Registers its row when constructed; a namespace-scope object in the method's own file
// adds the method to any program that links that file:
//   static const st::SparsifierRegistrar masked_topk({"masked_topk", "...", {}, {...}, make});
struct SparsifierRegistrar {
  explicit SparsifierRegistrar(SparsifierInfo row) { register_sparsifier(std::move(row)); }
};
std::vector<std::string> sparsifier_names();
// Throws "unknown --sparsifier 'x'; valid: ..." for an unknown name.
const SparsifierInfo& sparsifier_info(const std::string& name);
// Throws for an unknown name, an unknown --sp key or a value outside its range.
SparsifierPtr make_sparsifier(const std::string& name, const SparsifierOptions& options);
// A method's validated --sp values, for classes that also construct from options directly.
SpValues sp_values(const std::string& name, const SparsifierOptions& options);

// `sparsetrain sparsifiers`: each method with its paper, pattern and keys (default,
// allowed values, meaning); and the same as JSON.
std::string sparsifiers_listing(const std::vector<SparsifierInfo>& table = sparsifiers());
std::string sparsifiers_json(const std::vector<SparsifierInfo>& table = sparsifiers());

}  // namespace st
