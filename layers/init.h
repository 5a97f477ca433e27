// Parameter initialisers (PyTorch conventions), drawing from a seeded st::Rng.
#pragma once

#include "core/rng.h"
#include "core/tensor.h"

namespace st::init {

// U(-bound, bound): PyTorch's default for Linear/Conv weights and biases uses
// bound = 1/sqrt(fan_in) (kaiming_uniform with a = sqrt(5)).
void uniform(Tensor& t, float bound, Rng& rng);
// N(0, std^2): kaiming_normal(mode="fan_out", relu) uses std = sqrt(2/fan_out).
void normal(Tensor& t, float stddev, Rng& rng);

}  // namespace st::init
