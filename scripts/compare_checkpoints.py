#!/usr/bin/python3
"""Compares two sparsetrain checkpoints (safetensors) tensor by tensor, element by element:
the check that CUDA ranks and CPU ranks reached the same parameters after the same steps.

  scripts/compare_checkpoints.py A.safetensors B.safetensors [--rtol 1e-3] [--prefix ""]

A tensor passes when max |a - b| <= rtol * max(max |a|, 1e-6); tensors present in only one
file are a failure. Prints one line (tensors, elements, the worst tensor and its relative
difference); exit 0 when every tensor passed, 1 otherwise, 2 on a file it cannot read.
"""
import argparse
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "I32": np.int32, "I64": np.int64, "F16": np.float16,
          "U8": np.uint8, "BF16": np.uint16}


def read(path):
    """{name: numpy array} of a safetensors file (metadata skipped)."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
        (n,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8:8 + n])
    except (OSError, ValueError, struct.error) as e:
        sys.exit(f"compare_checkpoints: cannot read {path}: {e}")
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in DTYPES:
            sys.exit(f"compare_checkpoints: {path}: tensor {name} has dtype {info['dtype']}")
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--prefix", default="", help="compare only tensors whose name starts so")
    args = ap.parse_args()
    a, b = read(args.a), read(args.b)
    names = sorted(k for k in set(a) | set(b) if k.startswith(args.prefix))
    missing = [k for k in names if k not in a or k not in b]
    if missing:
        print(f"{len(missing)} tensor(s) in only one file, first {missing[0]}")
        return 1
    worst, worst_name, elements, failed = 0.0, "", 0, 0
    for k in names:
        x, y = a[k].astype(np.float64), b[k].astype(np.float64)
        if x.shape != y.shape:
            print(f"{k}: shape {x.shape} against {y.shape}")
            return 1
        elements += x.size
        if x.size == 0:
            continue
        rel = float(np.max(np.abs(x - y))) / max(float(np.max(np.abs(x))), 1e-6)
        failed += rel > args.rtol
        if rel >= worst:
            worst, worst_name = rel, k
    print(f"{len(names)} tensors, {elements} elements, largest relative difference "
          f"{worst:.2e} ({worst_name}), {failed} above {args.rtol:g}")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
