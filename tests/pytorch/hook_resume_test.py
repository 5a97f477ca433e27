"""Resume from torch.save bit for bit: a DDP model trained 6 steps with the hook equals one
trained 3 steps, saved (model, optimiser and state.state_dict()) and resumed in a fresh
model, DDP instance and HookState for 3 more. Then the same state on another world size:
re-split by the CLI's rules for MiCRO (the residuals' sum over the ranks kept), refused in
one line for SAGE (a threshold adapted to each rank's own gradient)."""
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_testing
import sparsetrain_torch as stt

METHODS = ["micro", "topk", "exdyna", "dgc", "sidco-e", "sage", "powersgd"]
STEPS, SAVE_AT = 6, 3


def model(seed):
    torch.manual_seed(seed)
    # 315k parameters: past DDP's first bucket (1 MB), so the model is two buckets.
    return torch.nn.Sequential(torch.nn.Linear(20, 600), torch.nn.ReLU(), torch.nn.Linear(600, 500),
                               torch.nn.ReLU(), torch.nn.Linear(500, 4))


def train(ddp, opt, state, first, last, rank, save=None):
    for step in range(first, last):
        g = torch.Generator().manual_seed(100 * step + rank)
        x, y = torch.randn(16, 20, generator=g), torch.randn(16, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        if save and step + 1 == SAVE_AT:
            save(step + 1)


def setup(method, seed):
    m = model(seed)
    ddp = DDP(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    state = stt.HookState(method, density=0.1)
    ddp.register_comm_hook(state, stt.hook)
    return m, ddp, opt, state


def worker(rank, world, folder):
    for method in METHODS:
        path = os.path.join(folder, f"{method}.pt")

        m, ddp, opt, state = setup(method, 0)

        def save(step):
            ckpt = {"model": m.state_dict(), "opt": opt.state_dict(), "hook": state.state_dict(),
                    "step": step}
            if rank == 0:
                torch.save(ckpt, path)
            torch.save({b: state.residual(b) for b in ckpt["hook"]["layout"]},
                       os.path.join(folder, f"{method}_residuals_r{rank}.pt"))
            dist.barrier()

        train(ddp, opt, state, 0, STEPS, rank, save)
        assert state.stats()["sp_density"] > 0, state.stats()
        assert sorted(state.state_dict()["layout"]) == [0, 1], state.state_dict()["layout"]
        straight = [p.detach().clone() for p in m.parameters()]

        ckpt = torch.load(path)
        m2, ddp2, opt2, state2 = setup(method, 1)
        m2.load_state_dict(ckpt["model"])
        opt2.load_state_dict(ckpt["opt"])
        state2.load_state_dict(ckpt["hook"])
        train(ddp2, opt2, state2, ckpt["step"], STEPS, rank)
        for a, b in zip(straight, m2.parameters()):
            assert torch.equal(a, b.detach()), (method, (a - b).abs().max().item())
        if rank == 0:
            print(f"{method:10s} resumed at step {SAVE_AT}: parameters after step {STEPS} "
                  f"equal bit for bit on {world} ranks")


def one_rank(rank, world, folder):
    """The 2-rank checkpoints on 1 rank: MiCRO's residuals are the old ranks' sums."""
    ckpt = torch.load(os.path.join(folder, "micro.pt"))["hook"]
    state = stt.HookState("micro", density=0.1)
    state.load_state_dict(ckpt)
    old = [torch.load(os.path.join(folder, f"micro_residuals_r{q}.pt")) for q in range(2)]
    for b in ckpt["layout"]:
        assert torch.equal(state.residual(b), old[0][b] + old[1][b]), b
    print(f"micro: the state of 2 ranks re-split over 1, residuals the sums of the old ranks' "
          f"in buckets {sorted(ckpt['layout'])}")
    sage = torch.load(os.path.join(folder, "sage.pt"))["hook"]
    line = ddp_testing.one_line_error(
        lambda: stt.HookState("sage", density=0.1).load_state_dict(sage), "sage", "2", "1")
    print(f"sage on 1 rank refused: {line}")


def main():
    with tempfile.TemporaryDirectory() as folder:
        ddp_testing.run_world(2, worker, folder)
        ddp_testing.run_world(1, one_rank, folder)


if __name__ == "__main__":
    sys.exit(main())
