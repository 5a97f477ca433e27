"""PyTorch peer of bench/conv_bench.cpp: same shapes, same timing rule (median)."""
import argparse
import json
import time

import torch

SHAPES = [("stem_3_16_32", 3, 16, 32, 1, 1), ("c16_16_32", 16, 16, 32, 1, 6),
          ("c16_32_32_s2", 16, 32, 32, 2, 1), ("c32_32_16", 32, 32, 16, 1, 5),
          ("c32_64_16_s2", 32, 64, 16, 2, 1), ("c64_64_8", 64, 64, 8, 1, 5)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    for name, cin, cout, hw, stride, count in SHAPES:
        conv = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        x = torch.full((a.batch, cin, hw, hw), 0.5, requires_grad=True)
        y = conv(x)
        dy = torch.full(y.shape, 0.1)
        y.backward(dy)
        fwd, bwd = [], []
        for _ in range(a.reps):
            t = time.perf_counter()
            y = conv(x)
            fwd.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            y.backward(dy)
            bwd.append((time.perf_counter() - t) * 1e3)
        fwd.sort()
        bwd.sort()
        m = a.reps // 2
        print(json.dumps({"bench": "conv", "impl": "torch", "shape": name, "batch": a.batch,
                          "threads": a.threads, "count": count, "fwd_ms": round(fwd[m], 3),
                          "bwd_ms": round(bwd[m], 3), "total_ms": round(fwd[m] + bwd[m], 3)}),
              flush=True)


if __name__ == "__main__":
    main()
