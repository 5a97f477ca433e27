"""PyTorch DDP on Fashion-MNIST with a choice of gradient exchange: the peer runs of the
comparisons in docs/PYTORCH.md and docs/RESULTS.md. Dense allreduce, PyTorch's own fp16
and PowerSGD hooks, or sparsetrain_torch's hook with any sparsetrain method, on gloo ranks.

  torchrun --nproc_per_node 4 bench/torch_ddp_fmnist.py --arch resnet18 --hook stt \\
      --method micro --density 0.01 --epochs 1
  /usr/bin/python3 bench/torch_ddp_fmnist.py --world 4 ...   (spawns its own gloo ranks)

--arch: resnet18 is torchvision's ImageNet ResNet-18 run at 32x32 (11.2M parameters);
resnet20 and the other CIFAR ResNets are bench/torch_train_step.py's. Images are padded
from 28x28 to 32x32 and repeated over 3 channels. Each rank takes --batch images a step
(the global batch is P times that); the learning rate is --lr for the global batch.
--hook: dense | fp16 (default_hooks.fp16_compress_hook) | powersgd1 | powersgd2
(PowerSGD of rank 1 or 2 from the second step, one bucket: on gloo with torch 1.13 its
concurrent collectives of several buckets mismatch) | stt (sparsetrain_torch.hook with
--method, --density, --sp key=value ...; the extension's folder on PYTHONPATH).
Rank 0 prints one JSON line per epoch and a last line with "summary": true (wall time,
mean step time after 5 warm-up steps, test loss and accuracy on the whole test set).
"""
import argparse
import gzip
import json
import math
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's training-set pixel mean and deviation


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(folder, split, limit):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte.gz"))
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - MEAN) / STD
    x = F.pad(x, (2, 2, 2, 2)).unsqueeze(1).expand(-1, 3, -1, -1).contiguous()
    return x, torch.from_numpy(labels.astype(np.int64))


def build_model(arch):
    if arch == "resnet18":
        import torchvision
        return torchvision.models.resnet18(num_classes=10)
    import torch_train_step
    return torch_train_step.build(arch, 10)


def register_hook(ddp, a):
    if a.hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif a.hook.startswith("powersgd"):
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
        state = psgd.PowerSGDState(process_group=None,
                                   matrix_approximation_rank=int(a.hook[-1]),
                                   start_powerSGD_iter=2)
        ddp.register_comm_hook(state, psgd.powerSGD_hook)
        return state
    elif a.hook == "stt":
        import sparsetrain_torch as stt
        sp = dict(kv.split("=", 1) for kv in a.sp)
        state = stt.HookState(a.method, density=a.density, sp={k: float(v) for k, v in sp.items()})
        ddp.register_comm_hook(state, stt.hook)
        return state
    return None


def learning_rate(a, step, total_steps):
    """A linear warm-up over the first --warmup-steps (the same for every hook), then
    --lr held (constant) or decayed to zero by the last step (cosine)."""
    warm = min(1.0, (step + 1) / max(1, a.warmup_steps))
    if a.schedule == "constant" or step < a.warmup_steps:
        return a.lr * warm
    progress = (step - a.warmup_steps) / max(1, total_steps - a.warmup_steps)
    return a.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def evaluate(model, x, y):
    model.eval()
    loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(x), 500):
            out = model(x[i:i + 500])
            loss += F.cross_entropy(out, y[i:i + 500], reduction="sum").item()
            correct += (out.argmax(1) == y[i:i + 500]).sum().item()
    model.train()
    return loss / len(x), 100.0 * correct / len(x)


