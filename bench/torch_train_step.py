"""PyTorch peer of bench/train_step_bench.cpp: the same model, batch, input size and SGD
settings; median step time and peak RSS. CIFAR ResNets (He et al. 2016, option-A
shortcuts) are built here; ImageNet ResNets are torchvision's own models, which ours
reproduce layer for layer; the CIFAR GoogLeNet, SENet-18 and SE-ResNet-18 are the twins
of bench/torch_cifar_models.py. Other archs have no peer and are refused (PEERS).
--autocast bf16 runs forward and loss under torch.autocast("cpu", dtype=torch.bfloat16),
PyTorch's CPU mixed precision (convolutions and linear layers in bf16 through oneDNN)."""
import contextlib
import argparse
import json
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# --arch -> (family, natural input side). vgg* are CIFAR variants with no torchvision twin
# (torchvision's vgg16 is the ImageNet one), so they are left out.
PEERS = {**{f"resnet{d}": ("cifar", 32) for d in (20, 32, 44, 56, 110)},
         **{f"resnet{d}": ("imagenet", 224) for d in (18, 34, 50, 101, 152)},
         **{arch: ("twin", 32) for arch in ("googlenet", "senet18", "se_resnet18",
                                            "resnet18_cifar", "resnet152_cifar",
                                            "inception_v4")}}


class PadShortcut(nn.Module):
    def __init__(self, planes):
        super().__init__()
        self.pad = planes // 4

    def forward(self, x):
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))


class Block(nn.Module):
    def __init__(self, inp, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = PadShortcut(planes) if stride != 1 or inp != planes else nn.Identity()

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetCifar(nn.Module):
    def __init__(self, n, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        layers, inp = [], 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(n):
                layers.append(Block(inp, planes, stride if i == 0 else 1))
                inp = planes
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build(arch, classes=10):
    family, _ = PEERS[arch]
    if family == "twin":
        import torch_cifar_models
        return torch_cifar_models.build(arch, classes)
    depth = int(arch.replace("resnet", ""))
    if family == "cifar":
        return ResNetCifar((depth - 2) // 6, classes)
    import torchvision
    return getattr(torchvision.models, arch)(num_classes=classes)


def forward_flops(model, batch, size):
    """The one FLOP count of a training step's forward, for both sides (the models are the
    same layer for layer): 2 x the multiply-adds of every convolution and linear layer
    (batch norm, ReLU, pooling and the loss are left out: a few percent, and memory bound).
    The step is 3 x this: backward computes the input and the weight gradients, each as
    many multiply-adds as the forward."""
    macs = []

    def conv(m, inp, out):
        macs.append(out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1])

    def linear(m, inp, out):
        macs.append(out.numel() * m.in_features)

    hooks = [m.register_forward_hook(conv if isinstance(m, nn.Conv2d) else linear)
             for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model.eval()
        model(torch.zeros(1, 3, size, size))
        model.train()
    for h in hooks:
        h.remove()
    return 2 * sum(macs) * batch


def add_gflops(d, fwd_flops, peak_gflops=None):
    """Adds achieved GFLOP/s (forward, backward = 2 x forward, step) to a train_step JSON
    record and, given the machine's FMA peak (bench/peak_bench), the step's fraction of it."""
    d["step_gflop"] = round(3 * fwd_flops * 1e-9, 3)
    d["fwd_gflops"] = round(fwd_flops / d["fwd_ms"] * 1e-6, 1)
    d["bwd_gflops"] = round(2 * fwd_flops / d["bwd_ms"] * 1e-6, 1)
    d["step_gflops"] = round(3 * fwd_flops / d["step_ms"] * 1e-6, 1)
    if peak_gflops:
        d["peak_gflops"] = peak_gflops
        d["peak_fraction"] = round(d["step_gflops"] / peak_gflops, 3)
    return d


def autocast(mode):
    if mode == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="resnet20")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--autocast", choices=["off", "bf16"], default="off")
    a = ap.parse_args()
    if a.arch not in PEERS:
        raise SystemExit(f"torch_train_step: no PyTorch peer for --arch {a.arch}; "
                         f"peers: {', '.join(PEERS)}")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = build(a.arch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(a.batch, 3, a.size, a.size)
    y = torch.arange(a.batch) % 10
    fwd, bwd, step, total = [], [], [], []
    for r in range(3 + a.reps):
        t = time.perf_counter()
        with autocast(a.autocast):
            loss = F.cross_entropy(model(x), y)
        f = time.perf_counter() - t
        t = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        b = time.perf_counter() - t
        t = time.perf_counter()
        opt.step()
        o = time.perf_counter() - t
        if r >= 3:
            fwd.append(f * 1e3)
            bwd.append(b * 1e3)
            step.append(o * 1e3)
            total.append((f + b + o) * 1e3)
    med = lambda v: sorted(v)[len(v) // 2]
    print(json.dumps(add_gflops({"bench": "train_step", "impl": "torch",
                      "precision": "bf16" if a.autocast == "bf16" else "fp32", "arch": a.arch, "batch": a.batch,
                      "size": a.size, "threads": a.threads, "fwd_ms": round(med(fwd), 2),
                      "bwd_ms": round(med(bwd), 2), "opt_ms": round(med(step), 2),
                      "step_ms": round(med(total), 2),
                      "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)},
                                forward_flops(model, a.batch, a.size))), flush=True)


if __name__ == "__main__":
    main()
