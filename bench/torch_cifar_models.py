"""PyTorch twins of sparsetrain's CIFAR CNNs: GoogLeNet, SENet-18, SE-ResNet-18,
ResNet-18 and ResNet-152 (kuangliu/pytorch-cifar) and Inception-v4 (weiaicunzai/
pytorch-cifar100) (models/googlenet.h, models/senet.h, models/resnet_cifar.h,
models/inception_v4.h), written in plain torch.nn with the same module names, so a state
dict is a sparsetrain model's parameters and buffers by name; NCF's twin is torch_ncf.py
(arch "ncf", CLASSES given as USERS,ITEMS).

  torch_cifar_models.py count ARCH CLASSES   prints the trainable parameter count
  torch_cifar_models.py check FILE           loads a file written by model_logits (its
      parameters, buffers, input and logits), runs the twin on the input and checks the
      logits agree within --rtol (relative to the largest logit) and the twin holds as many
      numbers as the file's parameters and buffers; exit 1 otherwise.
  torch_cifar_models.py check FILE --checkpoint CKPT
      the same with the weights read from CKPT, a checkpoint `sparsetrain train` wrote
      (FILE from `model_logits --checkpoint CKPT`: input and logits in evaluation mode).

load_checkpoint(path) gives a twin with a sparsetrain checkpoint's weights loaded.
"""
import argparse
import copy
import json
import struct
import sys
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_ncf


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


class BasicBlock(nn.Module):
    """kuangliu's BasicBlock: two 3x3 convolutions, a 1x1 conv + BN shortcut on a change."""
    expansion = 1

    def __init__(self, inp, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = shortcut(inp, planes, stride)

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    """kuangliu's Bottleneck: 1x1 reduce, 3x3 with the stride, 1x1 expand by 4."""
    expansion = 4

    def __init__(self, inp, planes, stride):
        super().__init__()
        out = planes * self.expansion
        self.conv1 = nn.Conv2d(inp, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.shortcut = shortcut(inp, out, stride)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def shortcut(inp, out, stride):
    if stride == 1 and inp == out:
        return nn.Sequential()
    return nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))


