// Tutorial page 9 (docs/tutorial/09-allreduce.md): three ways to sum a buffer over P ranks,
// written with point-to-point messages only, timed against the MPI library's own
// MPI_Allreduce on the same buffers, and checked against it.
//   mpirun -np P allreduce_algorithms [--min-bytes 4096] [--max-bytes 4194304] [--reps 5]
// Rank 0 prints one JSON line per (algorithm, size): steps, bytes each rank sent, median ms.
// Exits 1 if an algorithm's sum differs from MPI_Allreduce's beyond float rounding.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Cost {
  int steps = 0;      // message rounds on the critical path
  double sent = 0.0;  // bytes this rank sent
};

// The [begin, end) element range of chunk c when n elements are cut into P chunks.
std::pair<int, int> chunk(int n, int P, int c) {
  const int q = n / P, r = n % P;
  const int begin = c * q + std::min(c, r);
  return {begin, begin + q + (c < r ? 1 : 0)};
}

// (P, this rank) of a communicator.
std::pair<int, int> group(MPI_Comm comm) {
  int P = 1, r = 0;
  MPI_Comm_size(comm, &P);
  MPI_Comm_rank(comm, &r);
  return {P, r};
}

void add(float* into, const float* from, int count) {
  for (int i = 0; i < count; ++i) into[i] += from[i];
}

// Ring: reduce-scatter (P-1 steps: pass a chunk right, add the chunk from the left; after
// them rank r holds the full sum of chunk r+1), then allgather (P-1 steps: pass the
// finished chunks around). Each rank sends 2 (P-1)/P of the buffer: bandwidth-optimal.
Cost ring(std::vector<float>& x, MPI_Comm comm) {
  const auto [P, r] = group(comm);
  const int n = static_cast<int>(x.size()), right = (r + 1) % P, left = (r + P - 1) % P;
  std::vector<float> in(n / P + 1);
  Cost cost;
  for (int s = 0; s < P - 1; ++s) {  // reduce-scatter
    const auto [sb, se] = chunk(n, P, (r - s + P) % P);
    const auto [rb, re] = chunk(n, P, (r - s - 1 + P) % P);
    MPI_Sendrecv(x.data() + sb, se - sb, MPI_FLOAT, right, 0, in.data(), re - rb, MPI_FLOAT, left,
                 0, comm, MPI_STATUS_IGNORE);
    add(x.data() + rb, in.data(), re - rb);
    cost.sent += 4.0 * (se - sb);
    ++cost.steps;
  }
  for (int s = 0; s < P - 1; ++s) {  // allgather
    const auto [sb, se] = chunk(n, P, (r + 1 - s + P) % P);
    const auto [rb, re] = chunk(n, P, (r - s + P) % P);
    MPI_Sendrecv(x.data() + sb, se - sb, MPI_FLOAT, right, 1, x.data() + rb, re - rb, MPI_FLOAT,
                 left, 1, comm, MPI_STATUS_IGNORE);
    cost.sent += 4.0 * (se - sb);
    ++cost.steps;
  }
  return cost;
}

// Recursive doubling (P a power of two): in round k, exchange the whole buffer with the
// rank whose number differs in bit k and add. log2 P steps, each sending all n: few
// latencies, many bytes. Other P: not run (MPI libraries fold the extra ranks in first).
Cost recursive_doubling(std::vector<float>& x, MPI_Comm comm) {
  const auto [P, r] = group(comm);
  const int n = static_cast<int>(x.size());
  std::vector<float> in(n);
  Cost cost;
  for (int mask = 1; mask < P; mask <<= 1) {
    MPI_Sendrecv(x.data(), n, MPI_FLOAT, r ^ mask, 2, in.data(), n, MPI_FLOAT, r ^ mask, 2, comm,
                 MPI_STATUS_IGNORE);
    add(x.data(), in.data(), n);  // a + b == b + a exactly: both partners agree
    cost.sent += 4.0 * n;
    ++cost.steps;
  }
  return cost;
}

