// One training step of the LSTM language model (Zaremba et al. 2014 small model as in the
// PyTorch word_language_model example): embedding -> dropout -> 2-layer LSTM -> dropout ->
// decoder -> softmax cross-entropy, backward, local gradient-norm clip, SGD. Random
// tokens, the carried state detached between steps. Prints a JSON line with the median
// step time and its parts; bench/torch_lstm_lm.py --step is the PyTorch peer.
//
//   lstm_step_bench [--vocab 10000] [--emsize 200] [--hidden 200] [--layers 2] [--bptt 35]
//                   [--batch 20] [--dropout 0.2] [--tied] [--reps 20] [--threads 2]
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "core/timer.h"
#include "layers/flat_params.h"
#include "models/lstm_lm.h"
#include "optim/clip.h"
#include "optim/sgd.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  st::set_openmp_env_defaults(argv);  // the CLI's OpenMP wait policy, so steps time alike
  st::LstmLmConfig cfg;
  int64_t bptt = 35, batch = 20;
  int reps = 20, threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "lstm_step_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--vocab")
      cfg.vocab = std::atoll(next());
    else if (a == "--emsize")
      cfg.emsize = std::atoll(next());
    else if (a == "--hidden")
      cfg.hidden = std::atoll(next());
    else if (a == "--layers")
      cfg.layers = std::atoi(next());
    else if (a == "--bptt")
      bptt = std::atoll(next());
    else if (a == "--batch")
      batch = std::atoll(next());
    else if (a == "--dropout")
      cfg.dropout = std::strtof(next(), nullptr);
    else if (a == "--tied")
      cfg.tied = true;
    else if (a == "--reps")
      reps = std::atoi(next());
    else if (a == "--threads")
      threads = std::atoi(next());
    else {
      std::fprintf(stderr, "lstm_step_bench: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  try {
    st::set_num_threads(threads);
    st::Rng rng(0);
    st::LstmLm model(cfg, rng);
    st::FlatParams flat(model, st::Device::cpu());
    st::SgdOptions so;
    so.lr = 20.0f;
    st::Sgd sgd(flat.params(), so);
    st::LmCrossEntropy ce;
    std::vector<int32_t> ids(bptt * batch), next_ids(bptt * batch);
    st::Rng data(1);
    std::vector<double> step, fwd, loss_t, bwd, opt;
    for (int r = 0; r < reps + 3; ++r) {
      for (auto& v : ids) v = static_cast<int32_t>(data.below(static_cast<uint32_t>(cfg.vocab)));
      for (auto& v : next_ids)
        v = static_cast<int32_t>(data.below(static_cast<uint32_t>(cfg.vocab)));
      st::Tensor x = st::Tensor::from_vector_i32(ids, {bptt, batch});
      st::Tensor y = st::Tensor::from_vector_i32(next_ids, {bptt * batch});
      st::Timer total, t;
      st::Tensor logits = model.forward(x);
      const double f = t.ms();
      t.reset();
      ce.forward(logits, y);
      st::Tensor g = ce.backward();
      const double l = t.ms();
      t.reset();
      flat.zero_grads();
      model.backward(g);
      const double b = t.ms();
      t.reset();
      st::clip_grad_norm(flat.params(), 0.25);
      sgd.step();
      model.detach_state();
      const double o = t.ms();
      if (r >= 3) {  // warm-up: first-touch allocations
        step.push_back(total.ms());
        fwd.push_back(f);
        loss_t.push_back(l);
        bwd.push_back(b);
        opt.push_back(o);
      }
    }
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    std::printf(
        "{\"bench\":\"lstm_lm_step\",\"impl\":\"sparsetrain\",\"vocab\":%ld,\"emsize\":%ld,"
        "\"hidden\":%ld,\"layers\":%d,\"bptt\":%ld,\"batch\":%ld,\"threads\":%d,\"reps\":%d,"
        "\"step_ms\":%.3f,\"fwd_ms\":%.3f,\"loss_ms\":%.3f,\"bwd_ms\":%.3f,\"opt_ms\":%.3f,"
        "\"peak_rss_mb\":%.1f}\n",
        static_cast<long>(cfg.vocab), static_cast<long>(cfg.emsize), static_cast<long>(cfg.hidden),
        cfg.layers, static_cast<long>(bptt), static_cast<long>(batch), threads, reps, median(step),
        median(fwd), median(loss_t), median(bwd), median(opt), u.ru_maxrss / 1024.0);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lstm_step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
