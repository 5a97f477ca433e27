"""Every bad input to sparsetrain_torch is a ValueError of one line naming it: an unknown
method or --sp key, a value out of range, a bucket of a dtype or device the hook does not
exchange, a process group of another size than the state's, another method's state."""
import sys

import torch
import torch.distributed as dist

import ddp_testing
import sparsetrain_torch as stt


def worker(rank, world):
    check = ddp_testing.one_line_error
    lines = [
        check(lambda: stt.HookState("nosuch"), "nosuch"),
        check(lambda: stt.HookState("micro", sp={"bogus": 1}), "bogus"),
        check(lambda: stt.HookState("micro", density=1.5), "density", "1.5"),
        check(lambda: stt.HookState("micro", density=0), "density"),
        check(lambda: stt.HookState("topk", sp={"scope": "layer"}), "scope", "layer"),
        check(lambda: stt.HookState("micro", dense_warmup_iters=-1), "warmup"),
    ]
    state = stt.HookState("micro", density=0.1)
    double = torch.zeros(64, dtype=torch.float64)
    lines.append(check(lambda: state.exchange(0, double, [double], 0), "Double", "float32"))
    meta = torch.empty(64, device="meta")
    lines.append(check(lambda: state.exchange(0, meta, [meta], 0), "meta", "CPU"))
    # A group of one rank given to a state made for the two of the default group.
    groups = [dist.new_group([r]) for r in range(world)]
    state.process_group = groups[rank]
    buf = torch.ones(64)
    lines.append(check(lambda: state.exchange(0, buf, [buf], 0), "1 ranks", "world_size 2"))
    state.process_group = None
    topk = stt.HookState("topk", density=0.1).state_dict()
    lines.append(check(lambda: state.load_state_dict(topk), "topk", "micro"))
    if rank == 0:
        for line in lines:
            print("refused:", line)
        print(f"{len(lines)} refusals, each one line")


def main():
    ddp_testing.run_world(2, worker)


if __name__ == "__main__":
    sys.exit(main())