// Tree: a binomial-tree reduce to rank 0, then a binomial-tree broadcast back.
// 2 ceil(log2 P) steps, each moving the whole buffer; rank 0's link carries it log2 P times.
Cost tree(std::vector<float>& x, MPI_Comm comm) {
  const auto [P, r] = group(comm);
  const int n = static_cast<int>(x.size());
  std::vector<float> in(n);
  Cost cost;
  int mask = 1;
  for (; mask < P; mask <<= 1) {  // reduce: at level k, ranks with bit k set send down
    if (r & mask) {
      MPI_Send(x.data(), n, MPI_FLOAT, r - mask, 3, comm);
      cost.sent += 4.0 * n;
      break;
    }
    if (r + mask < P) {
      MPI_Recv(in.data(), n, MPI_FLOAT, r + mask, 3, comm, MPI_STATUS_IGNORE);
      add(x.data(), in.data(), n);
    }
  }
  int levels = 0;
  for (int m = 1; m < P; m <<= 1) ++levels;
  // broadcast: the reverse of the reduce's pattern
  for (mask = 1 << (levels - 1); mask >= 1; mask >>= 1) {
    if (r % (2 * mask) == 0 && r + mask < P) {
      MPI_Send(x.data(), n, MPI_FLOAT, r + mask, 4, comm);
      cost.sent += 4.0 * n;
    } else if (r % (2 * mask) == mask) {
      MPI_Recv(x.data(), n, MPI_FLOAT, r - mask, 4, comm, MPI_STATUS_IGNORE);
    }
  }
  cost.steps = 2 * levels;
  return cost;
}

Cost library(std::vector<float>& x, MPI_Comm comm) {
  MPI_Allreduce(MPI_IN_PLACE, x.data(), static_cast<int>(x.size()), MPI_FLOAT, MPI_SUM, comm);
  return {};
}

// Rank r's buffer: values of order 1 that differ per rank and position.
void fill(std::vector<float>& x, int r) {
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 7 + static_cast<size_t>(r) * 13) % 101) / 50.0f - 1.0f;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int P, r;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  long min_bytes = 4096, max_bytes = 4 << 20;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--min-bytes") min_bytes = std::atol(argv[i + 1]);
    if (f == "--max-bytes") max_bytes = std::atol(argv[i + 1]);
    if (f == "--reps") reps = std::atoi(argv[i + 1]);
  }
  struct Algo {
    const char* name;
    Cost (*run)(std::vector<float>&, MPI_Comm);
  };
  const bool pow2 = (P & (P - 1)) == 0;
  std::vector<Algo> algos = {{"mpi", library}, {"ring", ring}, {"tree", tree}};
  if (pow2) algos.push_back({"recursive_doubling", recursive_doubling});
  int wrong = 0;
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const int n = static_cast<int>(bytes / 4);
    std::vector<float> want(n);
    fill(want, r);
    library(want, MPI_COMM_WORLD);
    for (const Algo& a : algos) {
      std::vector<double> ms;
      Cost cost;
      double err = 0.0;
      for (int rep = 0; rep < reps; ++rep) {
        std::vector<float> x(n);
        fill(x, r);
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        cost = a.run(x, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) * 1e3;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        ms.push_back(t);
        for (int i = 0; i < n; ++i) err = std::max(err, std::fabs(double(x[i]) - double(want[i])));
      }
      MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, &cost.sent, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      std::sort(ms.begin(), ms.end());
      const bool ok = err <= 1e-5 * P;
      wrong += ok ? 0 : 1;
      if (r == 0)
        std::printf(
            "{\"algo\":\"%s\",\"ranks\":%d,\"bytes\":%ld,\"steps\":%d,\"sent_bytes\":%.0f,"
            "\"median_ms\":%.4f,\"max_error\":%.3g,\"ok\":%s}\n",
            a.name, P, bytes, cost.steps, cost.sent, ms[ms.size() / 2], err, ok ? "true" : "false");
    }
  }
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
