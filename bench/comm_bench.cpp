// Collective time vs message size over the project's Communicator, to fit the
// alpha-beta link model of scripts/scaling_model.py (alpha = latency per message step,
// beta = seconds per byte). Run it under mpirun, optionally inside scripts/netns_run.sh
// for an emulated link. Rank 0 prints one JSON line per (op, size):
//   {"bench":"comm","op":"allreduce","ranks":4,"bytes":...,"median_ms":...,...}
// Ops, with `bytes` = the payload one rank contributes (float32/int32 elements x 4):
//   allreduce   the Communicator's allreduce (sum) of a `bytes` buffer on every rank (the
//               dense exchange: on 2 ranks a swap of the buffers, else MPI_Iallreduce);
//   mpi_allreduce  the peer: Open MPI's MPI_Iallreduce in place, as the library picks its
//               algorithm, waited for with MPI_Wait; with both ops a "comm_ratio" line per
//               size gives allreduce / mpi_allreduce;
//   allgatherv  MPI_Allgatherv where rank r sends m_r bytes, m_r spread by --skew around
//               `bytes` (total = P x bytes), as the allgather-sum pattern (SIDCo, DGC, ...);
//   padded      what union-allreduce does for the index exchange: allgather of the counts,
//               then an allgather of max_r m_r bytes per rank (MiCRO, ExDyna, Top-k).
// A repetition's time is the maximum over ranks (every rank waits for the slowest);
// reps stop after --budget seconds per size (at least --min-reps), the same on all ranks.
//   comm_bench [--ops allreduce,allgatherv,padded] [--min-bytes 1024] [--max-bytes 16777216]
//              [--factor 4] [--budget 3] [--min-reps 3] [--max-reps 50] [--skew 0.5]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_env.h"
#include "core/timer.h"

namespace {

struct Options {
  std::vector<std::string> ops{"allreduce", "allgatherv", "padded"};
  static bool known(const std::string& op) {
    return op == "allreduce" || op == "mpi_allreduce" || op == "allgatherv" || op == "padded";
  }
  int64_t min_bytes = 1024, max_bytes = 16 << 20;
  double factor = 4.0, budget_s = 3.0, skew = 0.5;
  int min_reps = 3, max_reps = 50, warmup = 1;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("comm_bench: flag " + f + " needs a value");
    const char* v = argv[i + 1];
    if (f == "--ops")
      o.ops = split(v);
    else if (f == "--min-bytes")
      o.min_bytes = std::atoll(v);
    else if (f == "--max-bytes")
      o.max_bytes = std::atoll(v);
    else if (f == "--factor")
      o.factor = std::atof(v);
    else if (f == "--budget")
      o.budget_s = std::atof(v);
    else if (f == "--skew")
      o.skew = std::atof(v);
    else if (f == "--min-reps")
      o.min_reps = std::atoi(v);
    else if (f == "--max-reps")
      o.max_reps = std::atoi(v);
    else if (f == "--warmup")
      o.warmup = std::atoi(v);
    else
      throw std::runtime_error("comm_bench: unknown flag " + f +
                               " (flags: --ops --min-bytes --max-bytes --factor --budget --skew "
                               "--min-reps --max-reps --warmup)");
  }
  for (const std::string& op : o.ops)
    if (!Options::known(op))
      throw std::runtime_error("comm_bench: unknown op " + op +
                               " (ops: allreduce, mpi_allreduce, allgatherv, padded)");
  if (o.min_bytes < 4 || o.max_bytes < o.min_bytes || o.factor <= 1.0 || o.min_reps < 1 ||
      o.skew < 0.0 || o.skew >= 1.0)
    throw std::runtime_error(
        "comm_bench: need 4 <= --min-bytes <= --max-bytes, --factor > 1, --min-reps >= 1, "
        "0 <= --skew < 1");
  return o;
}

// Rank r's element count for a mean of m elements: a linear spread from (1 - skew) m on
// rank 0 to (1 + skew) m on rank P-1, so the padded allgather has something to pad.
std::vector<int64_t> spread_counts(int64_t m, int P, double skew) {
  std::vector<int64_t> c(P, m);
  if (P == 1) return c;
  for (int r = 0; r < P; ++r) {
    const double f = 1.0 + skew * (2.0 * r / (P - 1) - 1.0);
    c[r] = std::max<int64_t>(1, static_cast<int64_t>(f * static_cast<double>(m) + 0.5));
  }
  return c;
}

