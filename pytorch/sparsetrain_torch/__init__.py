"""sparsetrain's gradient sparsifiers as a PyTorch DDP comm hook.

    import sparsetrain_torch as stt
    state = stt.HookState("micro", density=0.01, sp={"up": 1.1}, process_group=None)
    ddp.register_comm_hook(state, stt.hook)

The selection, error feedback and exchange of every bucket run in the same C++ code as
the sparsetrain CLI (docs/PYTORCH.md), over DDP's own process group.
"""
import concurrent.futures

import torch
import torch.distributed as dist

from . import _sparsetrain_torch as _core

__all__ = ["HookState", "hook", "sparsifiers"]


def sparsifiers():
    """Every method the registry lists (`sparsetrain sparsifiers`)."""
    return list(_core.sparsifier_names())


def _text(value):
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


class HookState:
    """One DDP model's sparsifier state: every bucket's residual and the method's rule state.

    method, density and sp are the CLI's --sparsifier, --density and --sp (values may be
    numbers or strings); dense_warmup_iters is --dense-warmup-iters and seed is --seed.
    process_group is DDP's group (None: the default group). Bad input raises ValueError
    with one line.
    """

    def __init__(self, method, density=0.01, sp=None, process_group=None, seed=0,
                 dense_warmup_iters=0):
        self.process_group = process_group
        group = self._group()
        sp = {str(k): _text(v) for k, v in (sp or {}).items()}
        self._core = _core._State(str(method), float(density), sp, int(seed),
                                  int(dense_warmup_iters), group.size())
        self.method, self.density, self.sp = str(method), float(density), sp
        self.step = 0          # DDP iterations finished (is_last buckets seen)
        self._fresh = True     # this DDP instance has not finished an iteration yet
        self._layout = {}      # bucket index -> its tensors' shapes (DDP's final layout)
        self._worker = None    # the thread that exchanges buckets off the backward pass

    def _group(self):
        if self.process_group is not None:
            return self.process_group
        if not dist.is_initialized():
            raise ValueError("sparsetrain_torch.HookState: torch.distributed is not "
                             "initialised (call init_process_group or pass process_group)")
        return dist.distributed_c10d._get_default_group()

    def exchange(self, index, buffer, gradients, iteration):
        """Exchanges one bucket in place with the CLI's SparsifyHook (tests call this)."""
        self._core.exchange(int(index), buffer, list(gradients), int(iteration), self._group())

    def finish_step(self):
        self._core.finish_step()

    def _exchange_later(self, index, buffer, gradients, last):
        """Exchanges the bucket on the state's worker thread and returns DDP's future at once,
        so the backward pass goes on computing the next buckets while this one is selected and
        sent, as DDP's own allreduce overlaps it. DDP waits on every future before backward()
        returns. One worker issues every rank's collectives in DDP's bucket order, which is the
        same on every rank."""
        if self._worker is None:
            # OpenMP keeps a thread count per thread: without this the worker's parallel
            # regions (the selection kernels) would each start a team of one thread per
            # core, crowding the backward pass it runs beside (ResNet-20 on 2 ranks: 154 ms
            # a step against 119).
            self._worker = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="sparsetrain_torch",
                initializer=torch.set_num_threads, initargs=(torch.get_num_threads(),))
        fut = torch.futures.Future()
        step = self.step

        def run():
            try:
                self.exchange(index, buffer, gradients, step)
                if last:
                    self.finish_step()
                fut.set_result(buffer)
            except BaseException as e:  # DDP's wait raises it in backward()
                fut.set_exception(e)

        self._worker.submit(run)
        return fut

    def stats(self):
        """The sp_* figures of the last sparsified iteration, named as the CLI's metrics."""
        return dict(self._core.stats())

    def residual(self, index):
        """The bucket's error-feedback residual on this rank (None before its first use)."""
        return self._core.residual(int(index))

    def state_dict(self):
        """Every rank's residuals and rule state (collective: call it on every rank)."""
        rows = [None] * self._group().size()
        dist.all_gather_object(rows, self._core.save_row(), group=self._group())
        return {"method": self.method, "density": self.density, "sp": dict(self.sp),
                "step": self.step, "layout": dict(self._layout),
                "world_size": len(rows),
                "rows": [torch.frombuffer(bytearray(r), dtype=torch.uint8) if r else
                         torch.zeros(0, dtype=torch.uint8) for r in rows]}

    def load_state_dict(self, state):
        """Restores state_dict(): on as many ranks, or re-split for another world size by
        the CLI's rules (or refused in one line). Collective when the world size changed."""
        if state.get("method") != self.method:
            raise ValueError(f"load_state_dict: the state holds method {state.get('method')!r}, "
                             f"this HookState uses {self.method!r}")
        rows = [bytes(r.numpy().tobytes()) for r in state["rows"]]
        self._core.load_rows(rows, self._group())
        self.step = int(state["step"])
        self._layout = {int(k): [tuple(s) for s in v] for k, v in state["layout"].items()}


