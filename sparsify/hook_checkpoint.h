// The sparsify hook's state in a checkpoint: every rank's error-feedback residuals and
// the method's rule state, one row per rank, and its restore on --resume, on as many
// ranks or on another number of them (sparsify/resplit.h re-splits the rows). The
// training run reaches it through its exchange setup (train/exchange_setup.*).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "sparsify/sparsify_hook.h"

namespace st {

// The rows of every rank's hook state (SparsifyHook::save_state, in rank order) as the
// checkpoint tensors "sparsify.state", [P, words] int32 (rows padded to the longest),
// and "sparsify.state_bytes", [P] int32 (each row's byte count).
std::vector<std::pair<std::string, Tensor>> sparsify_state_tensors(
    const std::vector<std::vector<uint8_t>>& rows);
// The same tensors from every rank's hook, complete on rank 0 (which writes the
// checkpoint; the other ranks get their own row only). Collective: every rank calls it.
std::vector<std::pair<std::string, Tensor>> gather_sparsify_state(const SparsifyHook& hook,
                                                                  Communicator& comm);
// Gives `hook` this rank's state from the checkpoint at `path`; false when the file holds
// none (a dense run's). A state of another number of ranks is re-split for this one
// (rank 0 notes the residual sums over the ranks before and after) or refused in one
// line naming the method and both world sizes. Collective when the world size changed.
// `meta`, when given, receives the file's metadata.
bool restore_sparsify_state(SparsifyHook& hook, const std::string& path, Communicator& comm,
                            std::map<std::string, std::string>* meta = nullptr);
// Gives `hook` this rank's state from the rows of `old_world` ranks (`row(q)` reads old
// rank q's SparsifyHook::save_state stream): its own row on as many ranks, else the
// re-split for this number of ranks (noted on rank 0) or the refusal in one line prefixed
// by `what` (where the rows come from). Collective when the world size changed.
void restore_hook_rows(SparsifyHook& hook, int old_world,
                       const std::function<StateReader(int)>& row, const std::string& what,
                       Communicator& comm);
}  // namespace st
