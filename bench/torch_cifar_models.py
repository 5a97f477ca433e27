"""PyTorch twins of sparsetrain's CIFAR GoogLeNet, SENet-18 and SE-ResNet-18
(models/googlenet.h, models/senet.h), written in plain torch.nn with the same module
names, so a state dict is a sparsetrain model's parameters and buffers by name.

  torch_cifar_models.py count ARCH CLASSES   prints the trainable parameter count
  torch_cifar_models.py check FILE           loads a file written by model_logits (its
      parameters, buffers, input and logits), runs the twin on the input and checks the
      logits agree within --rtol (relative to the largest logit); exit 1 otherwise.
"""
import argparse
import json
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_bn_relu(inp, out, k):
    return [nn.Conv2d(inp, out, k, padding=k // 2), nn.BatchNorm2d(out), nn.ReLU(True)]


class Inception(nn.Module):
    def __init__(self, inp, n1x1, n3x3red, n3x3, n5x5red, n5x5, pool_planes):
        super().__init__()
        self.b1 = nn.Sequential(*conv_bn_relu(inp, n1x1, 1))
        self.b2 = nn.Sequential(*conv_bn_relu(inp, n3x3red, 1), *conv_bn_relu(n3x3red, n3x3, 3))
        self.b3 = nn.Sequential(*conv_bn_relu(inp, n5x5red, 1), *conv_bn_relu(n5x5red, n5x5, 3),
                                *conv_bn_relu(n5x5, n5x5, 3))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1),
                                *conv_bn_relu(inp, pool_planes, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


class GoogLeNet(nn.Module):
    WIDTHS = [("a3", (64, 96, 128, 16, 32, 32)), ("b3", (128, 128, 192, 32, 96, 64)),
              ("a4", (192, 96, 208, 16, 48, 64)), ("b4", (160, 112, 224, 24, 64, 64)),
              ("c4", (128, 128, 256, 24, 64, 64)), ("d4", (112, 144, 288, 32, 64, 64)),
              ("e4", (256, 160, 320, 32, 128, 128)), ("a5", (256, 160, 320, 32, 128, 128)),
              ("b5", (384, 192, 384, 48, 128, 128))]

    def __init__(self, classes):
        super().__init__()
        self.pre_layers = nn.Sequential(*conv_bn_relu(3, 192, 3))
        inp = 192
        for name, w in self.WIDTHS:
            setattr(self, name, Inception(inp, *w))
            inp = w[0] + w[2] + w[4] + w[5]
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.avgpool = nn.AvgPool2d(8, stride=1)
        self.linear = nn.Linear(1024, classes)

    def forward(self, x):
        out = self.pre_layers(x)
        for name, _ in self.WIDTHS:
            out = getattr(self, name)(out)
            if name in ("b3", "e4"):
                out = self.maxpool(out)
        return self.linear(self.avgpool(out).flatten(1))


class SqueezeExcite(nn.Module):
    """The SE scale of Hu et al. 2018 as the fc1/fc2 1x1 convolutions of a block."""

    def add_se(self, planes):
        self.fc1 = nn.Conv2d(planes, planes // 16, 1)
        self.fc2 = nn.Conv2d(planes // 16, planes, 1)

    def se(self, out):
        w = F.avg_pool2d(out, out.size(2))
        return out * torch.sigmoid(self.fc2(F.relu(self.fc1(w))))


class PreActSEBlock(SqueezeExcite):
    def __init__(self, inp, planes, stride):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(inp)
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        if stride != 1 or inp != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(inp, planes, 1, stride, bias=False))
        self.add_se(planes)

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out) if hasattr(self, "shortcut") else x
        out = self.conv2(F.relu(self.bn2(self.conv1(out))))
        return self.se(out) + shortcut


class BasicSEBlock(SqueezeExcite):
    def __init__(self, inp, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or inp != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(inp, planes, 1, stride, bias=False),
                                          nn.BatchNorm2d(planes))
        self.add_se(planes)

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(self.se(out) + self.shortcut(x))


class SENet(nn.Module):
    def __init__(self, block, classes, pool):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        inp = 64
        for i, planes in enumerate((64, 128, 256, 512)):
            blocks = []
            for b in range(2):
                blocks.append(block(inp, planes, 2 if i > 0 and b == 0 else 1))
                inp = planes
            setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
        self.pool = pool
        self.linear = nn.Linear(512, classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        for i in range(4):
            out = getattr(self, f"layer{i + 1}")(out)
        return self.linear(self.pool(out).flatten(1))


def build(arch, classes):
    if arch == "googlenet":
        return GoogLeNet(classes)
    if arch == "senet18":
        return SENet(PreActSEBlock, classes, nn.AvgPool2d(4))
    if arch == "se_resnet18":
        return SENet(BasicSEBlock, classes, nn.AdaptiveAvgPool2d(1))
    sys.exit(f"torch_cifar_models.py: no twin for arch '{arch}'")


def load_safetensors(path):
    """{name: tensor} and the metadata of a safetensors file of float32 and int64 tensors."""
    dtypes = {"F32": torch.float32, "I64": torch.int64}
    with open(path, "rb") as f:
        data = f.read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    meta = header.pop("__metadata__", {})
    body = data[8 + size:]
    tensors = {}
    for name, t in header.items():
        if t["dtype"] not in dtypes:
            sys.exit(f"{path}: tensor {name} is {t['dtype']}, expected one of {list(dtypes)}")
        begin, end = t["data_offsets"]
        tensors[name] = torch.frombuffer(bytearray(body[begin:end]),
                                         dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    return tensors, meta


def check(path, rtol):
    tensors, meta = load_safetensors(path)
    model = build(meta["arch"], int(meta["classes"]))
    state = {k: v for k, v in tensors.items() if k not in ("input", "logits")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        sys.exit(f"{path}: names differ from the twin: missing {missing}, unexpected {unexpected}")
    model.train(meta.get("training", "1") == "1")
    with torch.no_grad():
        logits = model(tensors["input"])
    want = tensors["logits"]
    err = (logits - want).abs().max().item()
    scale = want.abs().max().item()
    print(f"{meta['arch']} classes={meta['classes']}: {len(state)} tensors loaded, "
          f"max |torch - sparsetrain| = {err:.3g}, max |logit| = {scale:.3g}")
    if err > rtol * scale:
        sys.exit(f"{meta['arch']}: logits differ by {err:.3g} > {rtol} x {scale:.3g}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("count")
    c.add_argument("arch")
    c.add_argument("classes", type=int)
    k = sub.add_parser("check")
    k.add_argument("file")
    k.add_argument("--rtol", type=float, default=1e-4)
    a = p.parse_args()
    if a.cmd == "count":
        m = build(a.arch, a.classes)
        print(sum(p.numel() for p in m.parameters() if p.requires_grad))
    else:
        check(a.file, a.rtol)


if __name__ == "__main__":
    main()
