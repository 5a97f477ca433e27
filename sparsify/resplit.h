// Resuming a sparsified checkpoint on another number of ranks (docs/SPARSIFIERS.md,
// "Resuming on another number of ranks"). A checkpoint holds every old rank's hook state
// (sparsify/hook_state.h); new rank r of P' is given
//   residual  the sum of the old ranks' residuals {q : q mod P' == r}, in ascending q:
//             shrinking, each new rank takes over several old ranks' residuals; growing,
//             new rank r keeps old rank r's (r < P) and starts from zeros (r >= P).
//             The sum over the ranks, which is what error feedback owes the model, is
//             kept: exactly when growing (the same vectors, plus zeros), up to the
//             rounding of the merged sums when shrinking.
//   rule      old rank 0's rule state, for methods whose rule state is the same on every
//             rank (thresholds, stage counts, PowerSGD's Q); the sparsifier's load_state
//             sees StateReader::new_world() and rebuilds what depends on the world size
//             (MiCRO's and ExDyna's partitions). Methods whose registry row declares
//             per-rank rule state (SparsifierInfo::per_rank_state: VGC's variances,
//             SAGE's thresholds, DGC's momentum) are refused, unless that state is still
//             empty; so is a method this program does not know.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sparsify/hook_state.h"

namespace st {

// New rank `new_rank`'s residual of one bucket from the old ranks' (`old[q]`, empty where
// old rank q has none): the sum over q = new_rank, new_rank + new_world, ... (empty when
// none of them has one). All non-empty vectors must have one length.
std::vector<float> resplit_residual(const std::vector<std::vector<float>>& old, int new_world,
                                    int new_rank);

// Why the state cannot move from old.size() ranks to new_world, as one line naming the
// method and both world sizes; empty when it can. `fresh_rule` is the rule state of a
// sparsifier that has not selected yet (what "still empty" means for the method).
std::string resplit_refusal(const std::vector<HookState>& old, int new_world,
                            const std::vector<uint8_t>& fresh_rule);

// New rank `new_rank`'s hook state; throws resplit_refusal()'s line (prefixed by `what`,
// the checkpoint) or a line naming a malformed residual.
HookState resplit_hook_state(const std::vector<HookState>& old, int new_world, int new_rank,
                             const std::vector<uint8_t>& fresh_rule, const std::string& what);

}  // namespace st