class CifarResNet(nn.Module):
    """kuangliu's CIFAR ResNet: 3x3 stem of 64, no max-pool, four stages, then `pool`
    (avg-pool 4 unless given); with squeeze-and-excitation blocks, SENet-18 and
    SE-ResNet-18."""

    def __init__(self, block, blocks, classes, pool=None):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        inp = 64
        for i, (planes, n) in enumerate(zip((64, 128, 256, 512), blocks)):
            layers = []
            for b in range(n):
                layers.append(block(inp, planes, 2 if i > 0 and b == 0 else 1))
                inp = planes * getattr(block, "expansion", 1)
            setattr(self, f"layer{i + 1}", nn.Sequential(*layers))
        self.pool = pool or nn.AvgPool2d(4)
        self.linear = nn.Linear(inp, classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        for i in range(4):
            out = getattr(self, f"layer{i + 1}")(out)
        return self.linear(self.pool(out).flatten(1))


class BasicConv2d(nn.Module):
    """Inception's unit: convolution without bias, BatchNorm, ReLU."""

    def __init__(self, inp, out, kernel, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(inp, out, kernel, stride, padding, bias=False)
        self.bn = nn.BatchNorm2d(out)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


def cat(x, *branches):
    return torch.cat([b(x) for b in branches], 1)


class InceptionStem(nn.Module):
    """The stem of Szegedy et al. 2016, fig. 3, with 3x3 convolutions for 32x32 input."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Sequential(BasicConv2d(3, 32, 3), BasicConv2d(32, 32, 3, padding=1),
                                   BasicConv2d(32, 64, 3, padding=1))
        self.branch3x3_conv = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3_pool = nn.MaxPool2d(3, 1, 1)
        self.branch7x7a = nn.Sequential(BasicConv2d(160, 64, 1),
                                        BasicConv2d(64, 64, (7, 1), padding=(3, 0)),
                                        BasicConv2d(64, 64, (1, 7), padding=(0, 3)),
                                        BasicConv2d(64, 96, 3, padding=1))
        self.branch7x7b = nn.Sequential(BasicConv2d(160, 64, 1), BasicConv2d(64, 96, 3, padding=1))
        self.branchpoola = nn.MaxPool2d(3, 1, 1)
        self.branchpoolb = BasicConv2d(192, 192, 3, padding=1)

    def forward(self, x):
        x = cat(self.conv1(x), self.branch3x3_conv, self.branch3x3_pool)
        x = cat(x, self.branch7x7a, self.branch7x7b)
        return cat(x, self.branchpoola, self.branchpoolb)


def avg_then(inp, out):
    return nn.Sequential(nn.AvgPool2d(3, 1, 1), BasicConv2d(inp, out, 1))


class InceptionA(nn.Module):
    def __init__(self, inp):
        super().__init__()
        self.branch3x3stack = nn.Sequential(BasicConv2d(inp, 64, 1),
                                            BasicConv2d(64, 96, 3, padding=1),
                                            BasicConv2d(96, 96, 3, padding=1))
        self.branch3x3 = nn.Sequential(BasicConv2d(inp, 64, 1), BasicConv2d(64, 96, 3, padding=1))
        self.branch1x1 = BasicConv2d(inp, 96, 1)
        self.branchpool = avg_then(inp, 96)

    def forward(self, x):
        return cat(x, self.branch3x3stack, self.branch3x3, self.branch1x1, self.branchpool)


class ReductionA(nn.Module):
    def __init__(self, inp, k, l, m, n):
        super().__init__()
        self.branch3x3stack = nn.Sequential(BasicConv2d(inp, k, 1),
                                            BasicConv2d(k, l, 3, padding=1),
                                            BasicConv2d(l, m, 3, stride=2))
        self.branch3x3 = BasicConv2d(inp, n, 3, stride=2)
        self.branchpool = nn.MaxPool2d(3, 2)

    def forward(self, x):
        return cat(x, self.branch3x3stack, self.branch3x3, self.branchpool)


class InceptionB(nn.Module):
    def __init__(self, inp):
        super().__init__()
        self.branch7x7stack = nn.Sequential(
            BasicConv2d(inp, 192, 1), BasicConv2d(192, 192, (1, 7), padding=(0, 3)),
            BasicConv2d(192, 224, (7, 1), padding=(3, 0)),
            BasicConv2d(224, 224, (1, 7), padding=(0, 3)),
            BasicConv2d(224, 256, (7, 1), padding=(3, 0)))
        self.branch7x7 = nn.Sequential(BasicConv2d(inp, 192, 1),
                                       BasicConv2d(192, 224, (1, 7), padding=(0, 3)),
                                       BasicConv2d(224, 256, (7, 1), padding=(3, 0)))
        self.branch1x1 = BasicConv2d(inp, 384, 1)
        self.branchpool = avg_then(inp, 128)

    def forward(self, x):
        return cat(x, self.branch1x1, self.branch7x7, self.branch7x7stack, self.branchpool)


class ReductionB(nn.Module):
    def __init__(self, inp):
        super().__init__()
        self.branch7x7 = nn.Sequential(BasicConv2d(inp, 256, 1),
                                       BasicConv2d(256, 256, (1, 7), padding=(0, 3)),
                                       BasicConv2d(256, 320, (7, 1), padding=(3, 0)),
                                       BasicConv2d(320, 320, 3, stride=2, padding=1))
        self.branch3x3 = nn.Sequential(BasicConv2d(inp, 192, 1),
                                       BasicConv2d(192, 192, 3, stride=2, padding=1))
        self.branchpool = nn.MaxPool2d(3, 2, 1)

    def forward(self, x):
        return cat(x, self.branch3x3, self.branch7x7, self.branchpool)


class InceptionC(nn.Module):
    def __init__(self, inp):
        super().__init__()
        self.branch3x3stack = nn.Sequential(BasicConv2d(inp, 384, 1),
                                            BasicConv2d(384, 448, (1, 3), padding=(0, 1)),
                                            BasicConv2d(448, 512, (3, 1), padding=(1, 0)))
        self.branch3x3stacka = BasicConv2d(512, 256, (1, 3), padding=(0, 1))
        self.branch3x3stackb = BasicConv2d(512, 256, (3, 1), padding=(1, 0))
        self.branch3x3 = BasicConv2d(inp, 384, 1)
        self.branch3x3a = BasicConv2d(384, 256, (3, 1), padding=(1, 0))
        self.branch3x3b = BasicConv2d(384, 256, (1, 3), padding=(0, 1))
        self.branch1x1 = BasicConv2d(inp, 256, 1)
        self.branchpool = avg_then(inp, 256)

    def forward(self, x):
        stack = self.branch3x3stack(x)
        pair = self.branch3x3(x)
        return torch.cat([self.branch1x1(x), self.branch3x3a(pair), self.branch3x3b(pair),
                          self.branch3x3stacka(stack), self.branch3x3stackb(stack),
                          self.branchpool(x)], 1)


def stage(block, inp, n):
    """n blocks named as the reference names them ("InceptionA_0", ...)."""
    return nn.Sequential(OrderedDict((f"{block.__name__}_{i}", block(inp)) for i in range(n)))


class InceptionV4(nn.Module):
    """Inception-v4 (Szegedy et al. 2016, fig. 9) for 32x32 input, as weiaicunzai's
    pytorch-cifar100: 4 A, ReductionA(k=192, l=224, m=256, n=384), 7 B, ReductionB, 3 C,
    average pool 7, dropout 0.2, linear."""

    def __init__(self, classes):
        super().__init__()
        self.stem = InceptionStem()
        self.inception_a = stage(InceptionA, 384, 4)
        self.reduction_a = ReductionA(384, 192, 224, 256, 384)
        self.inception_b = stage(InceptionB, 1024, 7)
        self.reduction_b = ReductionB(1024)
        self.inception_c = stage(InceptionC, 1536, 3)
        self.avgpool = nn.AvgPool2d(7)
        self.dropout = nn.Dropout2d(0.2)
        self.linear = nn.Linear(1536, classes)

    def forward(self, x):
        x = self.reduction_a(self.inception_a(self.stem(x)))
        x = self.inception_c(self.reduction_b(self.inception_b(x)))
        return self.linear(self.dropout(self.avgpool(x)).flatten(1))


def build(arch, classes):
    if arch == "ncf":
        return torch_ncf.build(classes)
    classes = int(classes)
    if arch == "resnet18_cifar":
        return CifarResNet(BasicBlock, (2, 2, 2, 2), classes)
    if arch == "resnet152_cifar":
        return CifarResNet(Bottleneck, (3, 8, 36, 3), classes)
    if arch == "inception_v4":
        return InceptionV4(classes)
    if arch == "googlenet":
        return GoogLeNet(classes)
    if arch == "senet18":
        return CifarResNet(PreActSEBlock, (2, 2, 2, 2), classes, nn.AvgPool2d(4))
    if arch == "se_resnet18":
        return CifarResNet(BasicSEBlock, (2, 2, 2, 2), classes, nn.AdaptiveAvgPool2d(1))
    sys.exit(f"torch_cifar_models.py: no twin for arch '{arch}'")


def load_safetensors(path):
    """{name: tensor} and the metadata of a safetensors file: 8 bytes of header length
    (little endian), a JSON header {name: {dtype, shape, data_offsets}, "__metadata__":
    {key: text}}, then the data. sparsetrain writes float32, int32 and int64 tensors."""
    dtypes = {"F32": torch.float32, "I32": torch.int32, "I64": torch.int64}
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


def classes_of(tensors, path):
    """The number of classes: the rows of the last layer's weight ("linear" or "fc"); for
    NCF "USERS,ITEMS", the rows of its GMF tables."""
    if "mf.embed.user.weight" in tensors:
        return f"{len(tensors['mf.embed.user.weight'])},{len(tensors['mf.embed.item.weight'])}"
    for name in ("linear.weight", "fc.weight", "classifier.weight"):
        if name in tensors:
            return tensors[name].shape[0]
    sys.exit(f"{path}: no linear.weight, fc.weight or classifier.weight to count classes from")


def load_checkpoint(path, arch=None):
    """A twin holding the model state of a checkpoint `sparsetrain train --out DIR` wrote
    (DIR/checkpoint.safetensors): the parameters and BatchNorm buffers under the twin's
    names, beside the trainer's state (optimizer.<param>.momentum_buffer, ...), which is
    skipped; the architecture from the file's "arch" metadata unless given. Strict as
    load_state_dict: every tensor of the twin present with its shape."""
    tensors, meta = load_safetensors(path)
    arch = arch or meta.get("arch")
    if arch is None:
        sys.exit(f"{path}: no 'arch' in the checkpoint's metadata; pass the architecture")
    if meta.get("arch", arch) != arch:
        sys.exit(f"{path}: the checkpoint is a {meta['arch']}, not {arch}")
    model = build(arch, classes_of(tensors, path))
    want = model.state_dict()
    missing = [k for k in want if k not in tensors]
    if missing:
        sys.exit(f"{path}: the checkpoint lacks {len(missing)} tensors of the {arch} twin, "
                 f"first {missing[:3]}")
    for k, v in want.items():
        if tuple(tensors[k].shape) != tuple(v.shape):
            sys.exit(f"{path}: {k} has shape {list(tensors[k].shape)}, the twin's is {list(v.shape)}")
    model.load_state_dict({k: tensors[k] for k in want})
    return model, len(tensors) - len(want)


def set_mode(model, training):
    model.train(training)
    for m in model.modules():  # model_logits runs its dropout as the identity too
        if isinstance(m, nn.modules.dropout._DropoutNd):
            m.eval()
    return model


def float32_noise(model, x, training):
    """max |float32 twin - float64 twin| on x: how far float32 arithmetic alone moves the
    logits. Deep networks at initialisation in training mode lose most of float32's
    digits to BatchNorm's subtraction of the batch mean (ResNet-152 and Inception-v4:
    a few 1e-4 of the largest logit), so their check is against this, not 1e-4."""
    wide = copy.deepcopy(model).double()
    set_mode(wide, training)
    with torch.no_grad():
        y64 = wide(x.double())
        return (model(x).double() - y64).abs().max().item(), y64


def check(path, rtol, checkpoint=None, noise_factor=None):
    tensors, meta = load_safetensors(path)
    if checkpoint:
        model, skipped = load_checkpoint(checkpoint, meta["arch"])
        state = model.state_dict()
        print(f"{checkpoint}: {len(state)} tensors loaded, {skipped} trainer tensors skipped")
        # model_logits --checkpoint also wrote what sparsetrain's loader restored.
        for k, v in state.items():
            got = tensors.get("loaded." + k)
            if got is None or not torch.equal(got, v):
                sys.exit(f"{checkpoint}: {k} differs from what sparsetrain loaded")
    else:
        model = build(meta["arch"], meta["classes"])
        state = {k: v for k, v in tensors.items() if k not in ("input", "logits")}
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            sys.exit(f"{path}: names differ from the twin: missing {missing}, "
                     f"unexpected {unexpected}")
    ours = sum(v.numel() for v in model.state_dict().values())
    theirs = sum(v.numel() for k, v in tensors.items() if k not in ("input", "logits"))
    print(f"parameters and buffers: twin {ours}, sparsetrain {theirs}")
    if ours != theirs:
        sys.exit(f"{meta['arch']}: the twin holds {ours} numbers, sparsetrain {theirs}")
    training = meta.get("training", "1") == "1"
    set_mode(model, training)
    with torch.no_grad():
        logits = model(tensors["input"])
    want = tensors["logits"]
    err = (logits - want).abs().max().item()
    scale = want.abs().max().item()
    bound = rtol * scale
    print(f"{meta['arch']} classes={meta['classes']}: {len(state)} tensors loaded, "
          f"max |torch - sparsetrain| = {err:.3g}, max |logit| = {scale:.3g}")
    if noise_factor is not None:
        noise, wide = float32_noise(model, tensors["input"], training)
        err = (want.double() - wide).abs().max().item()
        bound = max(bound, noise_factor * noise)
        print(f"  against the float64 twin: sparsetrain {err:.3g}, torch float32 {noise:.3g}; "
              f"bound max({rtol} x {scale:.3g}, {noise_factor} x {noise:.3g}) = {bound:.3g}")
    if err > bound:
        sys.exit(f"{meta['arch']}: logits differ by {err:.3g} > {bound:.3g}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("count")
    c.add_argument("arch")
    c.add_argument("classes", help="the number of classes; USERS,ITEMS for ncf")
    k = sub.add_parser("check")
    k.add_argument("file")
    k.add_argument("--rtol", type=float, default=1e-4)
    k.add_argument("--checkpoint", help="read the weights from this sparsetrain checkpoint")
    k.add_argument("--float32-noise", type=float, metavar="F",
                   help="also pass when sparsetrain is within F times torch float32's own "
                        "distance from a float64 twin (deep networks)")
    a = p.parse_args()
    if a.cmd == "count":
        m = build(a.arch, a.classes)
        print(sum(p.numel() for p in m.parameters() if p.requires_grad))
    else:
        check(a.file, a.rtol, a.checkpoint, a.float32_noise)


if __name__ == "__main__":
    main()
