"""The settings ``--set`` applies to a job from outside (``gpudash record --set num_workers=8 -- CMD``,
``gpudash tune -- CMD``'s candidates), and where each of its DataLoaders was constructed.

Put in by ``hooks.py`` once torch is imported. ``GPUDASH_JOB_SET`` holds the settings
(``num_workers=8,pin_memory=True``); ``GPUDASH_JOB_SET_SITE`` (``/path/train.py:33``), where given,
limits the DataLoader ones to the loaders constructed at that line — the training loader, found by a
run before (an evaluation loader is left as the job made it). Each DataLoader keeps its construction
site (the first frame outside torch and gpudash), and so do its iterators: the hooks name the
training loader's at the first step.

The settings that change the numbers are applied at the first optimizer step to the model it
steps: ``tf32`` at once (TF32 matmuls and convolutions); ``autocast=bf16`` wraps that model's
``forward`` in bf16 autocast (its floating outputs back in float32, as autocast runs a loss);
``compile=True`` calls its ``compile()``. The model is found by ``ModelWatch``: global module
hooks that, until the first step, keep each outermost module call (the module, the line that
called it and the name it has there, whether autocast was on, whether it was being compiled);
it runs only where one of these is asked or ``GPUDASH_JOB_WATCH_MODEL=1`` (``tune`` reads what the
job does), so a plain run's modules are never hooked; then each optimizer keeps its construction
site too. Nothing these looks do may fail the job: a look that fails is left out. Standard library
and the job's own torch only.
"""

from __future__ import annotations

import functools
import inspect
import os
import random
import sys
import weakref
from typing import Any

from .frames import hidden
from .wire import SET_ENV, SITE_ENV, WATCH_ENV

MODEL_KEYS = ("autocast", "compile")  # applied to the model the optimizer steps, at the first step
LOADER_KEYS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "batch_size")
_HERE = os.path.dirname(os.path.abspath(__file__))


def parse(text: str) -> dict[str, str]:
    """``"num_workers=8,pin_memory=True"`` → {"num_workers": "8", "pin_memory": "True"}."""
    pairs = (item.partition("=") for item in text.split(",") if "=" in item)
    return {k.strip(): v.strip() for k, _, v in pairs}


def _value(key: str, text: str) -> Any:
    if key in ("num_workers", "prefetch_factor", "batch_size"):
        return int(text)
    return text.lower() in ("1", "true", "on", "yes")


def _caller_frame() -> Any:
    """The first frame outside torch and this package (where a loader was made, a model called)."""
    frame = sys._getframe(2)
    torch_dir = os.sep + "torch" + os.sep
    while frame is not None:
        name = frame.f_code.co_filename
        if torch_dir not in name and not name.startswith(_HERE) and not name.startswith("<"):
            return frame
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _caller_site() -> str:
    """``file:line`` of the first frame outside torch and this package: where the loader was made."""
    frame = _caller_frame()
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else ""


def install(torch: Any, loader_module: Any) -> None:
    """Apply the backend settings now; wrap ``DataLoader`` to apply the loader ones and keep sites."""
    settings = parse(os.environ.get(SET_ENV, ""))
    only_at = os.environ.get(SITE_ENV, "")
    if "cudnn_benchmark" in settings:
        torch.backends.cudnn.benchmark = _value("cudnn_benchmark", settings["cudnn_benchmark"])
    if "tf32" in settings:
        on = _value("tf32", settings["tf32"])
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on
    if _watching():
        _keep_optimizer_sites(torch)
    loader_settings = {k: _value(k, v) for k, v in settings.items() if k in LOADER_KEYS}
    cls = loader_module.DataLoader
    init, make_iter = cls.__init__, cls.__iter__
    signature = inspect.signature(init)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807 - the method it replaces
        site = _caller_site()
        if loader_settings and (not only_at or site == only_at):
            bound = signature.bind(self, *args, **kwargs)
            bound.arguments.update(_applicable(loader_settings, bound.arguments))
            args, kwargs = tuple(bound.args[1:]), dict(bound.kwargs)
        init(self, *args, **kwargs)
        self.__dict__["gpudash_site"] = site

    def __iter__(self: Any) -> Any:  # noqa: N807
        it = make_iter(self)
        try:
            it.gpudash_site = self.__dict__.get("gpudash_site", "")
            it.gpudash_dataset, it.gpudash_workers = self.dataset, self.num_workers
        except Exception:  # noqa: BLE001, S110 - an iterator that takes no attribute: no site
            pass
        return it

    cls.__init__, cls.__iter__ = hidden(__init__), hidden(__iter__)


