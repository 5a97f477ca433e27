"""PyTorch peer of bench/micro_select_bench.cpp: torch.topk over the *whole* buffer
(what Top-k sparsification costs per rank), same size, density and thread count.
Prints one JSON line with the median time of topk on |x| (abs precomputed, the
conservative number) and of abs + topk together.

  /usr/bin/python3 bench/torch_topk_whole.py [--n 25557032] [--density 0.001] [--reps 5] [--threads 1]
"""
import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=25557032)
    ap.add_argument("--density", type=float, default=0.001)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    k = max(1, int(a.density * a.n))
    x = torch.randn(a.n) * torch.randn(a.n).abs()  # heavy-tailed, like the C++ side
    ax = x.abs()
    torch.topk(ax, k, sorted=False)  # warm-up
    topk, abs_topk = [], []
    for _ in range(a.reps):
        t = time.perf_counter()
        torch.topk(ax, k, sorted=False)
        topk.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        torch.topk(x.abs(), k, sorted=False)
        abs_topk.append((time.perf_counter() - t) * 1e3)
    topk.sort()
    abs_topk.sort()
    m = a.reps // 2
    print(json.dumps({"bench": "micro_select", "impl": "torch", "n": a.n, "density": a.density, "k": k,
                      "threads": a.threads, "reps": a.reps, "torch_version": torch.__version__,
                      "topk_ms": round(topk[m], 3), "abs_topk_ms": round(abs_topk[m], 3)}), flush=True)


if __name__ == "__main__":
    main()