def train(rank, world, a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data, "train", a.train_subset)
    xte, yte = load(a.data, "test", a.test_subset)
    model = build_model(a.arch)
    bucket_mb = a.bucket_cap_mb
    powersgd = a.hook.startswith("powersgd")
    if powersgd:
        # One bucket: DDP also makes a first bucket of its own size (1 MB by default; the
        # setting its source names for tuning it), so both limits go up.
        bucket_mb = 4096
        dist._DEFAULT_FIRST_BUCKET_BYTES = bucket_mb * 1024 * 1024
    ddp = DDP(model, bucket_cap_mb=bucket_mb)
    hook_state = register_hook(ddp, a)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.wd)
    steps_per_epoch = len(xtr) // (a.batch * world)
    start, step, times = time.perf_counter(), 0, []
    sent_before_last = 0  # PowerSGD's count of floats sent, before the last step
    for epoch in range(a.epochs):
        t0, losses = time.perf_counter(), []
        order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(a.seed + epoch))
        mine = order[rank::world]
        for i in range(steps_per_epoch):
            if a.max_steps and step >= a.max_steps:
                break
            for g in opt.param_groups:
                g["lr"] = learning_rate(a, step, steps_per_epoch * a.epochs)
            idx = mine[i * a.batch:(i + 1) * a.batch]
            if powersgd:
                sent_before_last = hook_state.compression_stats()[2]
            s0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(ddp(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - s0)
            losses.append(loss.item())
            step += 1
        test_loss, test_acc = evaluate(model, xte, yte) if rank == 0 else (0.0, 0.0)
        dist.barrier()
        if rank == 0:
            print(json.dumps({"arch": a.arch, "hook": a.hook, "method": a.method if a.hook == "stt"
                              else None, "world": world, "epoch": epoch, "steps": step,
                              "train_loss": round(float(np.mean(losses)), 5),
                              "test_loss": round(test_loss, 5), "test_acc": round(test_acc, 2),
                              "epoch_s": round(time.perf_counter() - t0, 2)}), flush=True)
        if a.max_steps and step >= a.max_steps:
            break
    if rank == 0:
        steady = times[5:] or times
        # An adaptive threshold (MiCRO, ExDyna) settles over the run: the last steps show
        # where it went, with the density of the last step.
        tail = {"step_ms_last10": round(1e3 * float(np.mean(times[-10:])), 2)}
        if powersgd:
            # Its state counts the elements it allreduces (factors and the tensors it
            # leaves dense), summed over the steps since compression started.
            tail["sp_bytes"] = 4 * int(hook_state.compression_stats()[2] - sent_before_last)
        elif hook_state is not None:
            stats = hook_state.stats()
            tail["sp_density"] = round(float(stats.get("sp_density", 0.0)), 5)
            tail["sp_bytes"] = int(stats.get("sp_bytes", 0))
        print(json.dumps({"summary": True, "arch": a.arch, "hook": a.hook,
                          "method": a.method if a.hook == "stt" else None,
                          "density": a.density if a.hook == "stt" else None, "world": world,
                          "seed": a.seed, "epochs": a.epochs, "schedule": a.schedule, "steps": step,
                          "wall_s": round(time.perf_counter() - start, 2),
                          "step_ms": round(1e3 * float(np.mean(steady)), 2), **tail,
                          "test_loss": round(test_loss, 5), "test_acc": round(test_acc, 2)}),
              flush=True)


def spawned(rank, world, init_file, a):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    try:
        train(rank, world, a)
    finally:
        dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="resnet18")
    p.add_argument("--hook", default="dense",
                   choices=["dense", "fp16", "powersgd1", "powersgd2", "stt"])
    p.add_argument("--method", default="micro")
    p.add_argument("--density", type=float, default=0.01)
    p.add_argument("--sp", nargs="*", default=[], metavar="KEY=VALUE")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: none)")
    p.add_argument("--batch", type=int, default=32, help="images per rank and step")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9,
                   help="the optimiser's (0 where the hook keeps the momentum: dgc --sp momentum)")
    p.add_argument("--wd", type=float, default=5e-4)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--schedule", default="constant", choices=["constant", "cosine"],
                   help="after the warm-up: hold --lr, or decay it to zero over --epochs")
    p.add_argument("--bucket-cap-mb", type=float, default=25)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--train-subset", type=int, default=0)
    p.add_argument("--test-subset", type=int, default=0)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--world", type=int, default=0, help="spawn this many gloo ranks "
                   "(default: run under torchrun, which sets RANK and WORLD_SIZE)")
    a = p.parse_args()
    if not os.path.exists(os.path.join(a.data, "train-images-idx3-ubyte.gz")):
        sys.exit(f"torch_ddp_fmnist: no Fashion-MNIST in --data {a.data} "
                 "(Debian's dataset-fashion-mnist)")
    if a.world:
        with tempfile.TemporaryDirectory() as tmp:
            mp.spawn(spawned, args=(a.world, os.path.join(tmp, "init"), a), nprocs=a.world)
    else:
        dist.init_process_group("gloo")
        try:
            train(dist.get_rank(), dist.get_world_size(), a)
        finally:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
