"""The DDP comm hook against the CLI's exchange, for every method the registry lists: the
same per-rank buckets go to sparsetrain_torch over gloo ranks and to st_torch_reference
(the CLI's ExchangeSetup over MPI, the bucket's tensors as its parameters' gradient
views); every averaged bucket of every iteration and every
final residual must agree bit for bit on 2 ranks. Two cases more select per tensor
(--sp scope=tensor: the tensors found from the gradients' views, one of them below
min_tensor and sent whole). On more ranks a float sum over the ranks
depends on its order, which gloo's allreduce and Open MPI's choose differently: there the
same elements must be zero and the rest agree within 1e-6 of the largest magnitude.

    hook_equality_test.py REFERENCE_BINARY WORLD
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

import ddp_testing
import sparsetrain_torch as stt

ITERS = 3
BUCKETS = [[(30, 40)], [(20, 50), (13, 100)]]  # each bucket's tensors, as DDP lays them out
DENSITY = 0.05
# Beyond every method with its defaults: (label, method, --sp).
SCOPED = [("topk_scope_tensor", "topk", {"scope": "tensor"}),
          ("gaussiank_scope_tensor", "gaussiank", {"scope": "tensor"})]


def bucket_sizes():
    return [sum(int(np.prod(s)) for s in b) for b in BUCKETS]


def write_inputs(folder, world):
    sizes = bucket_sizes()
    with open(os.path.join(folder, "buckets.txt"), "w") as f:
        f.write(f"{ITERS}\n")
        for b in BUCKETS:
            f.write(" ".join("x".join(str(d) for d in s) for s in b) + "\n")
    for r in range(world):
        g = torch.Generator().manual_seed(1000 + r)
        # Rows of several scales, so thresholds and partitions see uneven magnitudes.
        grads = torch.randn(ITERS, sum(sizes), generator=g) * torch.logspace(
            -3, 0, sum(sizes))
        grads.numpy().astype(np.float32).tofile(os.path.join(folder, f"grads_r{r}.bin"))


def read_rank(folder, name, r):
    return np.fromfile(os.path.join(folder, f"{name}_r{r}.bin"), dtype=np.float32)


def hook_side(rank, world, folder, cases):
    sizes = bucket_sizes()
    grads = torch.from_numpy(read_rank(folder, "grads", rank)).view(ITERS, sum(sizes))
    for label, m, sp in cases:
        state = stt.HookState(m, density=DENSITY, sp=sp)
        out = []
        for t in range(ITERS):
            at = 0
            for b, n in enumerate(sizes):
                buf = grads[t, at:at + n].clone()
                state.exchange(b, buf, ddp_testing.flat_views(buf, BUCKETS[b]), t)
                out.append(buf)
                at += n
        for b, n in enumerate(sizes):
            r = state.residual(b)
            out.append(r if r is not None else torch.zeros(n))
        torch.cat(out).numpy().tofile(os.path.join(folder, f"hook_{label}_r{rank}.bin"))


def main():
    reference, world = sys.argv[1], int(sys.argv[2])
    methods = stt.sparsifiers()
    assert len(methods) >= 21, methods
    cases = [(m, m, {}) for m in methods] + SCOPED
    with tempfile.TemporaryDirectory() as folder:
        write_inputs(folder, world)
        for label, m, sp in cases:
            subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
                            str(world), reference, folder, label, m, str(DENSITY)] +
                           [f"{k}={v}" for k, v in sp.items()], check=True)
        ddp_testing.run_world(world, hook_side, folder, cases)
        failed, rounded = [], 0
        for m, _, _ in cases:
            worst, ok = 0.0, True
            for r in range(world):
                want, got = read_rank(folder, m, r), read_rank(folder, "hook_" + m, r)
                assert want.shape == got.shape, (m, r, want.shape, got.shape)
                if np.array_equal(want.view(np.uint32), got.view(np.uint32)):
                    continue
                diff = float(np.max(np.abs(want - got)))
                worst = max(worst, diff if diff == diff else float("inf"))
                ok = ok and world > 2 and np.array_equal(want == 0, got == 0) and \
                    diff <= 1e-6 * float(np.max(np.abs(want)))
            print(f"{m:22s} world {world}: " +
                  ("bit for bit" if worst == 0 else f"largest |diff| {worst:.3g}"))
            rounded += worst != 0
            if not ok:
                failed.append(m)
        assert not failed, f"hook differs from the CLI's exchange for {failed}"
        print(f"all {len(cases)} cases ({len(methods)} methods and {len(SCOPED)} in tensor "
              f"scope) agree on {world} ranks: {len(cases) - rounded} bit for bit, "
              f"{rounded} within the sums' rounding")


if __name__ == "__main__":
    main()
