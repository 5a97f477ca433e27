"""The hook hands each bucket to the state's worker thread and returns DDP's future at once,
so backward() goes on computing while the bucket is selected and sent: on 2 gloo ranks, with
the exchange held back, the futures of two buckets are still pending after both hook calls;
once released, the buckets are exchanged in DDP's order and averaged. An exchange that
fails (a bucket of another size under a known index) fails its future with the one-line
refusal, which DDP raises from backward()."""
import sys
import threading

import torch

import ddp_testing
import sparsetrain_torch as stt


class Bucket:
    """The part of DDP's GradBucket that the hook reads."""

    def __init__(self, index, buffer, last):
        self._index, self._buffer, self._last = index, buffer, last

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def gradients(self):
        return [self._buffer]

    def is_last(self):
        return self._last


def worker(rank, world):
    state = stt.HookState("topk", density=1.0)  # every element: the exchange is the average
    state._fresh = False  # as after DDP's first iteration, when its buckets are final
    release, order = threading.Event(), []
    exchange = state.exchange

    def held_exchange(index, buffer, grads, iteration):
        assert release.wait(20), "the exchange was never released"
        order.append(index)
        exchange(index, buffer, grads, iteration)

    state.exchange = held_exchange
    buffers = [torch.full((1000,), float(rank + 1)), torch.full((300,), 10.0 * (rank + 1))]
    futs = [stt.hook(state, Bucket(i, b, i == 1)) for i, b in enumerate(buffers)]
    assert not any(f.done() for f in futs), "the hook waited for the exchange"
    assert state.step == 1
    release.set()
    torch.futures.wait_all(futs)
    assert order == [0, 1], order
    in_order = list(order)
    mean = sum(range(1, world + 1)) / world
    assert torch.equal(futs[0].value(), torch.full((1000,), mean)), futs[0].value()[:4]
    assert torch.equal(futs[1].value(), torch.full((300,), 10.0 * mean)), futs[1].value()[:4]

    wrong = stt.hook(state, Bucket(0, torch.ones(64), True))
    try:
        wrong.wait()
    except Exception as e:  # noqa: BLE001 - the future carries the refusal as it was raised
        line = str(e)
    else:
        raise AssertionError("a bucket of another size was exchanged")
    assert "bucket 0" in line and "1000" in line and "64" in line, line
    if rank == 0:
        print(f"2 buckets pending after the hook, exchanged in order {in_order}; refused: {line}")


def main():
    ddp_testing.run_world(2, worker)


if __name__ == "__main__":
    sys.exit(main())
