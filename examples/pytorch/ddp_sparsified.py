"""DDP with a sparsetrain sparsifier as its comm hook: two gloo ranks on this machine fit a
small network to a random teacher, exchanging 5% of each bucket with MiCRO.

    PYTHONPATH=<prefix>/lib/python python3 ddp_sparsified.py [--world 2] [--steps 40]
        [--method micro] [--density 0.05]

Under torchrun, drop the spawn: init_process_group("gloo") and call train(rank, ...).
"""
import argparse
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

import sparsetrain_torch as stt


def train(rank, args):
    torch.manual_seed(0)
    teacher = torch.nn.Linear(32, 4)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    ddp = DDP(model)
    state = stt.HookState(args.method, density=args.density)
    ddp.register_comm_hook(state, stt.hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = torch.Generator().manual_seed(rank)
    first = None
    for step in range(args.steps):
        x = torch.randn(32, 32, generator=data)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), teacher(x).detach())
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            s = state.stats()
            print(f"step {step:3d} loss {loss.item():.4f} sp_density {s.get('sp_density', 1):.4f}")
    return first, loss.item()


def worker(rank, args, init_file):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=args.world)
    first, last = train(rank, args)
    dist.destroy_process_group()
    if last > first / 2:
        raise SystemExit(f"rank {rank}: the loss went from {first:.4f} only to {last:.4f}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--method", default="micro")
    p.add_argument("--density", type=float, default=0.05)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(args, os.path.join(tmp, "init")), nprocs=args.world)


if __name__ == "__main__":
    main()
