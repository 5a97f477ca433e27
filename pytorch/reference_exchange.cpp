// st_torch_reference: the CLI's bucket exchange (train/exchange_setup's SparsifyHook, over
// MPI) on given per-rank buckets, for the equality test of the DDP comm hook
// (tests/pytorch/hook_equality_test.py). Under mpirun -np P:
//   st_torch_reference DIR NAME METHOD DENSITY [key=value ...]
// reads DIR/grads_r<rank>.bin (float32: ITERS x the buckets of DIR/buckets.txt: a line
// "ITERS", then a line per bucket with its tensors' shapes, "30x40 13x100"), exchanges
// every bucket at every iteration (its tensors as parameters whose gradients are views of
// it, as the reducer's buckets) and writes each exchanged bucket
// in order, then each bucket's residual, to DIR/<NAME>_r<rank>.bin.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/error.h"
#include "layers/param.h"
#include "train/config.h"
#include "train/exchange_setup.h"

namespace {

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  ST_CHECK(in.good(), "cannot read ", path);
  const auto bytes = static_cast<size_t>(in.tellg());
  std::vector<float> v(bytes / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(bytes));
  return v;
}

int run(int argc, char** argv) {
  ST_CHECK(argc >= 5, "usage: st_torch_reference DIR NAME METHOD DENSITY [key=value ...]");
  const std::string dir = argv[1], name = argv[2];
  st::TrainConfig c;
  c.sparsifier = argv[3];
  c.density = std::stod(argv[4]);
  for (int i = 5; i < argc; ++i) {
    const std::string kv = argv[i];
    const size_t eq = kv.find('=');
    ST_CHECK(eq != std::string::npos, "expected key=value, got ", kv);
    c.sparsifier_params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto comm = st::make_communicator("mpi", "cpu");
  st::ExchangeSetup setup(c, *comm);
  st::SparsifyHook& hook = *setup.sparsify();
  std::ifstream layout(dir + "/buckets.txt");
  int64_t iters = 0;
  std::string line;
  std::getline(layout, line);
  iters = std::stoll(line);
  std::vector<st::Bucket> buckets;
  std::vector<std::vector<st::Shape>> shapes;
  int64_t total = 0;
  while (std::getline(layout, line)) {
    std::istringstream words(line);
    std::string word;
    shapes.emplace_back();
    int64_t n = 0;
    while (words >> word) {
      std::vector<int64_t> dims;
      std::istringstream parts(word);
      for (std::string d; std::getline(parts, d, 'x');) dims.push_back(std::stoll(d));
      shapes.back().emplace_back(dims);
      n += shapes.back().back().numel();
    }
    buckets.push_back({static_cast<int>(buckets.size()), total, n, {}});
    total += n;
  }
  std::vector<std::vector<st::Param>> params(buckets.size());
  const std::string rank = std::to_string(comm->rank());
  const std::vector<float> grads = read_floats(dir + "/grads_r" + rank + ".bin");
  ST_CHECK(static_cast<int64_t>(grads.size()) == iters * total, dir, ": grads_r", rank,
           ".bin holds ", grads.size(), " floats, expected ", iters * total);
  std::ofstream out(dir + "/" + name + "_r" + rank + ".bin", std::ios::binary);
  auto write = [&](const st::Tensor& t) {
    out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  };
  for (int64_t t = 0; t < iters; ++t)
    for (const st::Bucket& b : buckets) {
      const auto* src = grads.data() + t * total + b.offset;
      st::Tensor g = st::Tensor::from_vector(std::vector<float>(src, src + b.numel), {b.numel});
      st::Bucket with_params = b;
      auto& ps = params[static_cast<size_t>(b.id)];
      ps.resize(shapes[static_cast<size_t>(b.id)].size());
      int64_t at = 0;
      for (size_t i = 0; i < ps.size(); ++i) {
        const st::Shape& shape = shapes[static_cast<size_t>(b.id)][i];
        ps[i].grad = g.slice_flat(at, shape);
        at += shape.numel();
        with_params.params.push_back(&ps[i]);
      }
      hook.exchange(with_params, g, *comm, t);
      write(g);
    }
  for (const st::Bucket& b : buckets) {
    const st::Tensor r = hook.residual(b.id);
    write(r.defined() ? r : st::Tensor::zeros({b.numel}));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
