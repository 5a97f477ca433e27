#!/usr/bin/env python3
"""Every #include in the library runs downwards: a folder includes only the folders its
CMake library depends on (docs/ARCHITECTURE.md, the folder table), and inside sparsify/
the kernels sit below the device interface (bulk/), which sits below the methods. Prints
each include that runs back up and exits 1 when there is one.
  tests/scripts/include_layers_test.py [SOURCE_ROOT]
"""
import pathlib
import re
import sys

# Each folder's direct dependencies (the DEPS of its st_add_library).
DEPENDS = {
    "core": [],
    "layers": ["core"],
    "data": ["core"],
    "models": ["layers"],
    "optim": ["layers"],
    "comm": ["core", "layers"],
    "sparsify": ["comm", "core"],
    "train": ["sparsify", "models", "optim", "data", "comm"],
    "apps": ["train"],
}
# sparsify/ inside: plain structs and per-element formulas at the bottom, then the kernels,
# the device interface, the methods (and the hook), the conformance checks on top.
FORMULAS = {"partition_math.h", "quant_math.h", "quant_spec.h", "transform_pieces.h",
            "sidco_moments.h"}
SPARSIFY_LEVEL = {"formula": 0, "kernels": 1, "bulk": 2, "method": 3, "testing": 4}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".h", ".cpp", ".cu", ".cuh")


def reachable(folder):
    seen, todo = set(), [folder]
    while todo:
        for d in DEPENDS[todo.pop()]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen | {folder}


def sparsify_level(path):
    parts = path.split("/")
    if len(parts) == 2:
        return SPARSIFY_LEVEL["formula" if parts[1] in FORMULAS else "method"]
    return SPARSIFY_LEVEL[parts[1]] if parts[1] in SPARSIFY_LEVEL else SPARSIFY_LEVEL["method"]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    wrong, checked = [], 0
    for folder in DEPENDS:
        for f in sorted((root / folder).rglob("*")):
            if f.suffix not in SOURCES:
                continue
            rel = f.relative_to(root).as_posix()
            for inc in INCLUDE.findall(f.read_text(errors="replace")):
                top = inc.split("/")[0]
                if top not in DEPENDS:
                    continue  # generated headers, system and third-party ones
                checked += 1
                if top not in reachable(folder):
                    wrong.append(f"{rel} includes {inc}: {folder}/ does not depend on {top}/")
                elif folder == top == "sparsify" and sparsify_level(inc) > sparsify_level(rel):
                    wrong.append(f"{rel} includes {inc}: a lower layer of sparsify/ reaching up")
    for line in wrong:
        print(line)
    print(f"include_layers: {checked} project includes checked, {len(wrong)} running back up")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
