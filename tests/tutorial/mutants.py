#!/usr/bin/python3
"""Wrong answers to the tutorial's exercises, and a check that each exercise test catches
every one of them (ctest tutorial_mutants).

  mutants.py generate SOURCE_ROOT OUT_DIR
      writes copies of the exercises' source files into OUT_DIR (src/... and include/...)
      in which every wrong answer below sits next to the right one, chosen at run time by
      the environment variable ST_TUTORIAL_MUTANT (tests/tutorial/mutant_switch.cpp);
      the build links them into `tutorial_mutant` in place of the library's objects
  mutants.py run TUTORIAL_MUTANT SPARSETRAIN ALLREDUCE_MUTANT BUILD_MUTANT
      runs each exercise's test once per wrong answer (on 2, 3 and 4 ranks where ranks
      matter, stopping at the first failure) and fails unless the test fails for every
      wrong answer and passes with none; step 8's wrong answers are patched copies of
      scripts/scaling_model.py; step 9's run page 9's program built from the switched
      copy of docs/tutorial/diy/allreduce_algorithms.cpp (ALLREDUCE_MUTANT), which checks
      every algorithm against MPI_Allreduce on 2, 3 and 4 ranks; steps "diy1" to "diy6"
      (build it yourself) run tests/tutorial/build_test.cpp built from the switched copies
      of docs/tutorial/diy/step*.cpp (BUILD_MUTANT) on 2, 3 and 4 ranks
  mutants.py list
      prints the wrong answers, one a line

A wrong answer is a list of edits (text of the real source -> replacement). Each text must
occur exactly once in its file, so a change of the real code that moves it fails the build
here instead of silently testing nothing.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

# (name, step, why, [(file, text, replacement)])
MUTANTS = [
    # ---- step 1: Linear::backward_cpu
    ("announce-before-adding", 1, "announces the weight before dW += dy^T x", [
        ("layers/linear.cpp",
         "  cpu::gemm(true, false, out_, in_, n, 1.0f, g, x_.f32(), 1.0f, weight_->grad.f32());\n",
         "  if (!tied_) weight_->mark_grad_ready();\n"
         "  cpu::gemm(true, false, out_, in_, n, 1.0f, g, x_.f32(), 1.0f, weight_->grad.f32());\n"),
        ("layers/linear.cpp", "  if (!tied_) weight_->mark_grad_ready();\n", ""),
    ]),
    ("overwrite-weight-gradient", 1, "dW = dy^T x (beta 0) instead of +=", [
        ("layers/linear.cpp",
         "  cpu::gemm(true, false, out_, in_, n, 1.0f, g, x_.f32(), 1.0f, weight_->grad.f32());\n",
         "  cpu::gemm(true, false, out_, in_, n, 1.0f, g, x_.f32(), 0.0f, weight_->grad.f32());\n"),
    ]),
    ("bias-last-row-only", 1, "db = dy of the last row instead of the sum over the batch", [
        ("layers/linear.cpp",
         "      for (int64_t j = 0; j < out_; ++j) db[j] += g[i * out_ + j];\n",
         "      for (int64_t j = 0; j < out_; ++j) db[j] = g[i * out_ + j];\n"),
    ]),
    ("bias-announced-twice", 1, "announces the bias twice", [
        ("layers/linear.cpp", "    bias_->mark_grad_ready();\n",
         "    bias_->mark_grad_ready();\n    bias_->mark_grad_ready();\n"),
    ]),
    # ---- step 2: AllreduceHook::exchange
    ("divide-by-two", 2, "hard-coded / 2 instead of / P", [
        ("comm/reducer.cpp", "    scale_inplace(grads, 1.0f / static_cast<float>(comm.size()));\n",
         "    scale_inplace(grads, 1.0f / 2.0f);\n"),
    ]),
    ("sum-not-average", 2, "the sum, not divided by P", [
        ("comm/reducer.cpp", "    scale_inplace(grads, 1.0f / static_cast<float>(comm.size()));\n", ""),
    ]),
    ("divide-by-p-minus-one", 2, "divides by P - 1", [
        ("comm/reducer.cpp", "    scale_inplace(grads, 1.0f / static_cast<float>(comm.size()));\n",
         "    scale_inplace(grads, 1.0f / static_cast<float>(comm.size() - 1));\n"),
    ]),
    ("max-not-sum", 2, "allreduce with Max, then / P", [
        ("comm/reducer.cpp", "    comm.allreduce(grads, ReduceOp::Sum);\n",
         "    comm.allreduce(grads, ReduceOp::Max);\n"),
    ]),
    # ---- step 3: Reducer::on_grad_ready
    ("launch-out-of-order", 3, "launches each bucket when it completes, not in bucket order", [
        ("comm/reducer.cpp",
         "  while (next_launch_ < static_cast<int>(order_.size()) && pending_[order_[next_launch_]] == 0)\n"
         "    launch(order_[next_launch_++]);\n",
         "  launch(b);\n  next_launch_ = std::max(next_launch_, b + 1);\n"),
    ]),
    ("no-release-of-waiting", 3, "launches only the bucket just completed if it is next", [
        ("comm/reducer.cpp",
         "  while (next_launch_ < static_cast<int>(order_.size()) && pending_[order_[next_launch_]] == 0)\n"
         "    launch(order_[next_launch_++]);\n",
         "  if (b == order_[next_launch_]) launch(order_[next_launch_++]);\n"),
    ]),
    ("launch-one-short", 3, "launches a bucket that still misses one gradient", [
        ("comm/reducer.cpp",
         "  while (next_launch_ < static_cast<int>(order_.size()) && pending_[order_[next_launch_]] == 0)\n"
         "    launch(order_[next_launch_++]);\n",
         "  while (next_launch_ < static_cast<int>(order_.size()) && pending_[order_[next_launch_]] <= 1)\n"
         "    launch(order_[next_launch_++]);\n"),
    ]),
    ("countdown-off-by-one", 3, "calls a bucket ready one gradient early", [
        ("comm/reducer.cpp", "  if (--pending_[b] > 0) return;\n", "  if (--pending_[b] > 1) return;\n"),
    ]),
    # ---- step 4: --no-overlap (defer_until_finalize)
    ("ignore-defer", 4, "launches during backward despite defer_until_finalize", [
        ("comm/reducer.cpp", "  if (opt_.defer_until_finalize) return;\n", ""),
    ]),
    ("finalize-launches-nothing", 4, "finalize() waits but never launches the deferred buckets", [
        ("comm/reducer.cpp",
         "  while (next_launch_ < static_cast<int>(order_.size())) launch(order_[next_launch_++]);\n",
         "  next_launch_ = static_cast<int>(order_.size());\n"),
    ]),
    ("finalize-reverse-order", 4, "finalize() launches the deferred buckets last first", [
        ("comm/reducer.cpp",
         "  while (next_launch_ < static_cast<int>(order_.size())) launch(order_[next_launch_++]);\n",
         "  for (int i = static_cast<int>(order_.size()) - 1; i >= next_launch_; --i) launch(order_[i]);\n"
         "  next_launch_ = static_cast<int>(order_.size());\n"),
    ]),
    ("defer-without-ready-stamp", 4, "deferred buckets never record their ready time", [
        ("comm/reducer.cpp", "  stamp(b, &BucketTimes::ready_ms);  // this was the bucket's last gradient\n",
         "  if (!opt_.defer_until_finalize) stamp(b, &BucketTimes::ready_ms);\n"),
    ]),
    # ---- step 5: error feedback
    ("residual-not-added", 5, "selects from the gradient alone: x = g, the residual dropped", [
        ("sparsify/sparsify_hook.cpp", "  ops.axpy(1.0f, b.g, {0, n}, b.x);\n",
         "  ops.fill(b.x, {0, n}, 0.0f);\n  ops.axpy(1.0f, b.g, {0, n}, b.x);\n"),
    ]),
    ("residual-kept-where-sent", 5, "does not clear the residual at the union", [
        ("sparsify/exchange_patterns.cpp",
         "  ops.zero_at(s.result, b.x);  // every rank transmitted x at every union position\n", ""),
    ]),
    ("residual-cleared-at-own-choice", 5, "clears the residual only where this rank chose", [
        ("sparsify/exchange_patterns.cpp",
         "  ops.zero_at(s.result, b.x);  // every rank transmitted x at every union position\n",
         "  ops.zero_at(s.selection.indices, b.x);\n"),
    ]),
    ("sparse-sum-not-average", 5, "applies the sum at the union, not divided by P", [
        ("sparsify/exchange_patterns.cpp",
         "  ops.scatter_scaled(s.result, s.values, 1.0f / static_cast<float>(P), b.g);\n",
         "  ops.scatter_scaled(s.result, s.values, 1.0f, b.g);\n"),
    ]),
    # ---- step 6: partitions and MiCRO's threshold step
    ("no-rotation", 6, "rank r always owns partition r", [
        ("sparsify/partition_math.h", "  return static_cast<int>((t % P + rank) % P);\n",
         "  return rank % P + 0 * static_cast<int>(t);\n"),
    ]),
    ("rotate-backwards", 6, "rank r owns partition (r - t) mod P", [
        ("sparsify/partition_math.h", "  return static_cast<int>((t % P + rank) % P);\n",
         "  return static_cast<int>(((rank - t % P) % P + P) % P);\n"),
    ]),
    ("remainder-to-last", 6, "the last partition takes the remainder (3, 3, 4)", [
        ("sparsify/partition_math.h",
         "  r.begin = p * q + (p < rem ? p : rem);\n  r.end = r.begin + q + (p < rem ? 1 : 0);\n",
         "  r.begin = p * q;\n  r.end = p == P - 1 ? n : r.begin + q + 0 * rem;\n"),
    ]),
    ("threshold-steps-swapped", 6, "too many selected -> threshold down", [
        ("sparsify/partition_math.h",
         "  if (ratio > r.hi) return tau * r.up;\n  if (ratio > r.lo) return tau * r.mid;\n"
         "  return tau * r.down;\n",
         "  if (ratio > r.hi) return tau * r.down;\n  if (ratio > r.lo) return tau * r.mid;\n"
         "  return tau * r.up;\n"),
    ]),
    ("threshold-no-band", 6, "inside the band the threshold stays put", [
        ("sparsify/partition_math.h",
         "  if (ratio > r.hi) return tau * r.up;\n  if (ratio > r.lo) return tau * r.mid;\n"
         "  return tau * r.down;\n",
         "  if (ratio > r.hi) return tau * r.up;\n  if (ratio > r.lo) return tau;\n"
         "  return tau * r.down;\n"),
    ]),
    # ---- step 7: the padding overhead and SIDCo's exponential threshold
    ("padding-max-minus-min", 7, "padding = (max - min) / sum", [
        ("sparsify/exchange_patterns.cpp",
         "  st.padding_overhead = sum > 0 ? static_cast<double>(st.padded_slots) / sum - 1.0 : 0.0;\n",
         "  int64_t mn = mx;\n  for (int64_t c : counts) mn = std::min(mn, c);\n"
         "  st.padding_overhead = sum > 0 ? static_cast<double>(mx - mn) / sum : 0.0;\n"),
    ]),
    ("padding-without-minus-one", 7, "padding = P max / sum (the ratio, not the overhead)", [
        ("sparsify/exchange_patterns.cpp",
         "  st.padding_overhead = sum > 0 ? static_cast<double>(st.padded_slots) / sum - 1.0 : 0.0;\n",
         "  st.padding_overhead = sum > 0 ? static_cast<double>(st.padded_slots) / sum : 0.0;\n"),
    ]),
    ("padding-share-of-sent", 7, "padding = (P max - sum) / (P max): a share of what is sent", [
        ("sparsify/exchange_patterns.cpp",
         "  st.padding_overhead = sum > 0 ? static_cast<double>(st.padded_slots) / sum - 1.0 : 0.0;\n",
         "  st.padding_overhead =\n      sum > 0 ? static_cast<double>(st.padded_slots - sum) / "
         "static_cast<double>(st.padded_slots) : 0.0;\n"),
    ]),
    ("sidco-sign", 7, "eta = mean ln(delta) (negative)", [
        ("sparsify/sidco_fit.cpp", "  return -mean * std::log(delta);\n",
         "  return mean * std::log(delta);\n"),
    ]),
    ("sidco-over-mean", 7, "eta = -ln(delta) / mean", [
        ("sparsify/sidco_fit.cpp", "  return -mean * std::log(delta);\n",
         "  return -std::log(delta) / mean;\n"),
    ]),
    ("sidco-log10", 7, "eta = -mean log10(delta)", [
        ("sparsify/sidco_fit.cpp", "  return -mean * std::log(delta);\n",
         "  return -mean * std::log10(delta);\n"),
    ]),
    # ---- step 10: the 16-bit exchange
    ("sixteen-bit-sum", 10, "16-bit exchange: packs without dividing by P (the sum)", [
        ("comm/reducer.cpp", "  pack_half_on(wire_, grads, 1.0f / static_cast<float>(p), mine);\n",
         "  pack_half_on(wire_, grads, 1.0f, mine);\n"),
    ]),
    ("sixteen-bit-divide-by-two", 10, "16-bit exchange: divides by 2, not P", [
        ("comm/reducer.cpp", "  pack_half_on(wire_, grads, 1.0f / static_cast<float>(p), mine);\n",
         "  pack_half_on(wire_, grads, 0.5f + 0.0f * static_cast<float>(p), mine);\n"),
    ]),
    ("sixteen-bit-own-only", 10, "16-bit exchange: adds only this rank's contribution", [
        ("comm/reducer.cpp",
         "  for (int64_t r = 0; r < p; ++r) add_half_on(wire_, all, r * words, grads);\n",
         "  add_half_on(wire_, all, comm.rank() * words, grads);\n"),
    ]),
    # ---- step 11: the ready event (StreamPosition)
    ("wait-does-nothing", 11, "StreamPosition::wait returns at once", [
        ("core/stream_sync.cpp", "  if (wait_) wait_(event_.get());\n", ""),
    ]),
    ("event-on-another-stream", 11, "the event is recorded on a fresh stream, not the caller's", [
        ("core/stream_sync.cpp", "    ev->record(emu::current_stream(d.index));\n",
         "    emu::Stream other(d.index);\n    ev->record(other);\n"),
    ]),
    # ---- step 12: the learning-rate warm-up (LrSchedule::warmup_iterations, warmup_lr)
    ("warmup-ends-one-step-late", 12, "the ramp divides by W, not W - 1, so it never reaches the base", [
        ("optim/lr_schedule.cpp",
         "  return start + (base_lr - start) * static_cast<double>(k) / static_cast<double>(warmup_iters - 1);\n",
         "  return start + (base_lr - start) * static_cast<double>(k) / static_cast<double>(warmup_iters);\n"),
    ]),
    ("warmup-starts-at-zero", 12, "the ramp starts at 0: the first step does not move the weights", [
        ("optim/lr_schedule.cpp",
         "  return start + (base_lr - start) * static_cast<double>(k) / static_cast<double>(warmup_iters - 1);\n",
         "  return base_lr * static_cast<double>(k) / static_cast<double>(warmup_iters - 1);\n"),
    ]),
    ("warmup-whole-epochs", 12, "the warm-up's length rounded to whole epochs", [
        ("optim/lr_schedule.cpp",
         "  return std::llround(warmup_epochs * static_cast<double>(iters_per_epoch));\n",
         "  return std::llround(warmup_epochs) * iters_per_epoch;\n"),
    ]),
    ("warmup-per-epoch", 12, "the ramp steps once per epoch instead of every iteration", [
        ("optim/lr_schedule.cpp",
         "  if (k < warmup_iters) return static_cast<float>(warmup_lr(k, warmup_iters));\n",
         "  if (k < warmup_iters) return static_cast<float>(warmup_lr(epoch * iters_per_epoch, warmup_iters));\n"),
    ]),
    # ---- step 9: the ring allreduce (docs/tutorial/diy/allreduce_algorithms.cpp)
    ("ring-no-allgather", 9, "the ring stops after its reduce-scatter", [
        ("docs/tutorial/diy/allreduce_algorithms.cpp",
         "    MPI_Sendrecv(x.data() + sb, se - sb, MPI_FLOAT, right, 1, x.data() + rb, re - rb, "
         "MPI_FLOAT,\n                 left, 1, comm, MPI_STATUS_IGNORE);\n", ""),
    ]),
    ("ring-forgets-to-add", 9, "the reduce-scatter receives a chunk but does not add it", [
        ("docs/tutorial/diy/allreduce_algorithms.cpp",
         "    add(x.data() + rb, in.data(), re - rb);\n", ""),
    ]),
    ("ring-wrong-direction", 9, "the reduce-scatter sends left and receives from the right", [
        ("docs/tutorial/diy/allreduce_algorithms.cpp",
         "    MPI_Sendrecv(x.data() + sb, se - sb, MPI_FLOAT, right, 0, in.data(), re - rb, "
         "MPI_FLOAT, left,\n                 0, comm, MPI_STATUS_IGNORE);\n",
         "    MPI_Sendrecv(x.data() + sb, se - sb, MPI_FLOAT, left, 0, in.data(), re - rb, "
         "MPI_FLOAT, right,\n                 0, comm, MPI_STATUS_IGNORE);\n"),
    ]),
    # ---- build it yourself (docs/tutorial/diy/), steps "diy1" to "diy6": tests/tutorial/build_test.cpp
    ("diy-naive-divide-by-two", "diy1", "the naive exchange divides by 2, not P", [
        ("docs/tutorial/diy/step1_naive_allreduce.cpp", "    for (float& v : g) v /= static_cast<float>(P);\n",
         "    for (float& v : g) v /= 2.0f;\n"),
    ]),
    ("diy-naive-sum", "diy1", "the naive exchange leaves the sum", [
        ("docs/tutorial/diy/step1_naive_allreduce.cpp", "    for (float& v : g) v /= static_cast<float>(P);\n", ""),
    ]),
    ("diy-plan-no-first-cap", "diy2", "every bucket cut at the cap, the first one too", [
        ("docs/tutorial/diy/step2_buckets.cpp",
         "    if (plan.empty() || (!plan.back().params.empty() &&\n"
         "                         4.0 * static_cast<double>(plan.back().numel + sizes[p]) > cap))\n"
         "      plan.emplace_back();\n",
         "    if (plan.empty() || (!plan.back().params.empty() &&\n"
         "                         4.0 * static_cast<double>(plan.back().numel + sizes[p]) > cap_bytes))\n"
         "      plan.emplace_back();\n"),
    ]),
    ("diy-plan-cap-in-floats", "diy2", "the cap compared with a count of floats, not bytes", [
        ("docs/tutorial/diy/step2_buckets.cpp",
         "    if (plan.empty() || (!plan.back().params.empty() &&\n"
         "                         4.0 * static_cast<double>(plan.back().numel + sizes[p]) > cap))\n"
         "      plan.emplace_back();\n",
         "    if (plan.empty() || (!plan.back().params.empty() &&\n"
         "                         1.0 * static_cast<double>(plan.back().numel + sizes[p]) > cap))\n"
         "      plan.emplace_back();\n"),
    ]),
    ("diy-bucket-divide-by-two", "diy2", "a bucket's sum divided by 2, not P", [
        ("docs/tutorial/diy/step2_buckets.cpp",
         "    std::transform(packed.begin() + at, packed.begin() + at + static_cast<long>(grads[p].size()),\n"
         "                   grads[p].begin(), [P](float v) { return v / static_cast<float>(P); });\n",
         "    std::transform(packed.begin() + at, packed.begin() + at + static_cast<long>(grads[p].size()),\n"
         "                   grads[p].begin(), [P](float v) { return v / (P > 0 ? 2.0f : 1.0f); });\n"),
    ]),
    ("diy-launch-out-of-order", "diy3", "launches each bucket when it completes, not in bucket order", [
        ("docs/tutorial/diy/step3_overlap.cpp",
         "  while (next_launch_ < static_cast<int>(plan_.size()) && pending_[next_launch_] == 0)\n"
         "    queue_.push_back(next_launch_++);\n",
         "  queue_.push_back(b);\n  ++next_launch_;\n"),
    ]),
    ("diy-topk-no-error-feedback", "diy4", "x = g: the residual is dropped, not added", [
        ("docs/tutorial/diy/step4_topk_error_feedback.cpp", "  for (int i = 0; i < n; ++i) x[i] += g[i];\n",
         "  for (int i = 0; i < n; ++i) x[i] = g[i];\n"),
    ]),
    ("diy-topk-smallest", "diy4", "chooses the k smallest |x|", [
        ("docs/tutorial/diy/step4_topk_error_feedback.cpp",
         "  std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(),\n"
         "                   [&](int a, int b) { return std::fabs(x[a]) > std::fabs(x[b]); });\n",
         "  std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(),\n"
         "                   [&](int a, int b) { return std::fabs(x[a]) < std::fabs(x[b]); });\n"),
    ]),
    ("diy-residual-kept-where-sent", "diy4", "x is not zeroed at the union", [
        ("docs/tutorial/diy/step4_topk_error_feedback.cpp", "    x[all[j]] = 0.0f;\n", ""),
    ]),
    ("diy-micro-fixed-partition", "diy5", "rank r always compares partition r (no rotation)", [
        ("docs/tutorial/diy/step5_threshold.cpp",
         "  for (long i = begin; i < end; ++i)\n"
         "    if (std::fabs(x[i]) >= tau) chosen.push_back(static_cast<int>(i));\n",
         "  for (long i = r * q + std::min(static_cast<long>(r), rem);\n"
         "       i < (r + 1) * q + std::min(static_cast<long>(r) + 1, rem); ++i)\n"
         "    if (std::fabs(x[i]) >= tau) chosen.push_back(static_cast<int>(i));\n"),
    ]),
    ("diy-micro-local-count", "diy5", "tau moved from this rank's count, not the global one", [
        ("docs/tutorial/diy/step5_threshold.cpp", "  s.tau *= ratio > 1.1 ? 1.005 : ratio > 0.909 ? 1.00125 : 0.995;\n",
         "  s.tau *= static_cast<double>(chosen.size()) / static_cast<double>(k) + 0.0 * ratio > 1.1\n"
         "               ? 1.005\n"
         "               : 0.995;\n"),
    ]),
    ("diy-micro-tau-fixed", "diy5", "tau never moves", [
        ("docs/tutorial/diy/step5_threshold.cpp", "  s.tau *= ratio > 1.1 ? 1.005 : ratio > 0.909 ? 1.00125 : 0.995;\n", "  s.tau *= 1.0 + 0.0 * ratio;\n"),
    ]),
    ("diy-shard-not-averaged", "diy6", "the shard's gradient sum used without / P", [
        ("docs/tutorial/diy/step6_sharded_optimizer.cpp",
         "    opt.velocity[i] = static_cast<float>(opt.momentum) * opt.velocity[i] + avg;\n",
         "    opt.velocity[i] = static_cast<float>(opt.momentum) * opt.velocity[i] + avg * P;\n"),
    ]),
    ("diy-shard-equal-counts", "diy6", "every shard n / P long: the n mod P last elements never updated", [
        ("docs/tutorial/diy/step6_sharded_optimizer.cpp", "  return {r * q + std::min<long>(r, rem), q + (r < rem ? 1 : 0)};\n",
         "  return {r * q + 0 * rem, q};\n"),
    ]),
    ("diy-shard-no-allgather", "diy6", "the updated shards are not gathered: each rank updates its own only", [
        ("docs/tutorial/diy/step6_sharded_optimizer.cpp",
         "  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, params.data(), counts.data(), offsets.data(),\n"
         "                 MPI_FLOAT, comm);\n", ""),
    ]),
    # ---- step 8: scripts/scaling_model.py (patched copies)
    ("ring-steps-p-minus-one", 8, "a ring allreduce in P - 1 steps", [
        ("scripts/scaling_model.py", "        return 2 * (P - 1), 2 * (P - 1) / P * nbytes * shared\n",
         "        return P - 1, 2 * (P - 1) / P * nbytes * shared\n"),
    ]),
    ("ring-moves-n", 8, "each worker moves n bytes, not 2 (P-1)/P n", [
        ("scripts/scaling_model.py", "        return 2 * (P - 1), 2 * (P - 1) / P * nbytes * shared\n",
         "        return 2 * (P - 1), nbytes * shared\n"),
    ]),
    ("no-latency", 8, "coll_time forgets the latency term", [
        ("scripts/scaling_model.py", "    return steps * alpha + vol * beta\n", "    return vol * beta\n"),
    ]),
    ("latency-once-per-iteration", 8, "dense exchange pays latency once, not per bucket", [
        ("scripts/scaling_model.py", "        return t(\"allreduce\", 4.0 * n) + (b - 1) * ring\n",
         "        return t(\"allreduce\", 4.0 * n)\n"),
    ]),
]

SWITCH = "st_tutorial_mutant"
CPP_DECL = f"bool {SWITCH}(const char* name);  // tests/tutorial/mutant_switch.cpp\n"


def out_path(out, rel):
    return os.path.join(out, "include" if rel.endswith(".h") else "src", rel)


def generate(src_root, out):
    """Every C++ wrong answer into one copy per file, chosen at run time."""
    per_file = OrderedDict()
    for name, step, _, edits in MUTANTS:
        if step == 8:
            continue
        for rel, text, repl in edits:
            per_file.setdefault(rel, OrderedDict()).setdefault(text, []).append((name, repl))
    for rel, texts in per_file.items():
        with open(os.path.join(src_root, rel)) as f:
            original = f.read()
        spans = []
        for text, alternatives in texts.items():
            if original.count(text) != 1:
                sys.exit(f"mutants.py: {rel}: {text!r} occurs {original.count(text)} times, not "
                         "once; update tests/tutorial/mutants.py to the source")
            at = original.index(text)
            chain = "".join(f"  if ({SWITCH}(\"{n}\")) {{\n{r}  }} else\n" for n, r in alternatives)
            spans.append((at, at + len(text), f"{chain}  {{\n{text}  }}\n"))
        spans.sort()
        code, end = "", 0
        for begin, stop, repl in spans:
            if begin < end:
                sys.exit(f"mutants.py: {rel}: two edited texts overlap")
            code += original[end:begin] + repl
            end = stop
        code += original[end:]
        # The declaration goes after the first line (#pragma once in a header).
        first, _, rest = code.partition("\n")
        code = f"{first}\n{CPP_DECL}{rest}"
        path = out_path(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(code)


def patched_scaling_model(edits, tmp):
    with open(os.path.join(ROOT, "scripts", "scaling_model.py")) as f:
        code = f.read()
    for _, text, repl in edits:
        if code.count(text) != 1:
            sys.exit(f"mutants.py: scaling_model.py: {text!r} occurs {code.count(text)} times")
        code = code.replace(text, repl)
    with open(os.path.join(tmp, "scaling_model.py"), "w") as f:
        f.write(code)


MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def step_passes(step, name, binary, sparsetrain, allreduce, build):
    """(passed, ranks of the failing run or None). step 0: steps 1 to 7 at once; "diy":
    every build-it-yourself step at once."""
    env = dict(os.environ, ST_TUTORIAL_MUTANT=name or "", OMP_NUM_THREADS="1")
    if isinstance(step, str):  # build it yourself: "diy", or one step "diyN"
        flt = "Build.*" if step == "diy" else f"Build.Step{step[3:]}*"
        return gtest_passes([build, f"--gtest_filter={flt}", "--gtest_brief=1"], [2, 3, 4],
                            env, name)
    if step == 9:  # page 9's program checks every algorithm against MPI_Allreduce
        for P in (2, 3, 4):
            cmd = MPI + ["-np", str(P), allreduce, "--min-bytes", "4", "--max-bytes", "65536",
                         "--reps", "1"]
            try:
                r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            except subprocess.TimeoutExpired:
                return False, P
            if r.returncode != 0:
                return False, P
        return True, None
    if step == 8:
        with tempfile.TemporaryDirectory() as tmp:
            edits = next(e for n, s, _, e in MUTANTS if n == name) if name else []
            patched_scaling_model(edits, tmp)
            env["SCALING_MODEL_DIR"] = tmp
            r = subprocess.run([sys.executable, os.path.join(HERE, "scaling_exercise_test.py"),
                                sparsetrain], env=env, capture_output=True, text=True, timeout=120)
        return r.returncode == 0, None if r.returncode == 0 else 1
    flt = "Step*" if step == 0 else f"Step{step}.*"
    return gtest_passes([binary, f"--gtest_filter={flt}", "--gtest_brief=1"],
                        [1] if step in (1, 11, 12) else [2, 3, 4], env, name)


def gtest_passes(args, ranks, env, name):
    """A test binary run on each rank count in turn, stopping at the first failure."""
    for P in ranks:
        cmd = MPI + ["-np", str(P)] + args
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return False, P
        if r.returncode != 0:
            if not name:
                sys.stdout.write(r.stdout[-3000:] + r.stderr[-3000:])
            return False, P
    return True, None


def run(binary, sparsetrain, allreduce, build):
    bad = []
    # The right answers first (steps 1 to 7 in one run per rank count), then every wrong
    # one, two at a time (CI has two cores; the runs mostly wait in MPI start-up).
    for step in (0, 8, 9, "diy"):
        ok, _ = step_passes(step, None, binary, sparsetrain, allreduce, build)
        what = ("steps 1-7, 10, 11 and 12" if step == 0 else
                "build it yourself" if step == "diy" else f"step {step}")
        print(f"{'ok  ' if ok else 'FAIL'} {what}, right answers: pass")
        if not ok:
            bad.append(f"{what} fail with the right answers")
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(
            lambda m: step_passes(m[1], m[0], binary, sparsetrain, allreduce, build), MUTANTS))
    for (name, step, why, _), (ok, P) in zip(MUTANTS, results):
        where = "" if ok or step == 8 else f" on {P} rank{'s' if P > 1 else ''}"
        print(f"{'FAIL' if ok else 'ok  '} step {step} {name} ({why}): "
              f"{'NOT caught' if ok else 'caught' + where}")
        if ok:
            bad.append(f"step {step} passes {name}")
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print(f"all {len(MUTANTS)} wrong answers caught")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "generate":
        generate(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 6 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif len(sys.argv) == 2 and sys.argv[1] == "list":
        for name, step, why, _ in MUTANTS:
            print(f"step {step}: {name}: {why}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
