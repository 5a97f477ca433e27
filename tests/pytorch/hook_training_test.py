"""A small DDP training with sparsetrain_torch.hook and MiCRO on 2 gloo ranks: a two-layer
network fits a random teacher; the loss must fall to a third of its start while about the
requested density of the gradient is exchanged (stats())."""
import sys

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import ddp_testing
import sparsetrain_torch as stt

STEPS, DENSITY = 60, 0.05


def worker(rank, world):
    torch.manual_seed(0)
    teacher = torch.nn.Linear(32, 4)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    ddp = DDP(model)
    state = stt.HookState("micro", density=DENSITY, sp={"up": 1.1})
    ddp.register_comm_hook(state, stt.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    losses = []
    for _ in range(STEPS):
        x = torch.randn(32, 32, generator=g)
        with torch.no_grad():
            y = teacher(x)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    s = state.stats()
    if rank == 0:
        print(f"micro d={DENSITY}: loss {first:.4f} (first 5 steps) -> {last:.4f} (last 5); "
              f"sp_density {s['sp_density']:.4f}, sp_threshold {s['sp_threshold']:.3g}, "
              f"sp_select_ms {s['sp_select_ms']:.3f}, sp_exchange_ms {s['sp_exchange_ms']:.3f}")
    assert last < first / 3, (first, last)
    assert 0 < s["sp_density"] <= 2 * DENSITY, s
    for key in ("sp_k", "sp_threshold", "sp_select_ms", "sp_exchange_ms", "sp_total_ms"):
        assert key in s, key


def main():
    ddp_testing.run_world(2, worker)


if __name__ == "__main__":
    sys.exit(main())
