"""Times one NCF training step (forward + backward + Adam) in sparsetrain
(bench/ncf_step_bench) and in PyTorch 1.13 (bench/torch_ncf.py's twin, nn.Embedding with
dense gradients, BCEWithLogitsLoss, torch.optim.Adam lr 0.001) at MovieLens-20M's sizes
(31,832,577 parameters), with the same threads and batch, alternating for --rounds and
keeping each side's best median. Prints one JSON line per side and round, then the
step-time ratio sparsetrain / torch (below 1.0: sparsetrain is faster).

  /usr/bin/python3 bench/compare_ncf_step.py --build build [--batch 256] [--rounds 3]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def torch_step(batch, reps, threads, warmup=3):
    """Median forward, backward and Adam times of the twin, in a child process (its own
    peak memory, the same footing as the C++ bench)."""
    code = f"""
import json, resource, sys, time, torch
sys.path.insert(0, {HERE!r})
import torch_ncf
torch.set_num_threads({threads})
torch.manual_seed(0)
users, items = 138493, 26744
model = torch_ncf.build(f"{{users}},{{items}}")
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
g = torch.Generator().manual_seed(1)
x = torch.stack([torch.randint(users, ({batch},), generator=g),
                 torch.randint(items, ({batch},), generator=g)]).int()
y = (torch.arange({batch}) % 5 == 0).float().unsqueeze(1)
loss_fn = torch.nn.BCEWithLogitsLoss()
fwd, bwd, upd = [], [], []
for r in range({warmup} + {reps}):
    t0 = time.perf_counter()
    loss = loss_fn(model(x), y)
    t1 = time.perf_counter()
    opt.zero_grad(set_to_none=False)
    loss.backward()
    t2 = time.perf_counter()
    opt.step()
    t3 = time.perf_counter()
    if r >= {warmup}:
        fwd.append(t1 - t0); bwd.append(t2 - t1); upd.append(t3 - t2)
med = lambda v: sorted(v)[len(v) // 2] * 1e3
print(json.dumps({{"bench": "ncf_step", "impl": "torch", "batch": {batch}, "threads": {threads},
                  "fwd_ms": round(med(fwd), 2), "bwd_ms": round(med(bwd), 2),
                  "opt_ms": round(med(upd), 2),
                  "step_ms": round(med([a + b + c for a, b, c in zip(fwd, bwd, upd)]), 2),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}}))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def sparsetrain_step(exe, batch, reps, threads):
    out = subprocess.run([exe, "--batch", str(batch), "--reps", str(reps), "--threads",
                          str(threads)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    exe = os.path.join(a.build, "bench", "ncf_step_bench")
    if not os.path.exists(exe):
        sys.exit(f"compare_ncf_step: {exe} not found; build the ncf_step_bench target")
    best = {}
    for _ in range(a.rounds):
        for impl, run in (("sparsetrain", lambda: sparsetrain_step(exe, a.batch, a.reps, a.threads)),
                          ("torch", lambda: torch_step(a.batch, a.reps, a.threads))):
            d = run()
            print(json.dumps(d), flush=True)
            if impl not in best or d["step_ms"] < best[impl]["step_ms"]:
                best[impl] = d
    st, pt = best["sparsetrain"], best["torch"]
    print(json.dumps({"bench": "ncf_step_ratio", "batch": a.batch, "threads": a.threads,
                      "sparsetrain_ms": st["step_ms"], "torch_ms": pt["step_ms"],
                      "ratio": round(st["step_ms"] / pt["step_ms"], 3),
                      "opt_ratio": round(st["opt_ms"] / pt["opt_ms"], 3),
                      "rss_ratio": round(st["peak_rss_mb"] / pt["peak_rss_mb"], 3)}), flush=True)


if __name__ == "__main__":
    main()
