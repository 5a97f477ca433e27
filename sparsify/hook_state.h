// The checkpoint stream of one rank's SparsifyHook, in its parts: the method's name, the
// error-feedback residual of every bucket the hook has state for (empty: none yet), and
// the sparsifier's own rule state (Sparsifier::save_state) running to the end of the
// stream. The hook writes and reads it here; the re-split of a checkpoint for another
// number of ranks (sparsify/resplit.h) takes it apart and puts it together the same way.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sparsify/state_io.h"

namespace st {

struct HookState {
  std::string method;
  std::map<int, std::vector<float>> residuals;  // by bucket id
  std::vector<uint8_t> rule;                    // the sparsifier's stream
};

std::vector<uint8_t> write_hook_state(const HookState& s);
// Reads everything that is left in `in` (the rule state runs to the end).
HookState read_hook_state(StateReader& in);

}  // namespace st
