"""gpudash's hooks inside a job (``gpudash -- CMD``), imported once the job has imported torch.

Standard library and the job's own torch only. What they measure, and send to gpudash over the
datagram socket named by ``GPUDASH_JOB_CHANNEL`` (one JSON object a datagram; a full socket drops
it, nothing here ever blocks the job):

- a *step*: one call of the first optimizer's ``step()`` seen (torch's global optimizer step
  post-hook), so a second optimizer in the same iteration, a ``GradScaler`` and gradient
  accumulation's micro-batches are one step; in a job without an optimizer, a backward pass followed
  by the parameters changing in place, or the job's own ``gpudash.track()`` step (``counting.py``);
- its samples (and tokens): the batches ``DataLoader`` iterators handed out since the last step,
  the first dimension of the first tensor (a mapping's ``input_ids``: also its tokens), and the
  time spent inside those ``__next__`` calls, the step's input wait (``loader.py``);
- its time: CUDA events recorded at the step boundary and read back without blocking on a GPU,
  the host clock on the CPU (``timing.py``);
- its host-device syncs and their lines (``syncs.py``, with ``sync_sites.py``; CUDA only);
- a profiler window of N steps when gpudash asks (``window.py``); the time each step had a
  collective outstanding (``comm.py``): its step less that is the rank's own work;
- the model FLOPs of one step, counted once, after a step timed without it (``step_flops.py``);
- memory by kind and the allocator's history on request (``memory_count.py``), an out-of-memory
  error's where (``oom_watch.py``);
- evaluation, checkpoints and compiling between steps, left out of each step's training seconds
  (``phases.py`` with ``phase_signals.py``); where each thread waits, when gpudash asks (``stacks.py``).

What goes to gpudash and what it asks go through ``outbox.py``; what a process says of itself, through
``hello.py``. Any exception inside a hook turns every hook off, with one line on stderr; the job goes
on. An exception of the job's that passes through a hook (a Ctrl-C inside ``loss.backward()``) leaves
no frame of gpudash's in its traceback (``frames.py``; torch's functions the hooks wrap: ``wraps.py``).

When gpudash ends a measuring run (``diagnose``, tune's candidates, ``--steps``, ``--duration``) it
asks every process to end after a step it names — the same on every rank, so that none waits in a
collective for one that left: at that step's boundary the hooks raise ``SystemExit(0)``, which
unwinds the job's own ``finally`` blocks and ends it without a traceback. A process group the job
leaves to its exit is left to it (destroying it in an exit handler hung a DDP job on 2 H200s
whose other rank had left: docs/bench/h200x4-issue74c, call 4).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
from typing import Any

from . import settings as job_settings
from . import wire, wraps
from .comm import CommTimes
from .compile_watch import CompileWatch
from .counting import StepCounting
from .ddp import sharded
from .frames import hidden, install_excepthooks
from .hello import device_of, first_step, hello, worker_hello
from .loader import BatchWatch
from .memory_count import MemoryCount
from .oom_watch import OomWatch
from .outbox import Channel, Outbox
from .phase_signals import PhaseSignals
from .phases import Phases
from .process import backend_settings, multiprocessing_child, settle_threads
from .stacks import FLUSHER, answering
from .step_flops import StepFlopsCount
from .syncs import SyncCount
from .timing import StepTimes
from .window import ProfilerWindow


class Hooks:
    """Everything the job's process measures (one per process)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        channel = Channel(os.environ[wire.CHANNEL_ENV])
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self.world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        self.first_done = False
        self.cuda = False
        self.device = "cpu"  # the device of the tracked optimizer's parameters
        self.flops = StepFlopsCount(torch, channel.send)
        self.steps = 0
        self.syncs: SyncCount | None = None
        self.window = ProfilerWindow(torch, channel.send, self._quiet)
        self.comm = CommTimes(torch, self._quiet)
        self.window.sizes = self.comm  # a window's collectives' bytes
        self.memory = MemoryCount(torch)
        self.slowed = False  # the next step's time holds gpudash's work (a profiler window's end)
        self.handle: Any = None
        self.handles: list[Any] = []  # the optimizer step's pre-hook
        self.on = True
        self.phases = Phases(channel.send, lambda: self.rank)
        self.signals = PhaseSignals(self.phases)
        self.compiles = CompileWatch(channel.send, lambda: self.rank)
        self.signals.compiles = self.compiles
        self.loader = BatchWatch(torch, self.phases, self.memory, self.off)
        self.times = StepTimes(torch, self.phases.min_span_s)
        self.outbox = Outbox(
            channel, self.times, memory=self.memory, comm=self.comm, window=self.window, rank=lambda: self.rank
        )
        self.model_watch: Any = None  # settings.ModelWatch, where asked
        self.counting = StepCounting(torch, self._step, self._switched)  # (a hand update's step: its leaves)
        self.untraced_s: float | None = None  # the latest step's training seconds timed without gpudash's work

    # -- install / uninstall ---------------------------------------------------------------------
    def install(self) -> None:
        import importlib

        optimizer = importlib.import_module("torch.optim.optimizer")  # (torch.optim drops the attribute)
        loader_module = importlib.import_module("torch.utils.data.dataloader")
        job_settings.install(self.torch, loader_module)  # --set, and each DataLoader's site
        self.model_watch = job_settings.watch_model(self.torch)  # the model's calls, where asked
        compiler = getattr(self.torch, "compiler", None)
        eager = compiler.disable if compiler is not None and hasattr(compiler, "disable") else lambda f: f
        # (a compiled optimizer step calls them eagerly)
        self.handles = [optimizer.register_optimizer_step_pre_hook(hidden(eager(self.optimizer_starts)))]
        self.handle = optimizer.register_optimizer_step_post_hook(hidden(eager(self.optimizer_stepped)))
        self.flops.install()
        self.signals.install(self.torch)
        self.comm.install()
        self.memory.connect(self.outbox.channel.send, lambda: self.rank)
        OomWatch(self.torch, self.memory, self.outbox.channel.send, lambda: self.rank, self.phases).install()
        install_excepthooks()  # after the OOM watch's: the traceback it passes on is the job's own
        wraps.wrap_backward(self.torch, self.backward_starts, self.backward_ends, self._quiet)
        wraps.close_first(self.torch, self.window.close)
        os.register_at_fork(after_in_child=self._forked)
        self.loader.install(loader_module)
        atexit.register(self.close)
        threading.Thread(target=self.flush_forever, name=FLUSHER, daemon=True).start()
        if not multiprocessing_child():
            self.outbox.send(hello(self.torch, self.rank, self.outbox.channel.own))
        else:  # a spawned DataLoader worker (or an mp.spawn rank, until it steps): known for its stacks
            self.outbox.worker = True
            self.outbox.send(worker_hello(self.outbox.channel.own))

    def _forked(self) -> None:
        """A forked child (a DataLoader worker): a lock of its own, which no thread here holds, a
        socket of its own, and a thread that answers gpudash's stack requests (it has no flusher)."""
        self.flops.forked()  # the counter's modes, should the fork come inside the counted step
        self.outbox.worker = True
        try:
            self.outbox.forked()
            answering(self.outbox.channel, lambda: self.rank)
            self.outbox.send(worker_hello(self.outbox.channel.own))
        except Exception:  # noqa: BLE001, S110 - a worker without stacks; its batches still count
            pass

    def off(self, why: str) -> None:
        """Every hook off, one line on stderr; the job goes on."""
        if not self.on:
            return
        self.on = False
        self.loader.on = False  # no batch counted from here
        try:
            print(f"gpudash: the job's hooks are off: {why}", file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001, S110 - a closed stderr: gpudash hears it over the channel
            pass
        self.outbox.send({"k": wire.NOTE, "rank": self.rank, "text": f"the job's hooks are off: {why}"})
        self.memory.close()  # first and alone: a sampled step's saved-tensor hooks never left behind
        self.counting.hand.off()
        try:
            for handle in [self.handle, *self.handles]:
                if handle is not None:
                    handle.remove()
            self.loader.uninstall()
            self.signals.uninstall()
            self.compiles.uninstall()
            if self.syncs is not None:
                self.syncs.close()
            self.comm.uninstall()
            self.window.close()
        except Exception:  # noqa: BLE001, S110 - already turning off
            pass
        try:  # apart: a count left running would slow every operator of the job
            self.flops.close()
        except Exception:  # noqa: BLE001, S110 - already turning off
            pass

    def close(self) -> None:
        """At exit: the last steps timed and the sync table (quietly: a CUDA error is said already)."""
        if self.on:
            with contextlib.suppress(Exception):
                self.window.close()
                self.memory.close()
            with self.outbox.lock, contextlib.suppress(Exception):
                self.compiles.at_step(self.steps)  # a compile of the last step's
                self.phases.finish()  # an evaluation after the last step: its own, not the exit's
                self.outbox.flush(final=True)
        if self.world > 1:  # the last thing before the interpreter finalizes (registered first)
            settle_threads()

    def backward_starts(self, tensors: Any) -> None:
        """A backward pass of the job's starts: a hand-updated step may end here; a one-off
        measurement over its time is left."""
        if not self.on:
            return
        try:
            self.counting.backward_starts(tensors)
            self.flops.backward_point(False)
            self.memory.backward_point(False)
        except Exception as exc:  # noqa: BLE001 - a failing hook must not end the job
            self.off(f"{type(exc).__name__}: {exc}")

    def backward_ends(self) -> None:
        """A backward pass has filled the gradients: noted; a one-off measurement inside an
        optimizer's closure stops after its first evaluation."""
        if not self.on:
            return
        try:
            closure = self.counting.backward_ends()
            self.flops.backward_point(closure)
            self.memory.backward_point(closure, ended=True)
        except Exception as exc:  # noqa: BLE001
            self.off(f"{type(exc).__name__}: {exc}")

    # -- the step --------------------------------------------------------------------------------
    def optimizer_starts(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """torch's global optimizer step pre-hook: what runs until its post-hook is the optimizer's."""
        if not self.on:
            return
        try:
            self.counting.optimizer_starts(args, kwargs)
        except Exception as exc:  # noqa: BLE001 - a failing hook must not end the job
            self.off(f"{type(exc).__name__}: {exc}")

    def optimizer_stepped(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """torch's global optimizer step post-hook: a step of the tracked optimizer is the job's."""
        if not self.on:
            return
        try:
            evaluations = self.counting.optimizer_ends()  # its closure's, inside it
            self.memory.seen(optimizer)  # every optimizer the job steps: its memory is the job's too
            if self.counting.tracks(optimizer):  # the job's optimizer (a second one's step is none)
                self._step(optimizer, evaluations)
        except Exception as exc:  # noqa: BLE001 - a failing hook must not end the job
            self.off(f"{type(exc).__name__}: {exc}")

    def tracked_step(self, samples: int, device: str) -> None:
        """The job's own ``gpudash.track()`` step: the job's step where no optimizer steps."""
        if not self.on:
            return
        try:
            if self.counting.tracked(samples):
                self._step(self.counting.leaves(device))
        except Exception as exc:  # noqa: BLE001 - a failing hook must not end the job (nor its tracker)
            self.off(f"{type(exc).__name__}: {exc}")

    def _switched(self, counted: str, before: str) -> None:
        """The job's steps are counted another way from its next step on: gpudash is told."""
        if self.first_done:
            said = {"k": wire.COUNTING, "rank": self.rank, "counted": counted, "before": before}
            self.outbox.send({**said, "step": self.steps + 1})

    def _first(self, optimizer: Any) -> None:
        torch = self.torch
        mono = time.monotonic()
        self.first_done = True
        self.flops.first_step()
        loader_settings = self.loader.first_step()  # the training loader's arguments, as the first step finds them
        self.outbox.worker = False  # (an mp.spawn rank: it steps)
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():  # mp.spawn sets no RANK
            self.rank, self.world = dist.get_rank(), dist.get_world_size()
        device = self.device = device_of(optimizer)
        self.cuda = self.phases.cuda = device.startswith("cuda")
        if self.cuda:
            self.times.on_gpu(torch.cuda.current_stream(torch.device(device)))
        model = job_settings.first_step(torch, self.model_watch, optimizer, device)  # autocast, compile
        parallel = self.comm.settings or sharded(optimizer)  # DDP's arguments, or FSDP2's sharded parameters
        settings = {**backend_settings(torch), **model, **loader_settings, **parallel}
        by = self.counting.by
        name = type(optimizer).__name__ if by == wire.BY_OPTIMIZER else ""
        first = first_step(torch, self.rank, self.world, device, mono, optimizer=name, counted=by, settings=settings)
        if self.cuda and os.environ.get(wire.SITES_ENV, "1") == "1":
            self.syncs = SyncCount(torch, self.phases.waited)  # a wait: training
            self.phases.syncs = self.outbox.syncs = self.syncs
            wraps.quiet_grad(torch, self._quiet)
            first["not_counted"] = self.syncs.not_counted
        if multiprocessing_child():
            self.outbox.send(hello(torch, self.rank, self.outbox.channel.own))
        self.outbox.send(first)

    def _step(self, optimizer: Any, evaluations: int = 0) -> None:
        """A step ends now: ``optimizer`` (or the leaves a hand update wrote) holds the parameters;
        ``evaluations``: its closure's (0: none)."""
        if not self.first_done:
            self._first(optimizer)
        now = time.monotonic()
        self.steps += 1
        syncs = self.syncs
        if syncs is not None:
            syncs.keep_watching()
        # the step's batches: the latest iterator's (the training loop's; not an evaluation loader's)
        loader = self.loader
        drawn = loader.batches.get(loader.last_iterator) or [0, 0, 0.0, 0.0, 0.0, 0]
        samples, tokens, waited, dataset_s, collate_s, nbytes = drawn
        loader.batches.clear()
        if not samples and self.counting.by == wire.BY_TRACK:  # no DataLoader: what gpudash.track() was told
            samples = self.counting.track_samples
        self.counting.track_samples = 0
        train_s = self.phases.at_step(now, loader.last_iterator)
        self.signals.watch_compile()
        if self.signals.compile_watched:
            self.compiles.install()  # (a job that compiles without torch.compile: from here)
        self.compiles.at_step(self.steps)
        count = syncs.count if syncs else None
        # in wire.RECORD_FIELDS' order: its time (MS) is known later; the Dataset's and collation's part of
        # the wait; the time a collective was outstanding (None: none ever)
        record = [self.steps, now, None, samples, tokens, waited, count, 0, train_s, dataset_s, collate_s]
        record += [self.comm.at_step(), nbytes, self.phases.phase_s, self.flops.forwards.stepped()]
        if self.window.running or self.slowed or self.memory.capturing:
            record[wire.PROFILED] = 1  # under the profiler (or after its end), or saved tensors counted: gpudash's too
        self.slowed = False
        if self.flops.running:
            record[wire.PROFILED] = 1  # under the FLOP counter: its time is not the job's
        if syncs is not None:  # the step's syncs by line: the training's own where no phase came before it
            syncs.step_ended(own=train_s is not None and not self.phases.phase_s)
        outbox = self.outbox
        with outbox.lock:
            self.times.add(record, now, train_s)
            if now - outbox.last_send >= outbox.every_s:
                outbox.flush()
        window = self.window
        window.rank, window.cuda = self.rank, self.cuda
        was_running = window.running
        self.slowed = window.at_step(self.steps) and not window.running  # it ended here
        if window.running != was_running or self.slowed:  # started, or stopped and written: our time
            self.phases.ours(now, time.monotonic())
        self._one_offs(record, optimizer, evaluations)
        if outbox.end_after is not None and self.steps >= outbox.end_after:
            self._end_here()

    def _one_offs(self, record: list[Any], optimizer: Any, evaluations: int) -> None:
        """The one-off measurements at this step's end: the memory's sampled step, and the FLOP count
        (after gpudash's work, over a step with none of it, bounded by a step timed without it)."""
        train_s = record[wire.TRAIN_S]
        if train_s is not None and not record[wire.PROFILED]:
            self.untraced_s = train_s
        self.memory.at_step(self.steps, optimizer, self.device, self.untraced_s)
        flops = self.flops
        free = not (self.memory.capturing or self.window.running or self.slowed)  # the next step: no other work of ours
        if flops.count is not None or flops.forwards.recording or (self.untraced_s is not None and free):
            flops.at_step(self.device, self.rank, self.untraced_s, train_s, evaluations, self.steps, optimizer)
        if flops.ours is not None:  # a compiled model's count ran here: our time, and the next step's record
            self.phases.ours(*flops.ours)
            flops.ours, self.slowed = None, True

    def _end_here(self) -> None:
        """gpudash ends its measuring run at this step: the records out, then a quiet exit."""
        self.close()  # (the window closed first)
        self.on = False
        self.loader.on = False
        raise SystemExit(0)

    def flush_forever(self) -> None:
        """gpudash's own thread in the process (``FLUSHER``): a span open long is said, gpudash's
        requests are taken (a stalled job's stacks: answered here, not at a step), and steps not sent
        yet go out even when the job stops stepping (an evaluation, the end)."""
        outbox = self.outbox
        while self.on:
            time.sleep(outbox.every_s * 2)
            try:
                self.phases.tick(time.monotonic())
                if self.first_done or outbox.worker:
                    outbox.take_requests()
            except Exception:  # noqa: BLE001, S110 - never into the job
                pass
            outbox.flush_if_idle()

    def _quiet(self) -> Any:
        """A block whose host-device syncs are gpudash's or torch's own: not counted, no warning printed."""
        syncs = self.syncs if self.on else None  # (hooks off: the counter closed, its mode the job's again)
        return syncs.quiet() if syncs is not None else contextlib.nullcontext()


_HOOKS: list[Hooks] = []


def install() -> None:
    """Install the hooks once, in this process, now that torch is imported."""
    if _HOOKS:
        return
    import torch

    hooks = Hooks(torch)
    _HOOKS.append(hooks)
    hooks.install()


def tracked_step(samples: int = 0, device: str = "cpu") -> None:
    """``gpudash.track()``'s ``Tracker.step()`` in a job under gpudash: the job's own step
    (``wire.TRACKED_STEP``), for the hooks of this process."""
    if _HOOKS:
        _HOOKS[0].tracked_step(samples, device)
