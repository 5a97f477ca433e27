"""Shared by the sparsetrain_torch tests: gloo worlds of torch.multiprocessing processes and
the one-line refusal check."""
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _worker(rank, world, init_file, fn, args):
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def run_world(world, fn, *args):
    """Runs fn(rank, world, *args) on `world` gloo ranks (one process each); raises when a
    rank fails."""
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_worker, args=(world, os.path.join(tmp, "init"), fn, args), nprocs=world,
                 join=True)


def one_line_error(fn, *words):
    """fn() must raise ValueError with one line naming every word; returns the line."""
    try:
        fn()
    except ValueError as e:
        line = str(e)
        assert "\n" not in line.strip(), f"not one line: {line!r}"
        for w in words:
            assert w in line, f"{w!r} not named in: {line}"
        return line
    raise AssertionError(f"no refusal (expected one naming {words})")


def flat_views(buf, splits):
    """Views of a flat bucket buffer as the gradients DDP lays out in it."""
    views, at = [], 0
    for shape in splits:
        n = int(torch.tensor(shape).prod())
        views.append(buf[at:at + n].view(*shape))
        at += n
    assert at == buf.numel()
    return views