def _allreduce_average(state, bucket):
    """DDP's default exchange: the bucket averaged by one allreduce."""
    group = state._group()
    buffer = bucket.buffer().div_(group.size())
    fut = dist.all_reduce(buffer, group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def _final_parts(layout, grads):
    """The final buckets a bucket of DDP's first layout holds: [(index, its gradients in the
    final bucket's order)], when the bucket's tensors are exactly those of some final
    buckets and every shape names one tensor; else None (the iteration is then dense)."""
    shapes = [tuple(g.shape) for g in grads]
    if len(set(shapes)) != len(shapes):
        return None
    by_shape = dict(zip(shapes, grads))
    inside = [b for b in sorted(layout) if all(s in by_shape for s in layout[b])]
    if sum(len(layout[b]) for b in inside) != len(shapes):
        return None
    return [(b, [by_shape[s] for s in layout[b]]) for b in inside]


def _exchange_as(state, index, grads):
    """Exchanges the gradients as final bucket `index`: on their slice of the buffer when
    they lie there in order, else through a gathered copy."""
    first, n = grads[0], sum(g.numel() for g in grads)
    flat = first.reshape(-1)
    if all(g.data_ptr() == first.data_ptr() + 4 * sum(h.numel() for h in grads[:i])
           for i, g in enumerate(grads)):
        flat = torch.as_strided(first, (n,), (1,))
        state.exchange(index, flat, grads, state.step)
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    views = list(torch.split(flat, [g.numel() for g in grads]))
    state.exchange(index, flat, [v.view(g.shape) for v, g in zip(views, grads)], state.step)
    for v, g in zip(views, grads):
        g.copy_(v.view(g.shape))


def hook(state, bucket):
    """The DDP comm hook: register with ddp.register_comm_hook(state, sparsetrain_torch.hook).

    DDP rebuilds its buckets after its first iteration, in the order the gradients became
    ready; the state is keyed by the final buckets' indices. A new DDP instance's first
    iteration is averaged densely, as PyTorch's PowerSGD hook does, unless the state knows
    the final layout (it was loaded with load_state_dict): a first bucket made of final
    buckets is then exchanged as those buckets, so a resume continues bit for bit.
    After that, each bucket is exchanged on the state's worker thread while backward goes
    on, and the returned future completes when it is done.
    """
    index = bucket.index()
    buffer = bucket.buffer()
    grads = sorted(bucket.gradients(), key=lambda g: g.data_ptr())
    if buffer.dtype != torch.float32 or buffer.device.type != "cpu":
        state.exchange(index, buffer, grads, state.step)  # refuses in one line
    if not state._fresh:
        state._layout[index] = [tuple(g.shape) for g in grads]
        fut = state._exchange_later(index, buffer, grads, bucket.is_last())
        if bucket.is_last():
            state.step += 1
        return fut
    parts = _final_parts(state._layout, grads)
    for b, tensors in parts or []:
        _exchange_as(state, b, tensors)
    if parts is None:
        fut = _allreduce_average(state, bucket)
    else:
        fut = torch.futures.Future()
        fut.set_result(buffer)
    if bucket.is_last():
        state.finish_step()
        state.step += 1
        state._fresh = False
    return fut
