// The build-it-yourself steps' expected results, computed here from every rank's inputs
// at once (the tests' gradients are a known function of rank and step, so each process
// can work out all ranks' values without communicating). Nothing here calls the library:
// a learner's unfinished page exercise (say AllreduceHook::exchange) cannot change what a
// diy step is checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

namespace st::test::diy_ref {

// One rank's gradient of one bucket at one step.
using Gradient = std::function<std::vector<float>(int rank, int step)>;

// The average over P ranks at every position, summed in double.
inline std::vector<double> average(const std::vector<std::vector<float>>& per_rank) {
  std::vector<double> avg(per_rank.at(0).size(), 0.0);
  for (const auto& g : per_rank)
    for (size_t i = 0; i < g.size(); ++i) avg[i] += g[i];
  for (double& v : avg) v /= static_cast<double>(per_rank.size());
  return avg;
}

// Every rank's state of an exchange that sends chosen positions with error feedback:
// x = residual + g; after the exchange the applied update is the average of x over the
// ranks at the union of the choices (0 elsewhere) and each residual is x zeroed there.
struct UnionExchange {
  std::vector<std::vector<float>> residual;  // per rank
  std::vector<double> applied;

  // `choose(r, x)` returns rank r's chosen positions of its x; returns the union's size.
  long step(const std::vector<std::vector<float>>& g,
            const std::function<std::vector<int>(int, const std::vector<float>&)>& choose) {
    const size_t P = g.size(), n = g[0].size();
    if (residual.empty()) residual.assign(P, std::vector<float>(n, 0.0f));
    std::vector<char> in_union(n, 0);
    for (size_t r = 0; r < P; ++r) {
      for (size_t i = 0; i < n; ++i) residual[r][i] += g[r][i];
      for (int i : choose(static_cast<int>(r), residual[r])) in_union[i] = 1;
    }
    applied.assign(n, 0.0);
    for (size_t i = 0; i < n; ++i) {
      if (!in_union[i]) continue;
      for (size_t r = 0; r < P; ++r) applied[i] += residual[r][i];
      applied[i] /= static_cast<double>(P);
      for (size_t r = 0; r < P; ++r) residual[r][i] = 0.0f;
    }
    return std::count(in_union.begin(), in_union.end(), 1);
  }
};

// Top-k: the k largest |x| of each rank (Aji and Heafield, 2017).
inline std::vector<int> topk(const std::vector<float>& x, long k) {
  std::vector<int> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int a, int b) { return std::fabs(x[a]) > std::fabs(x[b]); });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

// MiCRO's rule (Yoon and Oh, HiPC 2023), as docs/tutorial/diy/diy.h states it: rank r owns
// partition (t + r) mod P of P near-equal partitions (the first n mod P one longer) and
// sends every |x| >= tau there, or one fallback element (begin + t mod size) if none
// passes; tau starts at 1 / (2 sqrt(k)) and moves by a fixed factor from the global count.
struct Micro {
  double tau;
  long k, t = 0;
  Micro(long n, double density)
      : k(std::max(1L, static_cast<long>(std::floor(density * static_cast<double>(n))))) {
    tau = 1.0 / (2.0 * std::sqrt(static_cast<double>(k)));
  }
  std::vector<int> choose(int r, int P, const std::vector<float>& x) const {
    const long n = static_cast<long>(x.size());
    const long p = (t % P + r) % P, q = n / P, rem = n % P;
    const long begin = p * q + std::min(p, rem), end = begin + q + (p < rem ? 1 : 0);
    std::vector<int> chosen;
    for (long i = begin; i < end; ++i)
      if (std::fabs(x[i]) >= static_cast<float>(tau)) chosen.push_back(static_cast<int>(i));
    if (chosen.empty() && end > begin)
      chosen.push_back(static_cast<int>(begin + t % (end - begin)));
    return chosen;
  }
  void advance(long sent) {
    const double ratio = static_cast<double>(sent) / static_cast<double>(k);
    tau *= ratio > 1.1 ? 1.005 : ratio > 0.909 ? 1.00125 : 0.995;
    ++t;
  }
};

}  // namespace st::test::diy_ref