// Buffers for one (op, size), allocated outside the timed region.
struct Case {
  std::string op;
  int64_t m = 0;  // mean elements per rank
  std::vector<int64_t> counts;
  st::Tensor a, b, cnt_in, cnt_out;

  Case(const std::string& op_, int64_t m_, st::Communicator& comm, double skew) : op(op_), m(m_) {
    const int P = comm.size();
    if (reduces()) {
      a = st::Tensor::full({m}, 1.0f);
      return;
    }
    counts = spread_counts(m, P, skew);
    int64_t total = 0, maxc = 0;
    for (int64_t c : counts) {
      total += c;
      maxc = std::max(maxc, c);
    }
    if (op == "allgatherv") {
      a = st::Tensor::full({counts[comm.rank()]}, 1.0f);
      b = st::Tensor::empty({total});
    } else {
      a = st::Tensor::zeros({maxc}, st::DType::I32);
      b = st::Tensor::empty({maxc * P}, st::DType::I32);
      cnt_in = st::Tensor::zeros({1}, st::DType::I64);
      cnt_out = st::Tensor::zeros({P}, st::DType::I64);
    }
  }

  bool reduces() const { return op == "allreduce" || op == "mpi_allreduce"; }
  // Bytes every rank ends with: the reduced buffer, or all ranks' (padded) contributions.
  int64_t result_bytes() const { return 4 * (reduces() ? a.numel() : b.numel()); }

  void run(st::Communicator& comm) {
    if (op == "allreduce") {
      comm.allreduce(a);
    } else if (op == "mpi_allreduce") {
      MPI_Request req = MPI_REQUEST_NULL;
      MPI_Iallreduce(MPI_IN_PLACE, a.raw(), static_cast<int>(a.numel()), MPI_FLOAT, MPI_SUM,
                     MPI_COMM_WORLD, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else if (op == "allgatherv") {
      comm.allgatherv(a, b, counts);
    } else {
      // Counts first (the receivers need max k), then the padded indices.
      cnt_in.data<int64_t>()[0] = counts[comm.rank()];
      comm.allgather(cnt_in, cnt_out);
      comm.allgather(a, b);
    }
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    st::set_mpi_env_defaults();  // the Open MPI settings sparsetrain runs with (comm/mpi_env.h)
    auto comm = st::make_communicator("auto");
    const int P = comm->size();
    std::vector<int64_t> sizes;
    for (double s = static_cast<double>(o.min_bytes);
         s <= static_cast<double>(o.max_bytes) * 1.0001; s *= o.factor)
      sizes.push_back(static_cast<int64_t>(s) / 4 * 4);
    std::map<std::pair<std::string, int64_t>, double> medians;
    for (const std::string& op : o.ops) {
      for (int64_t bytes : sizes) {
        Case c(op, bytes / 4, *comm, o.skew);
        for (int w = 0; w < o.warmup; ++w) c.run(*comm);
        std::vector<double> times;
        double spent = 0.0;
        while (static_cast<int>(times.size()) < o.max_reps &&
               (static_cast<int>(times.size()) < o.min_reps || spent < o.budget_s)) {
          comm->barrier();
          st::Timer t;
          c.run(*comm);
          // The slowest rank defines the collective's time; every rank gets the same value,
          // so all of them take the same stop decision.
          const double s = comm->allreduce_scalar(t.seconds(), st::ReduceOp::Max);
          times.push_back(s);
          spent += s;
        }
        const double mid = median(times);
        medians[{op, bytes}] = mid;
        if (comm->rank() == 0) {
          std::printf(
              "{\"bench\":\"comm\",\"op\":\"%s\",\"ranks\":%d,\"bytes\":%lld,"
              "\"result_bytes\":%lld,\"skew\":%.3f,\"reps\":%zu,\"median_ms\":%.4f,"
              "\"min_ms\":%.4f}\n",
              op.c_str(), P, static_cast<long long>(bytes),
              static_cast<long long>(c.result_bytes()), c.reduces() ? 0.0 : o.skew, times.size(),
              1e3 * mid, 1e3 * *std::min_element(times.begin(), times.end()));
          std::fflush(stdout);
        }
      }
    }
    for (int64_t bytes : sizes) {
      const auto ours = medians.find({"allreduce", bytes});
      const auto peer = medians.find({"mpi_allreduce", bytes});
      if (comm->rank() == 0 && ours != medians.end() && peer != medians.end())
        std::printf(
            "{\"bench\":\"comm_ratio\",\"ranks\":%d,\"bytes\":%lld,"
            "\"allreduce_over_mpi_allreduce\":%.3f}\n",
            P, static_cast<long long>(bytes), ours->second / peer->second);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