def _applicable(settings: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The loader settings a DataLoader accepts with the others it is given: prefetching and
    persistence only with worker processes, a batch size only where the loader makes the batches."""
    out = dict(settings)
    workers = out.get("num_workers", given.get("num_workers", 0))
    if not workers:
        out.pop("persistent_workers", None)
        out.pop("prefetch_factor", None)
    if given.get("batch_sampler") is not None or given.get("batch_size", 1) is None:
        out.pop("batch_size", None)  # its batches are its sampler's (or its Dataset's) own
    return out


def site_of(it: Any) -> str:
    """The construction site of the loader an iterator came from ("" where not known)."""
    return str(getattr(it, "gpudash_site", "") or "")


def _keep_optimizer_sites(torch: Any) -> None:
    """Each optimizer keeps where it was constructed (``gpudash_site``): the line after which
    ``compile``'s edit goes."""
    cls = torch.optim.Optimizer
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807 - the method it replaces
        site = _caller_site()
        init(self, *args, **kwargs)
        self.__dict__.setdefault("gpudash_site", site)

    cls.__init__ = hidden(__init__)


class ModelWatch:
    """Until the first optimizer step, each outermost module call: the module, the line and name
    it was called by, whether autocast was on and whether it ran compiled."""

    def __init__(self, torch: Any) -> None:
        self.torch, self.depth = torch, 0
        self.calls: list[tuple[Any, str, str, bool, bool]] = []
        hooks = torch.nn.modules.module
        self.handles = [
            hooks.register_module_forward_pre_hook(hidden(self._enter)),
            hooks.register_module_forward_hook(hidden(self._leave)),
        ]

    def _enter(self, module: Any, _args: Any) -> None:
        try:
            if self.depth == 0 and not any(m is module for m, *_ in self.calls):
                self.calls.append(self._call(module))
        except Exception:  # noqa: BLE001, S110 - a look that fails must not fail the job's forward
            pass
        self.depth += 1

    def _call(self, module: Any) -> tuple[Any, str, str, bool, bool]:
        frame = _caller_frame()
        name = next((k for k, v in (frame.f_locals.items() if frame else ()) if v is module), "")
        site = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else ""
        autocast = any(_autocast_on(self.torch, kind) for kind in ("cuda", "cpu"))
        compiling = getattr(getattr(self.torch, "compiler", None), "is_compiling", lambda: False)
        compiled = "OptimizedModule" in type(module).__name__ or bool(compiling())  # torch.compile's wrapper
        return module, site, name, autocast, compiled

    def _leave(self, _module: Any, _args: Any, _out: Any) -> None:
        self.depth = max(self.depth - 1, 0)

    def stop(self) -> None:
        for handle in self.handles:
            handle.remove()

    def model_of(self, optimizer: Any) -> tuple[Any, str, str, bool, bool] | None:
        """The outermost call whose module holds the most of ``optimizer``'s parameters."""
        stepped = {id(p) for group in optimizer.param_groups for p in group["params"]}
        scored = [(sum(id(p) in stepped for p in call[0].parameters()), i) for i, call in enumerate(self.calls)]
        best = max(scored, default=(0, -1))
        return self.calls[best[1]] if best[0] > 0 else None


def _autocast_on(torch: Any, kind: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(kind))
    except TypeError:  # an older torch: the CUDA one only
        return kind == "cuda" and bool(torch.is_autocast_enabled())


def _watching() -> bool:
    """Whether the settings ask to change the model or ``tune`` asks what the job does."""
    settings = parse(os.environ.get(SET_ENV, ""))
    return any(k in settings for k in MODEL_KEYS) or os.environ.get(WATCH_ENV) == "1"


def watch_model(torch: Any) -> ModelWatch | None:
    """A ``ModelWatch`` where ``_watching()``; None (nothing hooked) otherwise."""
    return ModelWatch(torch) if _watching() else None


def first_step(torch: Any, watch: ModelWatch | None, optimizer: Any, device: str) -> dict[str, str]:
    """At the first step: what the job's model does (``autocast``, ``compiled``, its forward's line
    and name, the optimizer's line), whether its Dataset draws random numbers (``draws``), and the
    model settings applied to it."""
    if watch is None:
        return {}
    watch.stop()
    try:
        return _first_step(torch, watch, optimizer, device)
    except Exception:  # noqa: BLE001 - a look or a setting that fails leaves the job as it is
        return {"model": "unknown"}


def _first_step(torch: Any, watch: ModelWatch, optimizer: Any, device: str) -> dict[str, str]:
    drew = _dataset_draws(torch)
    draws = {"draws": str(drew)} if drew is not None else {}
    found = watch.model_of(optimizer)
    if found is None:
        return {"model": "none", **draws}
    module, site, name, autocast, compiled = found
    said = {"autocast": str(autocast), "compiled": str(compiled), "forward_at": site, "model_name": name, **draws}
    said["optimizer_at"] = str(getattr(optimizer, "gpudash_site", ""))
    settings = parse(os.environ.get(SET_ENV, ""))
    if settings.get("autocast") == "bf16" and not autocast:
        module.forward = _autocast_forward(torch, module.forward, device.split(":")[0])
        said["applied_autocast"] = "bf16"
    if _value("compile", settings.get("compile", "false")) and not compiled:
        module.compile()
        said["applied_compile"] = "True"
    return said


_TRAINING: list[Any] = []  # a weak reference to the iterator of the latest batch before the first step


def seen(it: Any) -> None:
    """The iterator that handed out the latest batch before the first step (the training loader's)."""
    try:
        _TRAINING[:] = [weakref.ref(it)]
    except TypeError:  # an iterator that takes no weak reference: not known
        _TRAINING.clear()


def _dataset_draws(torch: Any) -> bool | None:
    """Whether the training loader's Dataset draws from the global random generators (torch's,
    ``random``'s, numpy's) for a sample: one sample read apart, the generators put back after.
    Only a map-style Dataset read without workers (where the job's own process draws); None where
    that is not so or the read fails. Called at the first step of a ``tune`` run alone."""
    it = _TRAINING[0]() if _TRAINING else None
    dataset = getattr(it, "gpudash_dataset", None)
    if dataset is None or getattr(it, "gpudash_workers", None) != 0 or not hasattr(dataset, "__getitem__"):
        return None
    states = _generators(torch)
    try:
        dataset[0]
        return not _same(states, _generators(torch))
    except Exception:  # noqa: BLE001 - an iterable or odd Dataset: not known
        return None
    finally:
        torch.set_rng_state(states[0])
        random.setstate(states[1])
        if states[2] is not None:
            sys.modules["numpy"].random.set_state(states[2])


def _generators(torch: Any) -> tuple[Any, Any, Any]:
    numpy = sys.modules.get("numpy")
    return torch.get_rng_state(), random.getstate(), numpy.random.get_state() if numpy is not None else None


def _same(a: tuple[Any, Any, Any], b: tuple[Any, Any, Any]) -> bool:
    same_numpy = a[2] is None or (a[2][1].tobytes(), a[2][2]) == (b[2][1].tobytes(), b[2][2])
    return bool(a[0].equal(b[0])) and a[1] == b[1] and same_numpy


def _autocast_forward(torch: Any, forward: Any, kind: str) -> Any:
    """``forward`` under bf16 autocast, its half-precision tensors back in float32 (as autocast runs
    a loss: the job's loss, outside, sees the dtype it was written for)."""

    def widened(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.float() if value.dtype in (torch.bfloat16, torch.float16) else value
        if type(value) is tuple:  # (a named tuple: another container, as it is)
            return tuple(widened(v) for v in value)
        if isinstance(value, list):
            return [widened(v) for v in value]
        if type(value) is dict:
            return {k: widened(v) for k, v in value.items()}
        return value  # another container (a model output class): as it is

    def autocast_forward(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast(kind, dtype=torch.bfloat16):
            out = forward(*args, **kwargs)
        return widened(out)

    return hidden(autocast_forward)
