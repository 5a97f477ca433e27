// The optimiser interface the training loop drives: one step over all parameters with
// the current learning rate, and the optimiser's state as named tensors for checkpoints.
// State keys follow PyTorch's state names: "<param name>.<state name>", e.g.
// "layer1.0.conv1.weight.momentum_buffer" (SGD) or "fc.bias.exp_avg_sq" (Adam).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "layers/param.h"

namespace st {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // The factory name: "sgd", "adam" or "adamw" (optim/make_optimizer.h).
  virtual std::string name() const = 0;
  // Updates every parameter from its gradient with the current learning rate.
  void step() { step_params(all_params(), lr()); }
  // Updates `params()[i]` for each i of `which` with learning rate `lr`: one bucket's
  // share of a step, applied as soon as that bucket is exchanged (ByteScheduler, SOSP'19;
  // P3, MLSys'19). Every update here is per parameter, so the parameters' updates in any
  // grouping equal one step() bit for bit. The rate is an argument because the bucket's
  // update may run on the communication thread while the next step sets its own rate.
  // Calls for disjoint sets may run on different threads, never two at once for one set.
  virtual void step_params(const std::vector<size_t>& which, float lr) = 0;
  virtual float lr() const = 0;
  virtual void set_lr(float lr) = 0;
  // In the order given at construction; names (from collect_params) key the state.
  virtual const std::vector<Param*>& params() const = 0;
  // Weight decay applied to `params()[i]` (0 when no_decay_on_norm_and_bias skips it).
  virtual float weight_decay_of(size_t i) const = 0;

  // "<param name>.<state name>" -> tensor, only for state that exists (PyTorch creates a
  // parameter's state at its first step). The tensors share storage with the live state.
  virtual std::map<std::string, Tensor> state_dict() const = 0;
  // Restores state saved by state_dict(); a key naming no parameter or state of this
  // optimiser, or a tensor of the wrong shape or type, throws naming the key.
  virtual void load_state_dict(const std::map<std::string, Tensor>& state) = 0;

  void zero_grad();

 private:
  std::vector<size_t> all_params() const;
};

// Runs `update` (CPU or CUDA code over the parameters) where they live. On the emulated
// device it is queued as one task on the calling thread's current stream of that device,
// the only place their memory may be touched, and the host returns at once, as after a
// CUDA kernel launch: `update` must hold what it reads by value (a later set_lr or step
// cannot reach it). Before it runs there, each parameter of `written` is checked to be
// ordered after every read noted on its value (core/emu/ordering.h). Anywhere else it
// runs on the calling thread. `who` names the caller in a device error.
void queue_where_params_live(const std::vector<Param*>& written, const char* who,
                             std::function<void()> update);
// The same, waited for: for work that computes a host value (a norm).
void run_where_params_live(const std::vector<Param*>& params, const char* who,
                           const std::function<void()>& update);

// Weight decay for a parameter under the option to skip ParamKind::Norm and ::Bias
// (Goyal et al. 2017 skip BatchNorm's gamma and beta; PyTorch decays everything).
float weight_decay_for(const Param& p, float weight_decay, bool no_decay_on_norm_and_bias);

// Where a state key points: parameter index and state name.
struct StateKey {
  size_t param;
  std::string state;
};

// Every "<param name>.<state name>" of `params` x `state_names`; throws when two
// parameters share a name. `who` ("SGD", "Adam") starts error messages.
std::map<std::string, StateKey> state_keys(const std::vector<Param*>& params,
                                           const std::vector<std::string>& state_names,
                                           const std::string& who);

// Throws "<who> state: '<key>' matches no parameter state of this model (...)" for the
// first key of `state` missing from `keys`.
void check_state_known(const std::map<std::string, Tensor>& state,
                       const std::map<std::string, StateKey>& keys, const std::string& who);

}  // namespace st
