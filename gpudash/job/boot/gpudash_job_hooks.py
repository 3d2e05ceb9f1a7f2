"""gpudash's hooks inside a job (``gpudash -- CMD``), loaded once the job has imported torch.

Standard library and the job's own torch only. What they measure, and send to gpudash over the
datagram socket named by ``GPUDASH_JOB_CHANNEL`` (one JSON object a datagram; a full socket drops
it, nothing here ever blocks the job):

- a *step*: one call of the first optimizer's ``step()`` seen (torch's global optimizer step
  post-hook), so a second optimizer in the same iteration, a ``GradScaler`` and gradient
  accumulation's micro-batches are one step;
- its samples (and tokens): the batches ``DataLoader`` iterators handed out since the last step,
  the first dimension of the first tensor (a mapping's ``input_ids``: also its tokens), and the
  time spent inside those ``__next__`` calls, the step's input wait;
- its time: CUDA events recorded at the step boundary and read back without blocking on a GPU,
  the host clock on the CPU;
- its host-device syncs and their lines (gpudash's ``core/sync_sites.py``, loaded from
  ``GPUDASH_JOB_SRC``; CUDA only);
- a profiler window of N steps when gpudash asks (``gpudash_job_window.py``); the time each step
  had a collective outstanding (``gpudash_job_comm.py``): its step less that is the rank's own work;
- the model FLOPs of one step, counted once between the first and second steps (``gpudash_job_flops.py``);
- memory by kind, the allocator's history on request, an out-of-memory error's where (``gpudash_job_memory.py``);
- evaluation, checkpoints and compiling between steps, left out of each step's training seconds
  (``gpudash_job_phases.py``); where each thread waits, when gpudash asks (``gpudash_job_stacks.py``).

Any exception inside a hook turns every hook off, with one line on stderr; the job goes on.

When gpudash ends a measuring run (``diagnose``, tune's candidates, ``--steps``, ``--duration``) it
asks every process to end after a step it names — the same on every rank, so that none waits in a
collective for one that left: at that step's boundary the hooks raise ``SystemExit(0)``, which
unwinds the job's own ``finally`` blocks and ends it without a traceback.

One private API of torch: ``torch.utils.data.dataloader._BaseDataLoaderIter.__next__`` is wrapped (every
``DataLoader`` iterator subclasses it; no public hook sees each batch: ``tests/test_private_apis.py``).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import socket
import sys
import threading
import time
import weakref
from typing import Any

import gpudash_job_settings as job_settings  # type: ignore[import-not-found]
import gpudash_job_wire as wire  # type: ignore[import-not-found]  # beside this file
from gpudash_job_comm import CommTimes, sharded  # type: ignore[import-not-found]  # beside this file
from gpudash_job_flops import StepFlopsCount  # type: ignore[import-not-found]  # beside this file
from gpudash_job_loader import FETCH_TIMES, _fetch_seconds, _time_fetcher  # type: ignore[import-not-found]
from gpudash_job_memory import MemoryCount  # type: ignore[import-not-found]
from gpudash_job_parts import (  # type: ignore[import-not-found]
    _backend_settings,
    _Channel,
    _loader_settings,
    _multiprocessing_child,
    _samples_tokens,
    _SyncCount,
    settle_threads,
)
from gpudash_job_phases import Phases  # type: ignore[import-not-found]
from gpudash_job_stacks import FLUSHER, answer, answering  # type: ignore[import-not-found]
from gpudash_job_window import ProfilerWindow  # type: ignore[import-not-found]

SEND_EVERY_S = 0.1  # step records go out at most this often
SITES_EVERY_S = 2.0  # the sync table, when it changed
MEM_EVERY_S = 1.0  # what the memory holds
MAX_BATCH = 200  # step records a datagram
HANDOVER_STEPS = 20  # another optimizer that steps this often alone becomes the one whose steps count
GROUP_MS = 25.0  # steps faster than this are timed in groups (one CUDA event a group)
MAX_GROUP_STEPS = 256


class Hooks:
    """Everything the job's process measures (one per process)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.channel = _Channel(os.environ[wire.CHANNEL_ENV])
        self.rank = int(os.environ.get("RANK", "0") or 0)
        self.world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        self.first_done = False
        self.lock = threading.Lock()
        self.optimizer: Any = None  # a weak reference to the optimizer whose steps are the job's
        self.others = 0  # steps of other optimizers since the tracked one's last step
        self.cuda = False
        self.device = "cpu"  # the device of the tracked optimizer's parameters
        self.flops = StepFlopsCount(torch, self.channel.send)
        self.steps = 0
        # the batches each DataLoader iterator handed out since the last step: [samples, tokens, wait,
        # the Dataset's seconds, collation's seconds] (the last two where this process made the batches)
        self.batches: dict[int, list[Any]] = {}
        self.last_iterator = 0  # the iterator of the latest batch: the training loop's, at a step
        self.loader_settings = ""  # the training DataLoader's arguments, before the first step
        self.last_t = 0.0
        self.pending: collections.deque[tuple[Any, list[list[Any]]]] = collections.deque()  # (event, its steps)
        self.spanned: set[int] = set()  # steps (their records' ids) whose GPU time holds a phase
        self.untimed: list[list[Any]] = []  # steps since the last event
        self.group = 1  # steps per event: follows the step time (GROUP_MS)
        self.pool: list[Any] = []  # events read back, to record again
        self.stream: Any = None  # the stream the steps end on (looked up once)
        self.ready: list[list[Any]] = []  # records to send
        self.last_event: Any = None
        self.last_send = 0.0
        self.syncs: _SyncCount | None = None
        self.sites_sent = (0.0, -1)
        self.untimed_said = False
        self.window = ProfilerWindow(torch, self.channel.send, self._quiet)
        self.comm = CommTimes(torch, self._quiet)
        self.memory, self.mem_sent = MemoryCount(torch), 0.0
        self.end_after: int | None = None  # gpudash's end of a measuring run: after this step
        self.slowed = False  # the next step's time holds gpudash's work (a profiler window's end)
        self.handle: Any = None
        self.on = True
        self._next_orig: Any = None
        self.loader_module: Any = None
        self.phases = Phases(self.channel.send, lambda: self.rank)
        self.worker = False  # a DataLoader worker (forked or spawned): answers stack requests only
        self.model_watch: Any = None  # gpudash_job_settings.ModelWatch, where asked

    # -- install / uninstall ---------------------------------------------------------------------
    def install(self) -> None:
        import importlib

        optimizer = importlib.import_module("torch.optim.optimizer")  # (torch.optim drops the attribute)
        self.loader_module = importlib.import_module("torch.utils.data.dataloader")
        job_settings.install(self.torch, self.loader_module)  # --set, and each DataLoader's site
        self.model_watch = job_settings.watch_model(self.torch)  # the model's calls, where asked
        hook = self._guarded_step
        compiler = getattr(self.torch, "compiler", None)
        if compiler is not None and hasattr(compiler, "disable"):  # a compiled optimizer step calls it eagerly
            hook = compiler.disable(hook)
        self.handle = optimizer.register_optimizer_step_post_hook(hook)
        self.flops.install()
        self.phases.install(self.torch)
        self.comm.install()
        self.memory.connect(self.channel.send, self.phases, lambda: self.rank)
        self._quiet_teardown()
        os.register_at_fork(after_in_child=self._forked)
        base = self.loader_module._BaseDataLoaderIter
        self._next_orig = base.__next__
        base.__next__ = self._wrap_next(base.__next__)
        atexit.register(self.close)
        threading.Thread(target=self._flusher, name=FLUSHER, daemon=True).start()
        if not _multiprocessing_child():
            self.channel.send(self._hello())
        else:  # a spawned DataLoader worker (or an mp.spawn rank, until it steps): known for its stacks
            self.worker = True
            self.channel.send(self._worker_hello())

    def _forked(self) -> None:
        """A forked child (a DataLoader worker): a lock of its own, which no thread here holds, a
        socket of its own, and a thread that answers gpudash's stack requests (it has no flusher)."""
        self.lock = threading.Lock()
        self.flops.forked()  # the counter's modes, should the fork come inside the counted step
        self.worker = True
        try:
            self.channel = _Channel(self.channel.host)
            answering(self.channel, lambda: self.rank)
            self.channel.send(self._worker_hello())
        except Exception:  # noqa: BLE001, S110 - a worker without stacks; its batches still count
            pass

    def _worker_hello(self) -> dict[str, Any]:
        return {"k": wire.WORKER, "pid": os.getpid(), "ppid": os.getppid(), "ctl": self.channel.own}

    def _hello(self) -> dict[str, Any]:
        env = os.environ
        return {
            "k": wire.HELLO,
            "pid": os.getpid(),
            "rank": self.rank,
            "world": int(env.get("WORLD_SIZE", "1") or 1),
            "node": env.get("GROUP_RANK"),  # torchrun's: the node (agent) the rank runs on
            "run_id": env.get("TORCHELASTIC_RUN_ID"),  # the rendezvous id every node's ranks share
            "host": socket.gethostname(),
            "pgid": os.getpgid(0),
            "torch": self.torch.__version__,
            "argv": sys.argv[:6],
            "ctl": self.channel.own,
        }

    def off(self, why: str) -> None:
        """Every hook off, one line on stderr; the job goes on."""
        if not self.on:
            return
        self.on = False
        try:
            print(f"gpudash: the job's hooks are off: {why}", file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001, S110 - a closed stderr: gpudash hears it over the channel
            pass
        self.channel.send({"k": wire.NOTE, "rank": self.rank, "text": f"the job's hooks are off: {why}"})
        self.memory.close()  # first and alone: a sampled step's saved-tensor hooks never left behind
        try:
            if self.handle is not None:
                self.handle.remove()
            if self._next_orig is not None:
                self.loader_module._BaseDataLoaderIter.__next__ = self._next_orig
            self.phases.uninstall()
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
            with self.lock, contextlib.suppress(Exception):
                self.phases.finish()  # an evaluation after the last step: its own, not the exit's
                self._flush(final=True)
        if self.world > 1:  # the last thing before the interpreter finalizes (registered first)
            settle_threads()

    def _quiet_teardown(self) -> None:
        """``destroy_process_group`` closes a running profiler window first; backward's and DDP's own
        host-device syncs, on threads torch prints their warnings from, are not counted."""
        torch, hooks = self.torch, self
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and hasattr(dist, "destroy_process_group"):
            destroy = dist.destroy_process_group

            def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
                with contextlib.suppress(Exception):
                    hooks.window.close()
                return destroy(*args, **kwargs)

            dist.destroy_process_group = destroy_process_group
        for name in ("backward", "grad"):
            original = getattr(torch.autograd, name)

            def quietly(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                with hooks._quiet():
                    return _original(*args, **kwargs)

            setattr(torch.autograd, name, quietly)

    # -- the DataLoader --------------------------------------------------------------------------
    def _wrap_next(self, original: Any) -> Any:
        hooks = self
        torch = self.torch

        def __next__(it: Any) -> Any:  # noqa: N807 - the method it replaces
            if hooks.on and not hasattr(it, FETCH_TIMES):
                _time_fetcher(it)
            began = time.monotonic()
            try:
                batch = original(it)
            except StopIteration:
                if hooks.on:
                    hooks.phases.batch(id(it), began, time.monotonic(), True)
                raise
            if hooks.on:
                hooks.phases.batch(id(it), began, ended := time.monotonic(), False)
                try:
                    n, tokens = _samples_tokens(batch, torch)
                except Exception as exc:  # noqa: BLE001
                    hooks.off(f"reading a batch: {type(exc).__name__}: {exc}")
                    return batch
                acc = hooks.batches.setdefault(id(it), [0, 0, 0.0, 0.0, 0.0])
                # its samples, tokens, wait, and the Dataset's part and the collation where this process made it
                for i, value in enumerate((n, tokens, ended - began, *_fetch_seconds(it))):
                    acc[i] += value
                hooks.last_iterator, hooks.memory.drawn = id(it), hooks.memory.drawn + 1
                if not hooks.first_done:  # the training loader's arguments, as the first step finds them
                    hooks.loader_settings = _loader_settings(it)
                    job_settings.seen(it)
            return batch

        return __next__

    # -- the step --------------------------------------------------------------------------------
    def _guarded_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if not self.on:
            return
        try:
            tracked = self.optimizer() if self.optimizer is not None else None
            self.memory.seen(optimizer)  # every optimizer the job steps: its memory is the job's too
            if optimizer is not tracked:
                if tracked is not None and self.others < HANDOVER_STEPS:
                    self.others += 1  # a second optimizer of the same iteration: not a step
                    return
                self.optimizer = weakref.ref(optimizer)  # the first, or the one that steps alone now
            self.others = 0
            self._step(optimizer)
        except Exception as exc:  # noqa: BLE001 - a failing hook must not end the job
            self.off(f"{type(exc).__name__}: {exc}")

    def _first(self, optimizer: Any) -> None:
        torch = self.torch
        self.first_done = True
        self.worker = False  # (an mp.spawn rank: it steps)
        dist = getattr(torch, "distributed", None)
        if dist is not None and dist.is_available() and dist.is_initialized():  # mp.spawn sets no RANK
            self.rank, self.world = dist.get_rank(), dist.get_world_size()
        device = "cpu"
        for group in optimizer.param_groups:
            for p in group["params"]:
                device = str(p.device)
                break
            break
        self.device = device
        self.cuda = self.phases.cuda = device.startswith("cuda")
        if self.cuda:
            self.stream = torch.cuda.current_stream(torch.device(device))
        first: dict[str, Any] = {"k": wire.FIRST, "rank": self.rank, "pid": os.getpid(), "device": device}
        first["mono"] = time.monotonic()  # this process's clock now: gpudash places its times on its own
        first["optimizer"] = type(optimizer).__name__
        first["world"] = self.world
        first["torch"] = torch.__version__
        model = job_settings.first_step(torch, self.model_watch, optimizer, device)  # autocast, compile
        parallel = self.comm.settings or sharded(optimizer)  # DDP's arguments, or FSDP2's sharded parameters
        first["settings"] = ",".join(filter(None, (_backend_settings(torch), model, self.loader_settings, parallel)))
        if self.cuda:
            index = torch.device(device).index
            index = torch.cuda.current_device() if index is None else index
            props = torch.cuda.get_device_properties(index)
            first["gpu_name"] = props.name
            first["gpu_uuid"] = str(getattr(props, "uuid", "") or "")
            first["cuda"] = str(torch.version.cuda)
            if os.environ.get(wire.SITES_ENV, "1") == "1":
                self.syncs = self.phases.syncs = _SyncCount(torch, self.phases.waited)  # a wait: training
                first["not_counted"] = self.syncs.not_counted
        if _multiprocessing_child():
            self.channel.send(self._hello())
        self.channel.send(first)

    def _step(self, optimizer: Any) -> None:
        if not self.first_done:
            self._first(optimizer)
        now = time.monotonic()
        self.steps += 1
        syncs = self.syncs
        if syncs is not None:
            syncs.keep_watching()
        # the step's batches: the latest iterator's (the training loop's; not an evaluation loader's)
        samples, tokens, waited, dataset_s, collate_s = self.batches.get(self.last_iterator) or (0, 0, 0.0, 0.0, 0.0)
        self.batches.clear()
        train_s = self.phases.at_step(now, self.last_iterator)
        self.phases.watch_compile()
        count = syncs.count if syncs else None
        # in wire.RECORD_FIELDS' order: its time (MS) is known later; the Dataset's and collation's part of
        # the wait; the time a collective was outstanding (None: none ever)
        record = [self.steps, now, None, samples, tokens, waited, count, 0, train_s, dataset_s, collate_s]
        record.append(self.comm.at_step())
        if self.window.running or self.slowed or self.memory.capturing:
            record[wire.PROFILED] = 1  # under the profiler (or after its end), or saved tensors counted: gpudash's too
        self.slowed = False
        if self.flops.running:
            record[wire.PROFILED] = 1  # under the FLOP counter: its time is not the job's
        if syncs is not None:
            syncs.count = 0
        with self.lock:
            if self.cuda and self.torch.cuda.is_current_stream_capturing():
                record[wire.MS] = None  # a CUDA graph being captured: no event may be recorded or asked about
                self.ready.append(record)
            elif self.cuda:
                if train_s is not None and now - self.last_t - train_s >= self.phases.min_span_s:
                    self.spanned.add(id(record))  # its GPU time holds an evaluation's, say: unknown
                self.untimed.append(record)
                if len(self.untimed) >= self.group:
                    self._close_group()
            else:
                record[wire.MS] = train_s * 1e3 if train_s is not None else None  # what was not training left out
                self.ready.append(record)
            self.last_t = now
            if now - self.last_send >= SEND_EVERY_S:
                self._flush()
        self.window.rank, self.window.cuda = self.rank, self.cuda
        self.slowed = self.window.at_step(self.steps) and not self.window.running  # it ended here
        self.flops.at_step(self.device, self.rank)  # the count starts after gpudash's work
        self.memory.at_step(self.steps, optimizer, self.device)
        if self.end_after is not None and self.steps >= self.end_after:
            self._end_here()

    def _end_here(self) -> None:
        """gpudash ends its measuring run at this step: the records out, then a quiet exit."""
        self.close()  # (the window closed first)
        self.on = False
        raise SystemExit(0)

    def _close_group(self) -> None:
        """An event after the group's last step (from a pool, on the stream the steps end on)."""
        event = self.pool.pop() if self.pool else self.torch.cuda.Event(enable_timing=True)
        event.record(self.stream)
        self.pending.append((event, self.untimed))
        self.untimed = []
        self._collect()

    def _collect(self) -> None:
        """The groups whose closing event has completed: each step the group's mean GPU time (no
        wait). Each event recorded or asked about is a CUDA call between two steps, which costs a
        launch-bound step far more than its own time: steps faster than GROUP_MS are timed in
        groups, as gpudash's own step timer does (``gpudash/engine/measure.py``)."""
        pending = self.pending
        while pending and pending[0][0].query():
            event, records = pending.popleft()
            spanned = [id(r) for r in records if id(r) in self.spanned]
            self.spanned.difference_update(spanned)
            if self.last_event is not None and spanned:
                self.pool.append(self.last_event)  # the group's time holds a phase's: left unknown
            elif self.last_event is not None:
                ms = self.last_event.elapsed_time(event) / len(records)
                for record in records:
                    record[wire.MS] = ms
                self.pool.append(self.last_event)
                self.group = min(MAX_GROUP_STEPS, max(1, int(GROUP_MS / ms))) if ms > 0 else MAX_GROUP_STEPS
            self.last_event = event
            self.ready.extend(records)

    def _flush(self, final: bool = False, cuda: bool = True) -> None:
        """Send the records ready (``cuda``: first collect the groups whose event completed; never
        from the flusher thread, which must not make CUDA calls)."""
        if self.cuda and cuda:
            self._collect()
            if final:  # steps after the last event, and groups still running: their time unknown
                for _, records in self.pending:
                    self.ready.extend(records)
                self.ready.extend(self.untimed)
                self.pending.clear()
                self.untimed = []
        self.last_send = time.monotonic()
        while self.ready:
            batch, self.ready = self.ready[:MAX_BATCH], self.ready[MAX_BATCH:]
            self.channel.send({"k": wire.STEPS, "rank": self.rank, "pid": os.getpid(), "s": batch})
        if (cuda or not self.cuda) and (final or self.last_send - self.mem_sent >= MEM_EVERY_S):
            if (memory := self.memory.message(self.rank)) is not None:
                self.channel.send(memory)
                self.mem_sent = self.last_send
        syncs = self.syncs
        if syncs is not None and (final or self.last_send - self.sites_sent[0] >= SITES_EVERY_S):
            total = syncs.sites.total
            if total != self.sites_sent[1] or final:
                table = syncs.sites.table(self.steps)
                self.channel.send(
                    {"k": wire.SITES, "rank": self.rank, "table": table.as_dict(), "not_counted": syncs.not_counted}
                )
                self.sites_sent = (self.last_send, total)
        if self.comm.untimed and not self.untimed_said:  # once: what of its communication is not timed
            self.untimed_said = True
            self.channel.send({"k": wire.NOTE, "rank": self.rank, "text": self.comm.untimed})
        self._take_requests()

    def _take_requests(self) -> None:
        """gpudash's requests: stacks answered now; a window, a history, an end kept for its step."""
        for request in self.channel.requests():
            kind = request.get("k")
            if kind == wire.STACKS:
                answer(self.channel, self.rank, self.worker)
            elif kind == wire.END:
                after = int(request.get("after") or 0)  # the earliest asked: --steps', then a stop's
                self.end_after = after if self.end_after is None else min(self.end_after, after)
            elif kind in (wire.TRACE, wire.MEMPEAK):
                (self.window if kind == wire.TRACE else self.memory.history).ask(request)

    def _flusher(self) -> None:
        """Steps not sent yet go out even when the job stops stepping (an evaluation, the end)."""
        while self.on:
            time.sleep(SEND_EVERY_S * 2)
            try:
                self.phases.tick(time.monotonic())
                if self.first_done or self.worker:
                    self._take_requests()  # a stalled job's stacks: answered here, not at a step
            except Exception:  # noqa: BLE001, S110 - never into the job
                pass
            if time.monotonic() - self.last_send >= SEND_EVERY_S * 2 and self.lock.acquire(blocking=False):
                try:
                    self._flush(cuda=False)
                except Exception:  # noqa: BLE001, S110 - the next step's flush says it
                    pass
                finally:
                    self.lock.release()

    def _quiet(self) -> Any:
        """A block whose host-device syncs are gpudash's or torch's own: not counted, no warning printed."""
        return self.syncs.quiet() if self.syncs is not None else contextlib.nullcontext()


_HOOKS: list[Hooks] = []


def install() -> None:
    """Install the hooks once, in this process, now that torch is imported."""
    if _HOOKS:
        return
    import torch

    hooks = Hooks(torch)
    _HOOKS.append(hooks)
    hooks.install()
