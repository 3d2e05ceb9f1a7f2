"""The settings ``--set`` applies to a job from outside (``gpudash record --set num_workers=8 -- CMD``,
``gpudash tune -- CMD``'s candidates), and where each of its DataLoaders was constructed.

Loaded by ``gpudash_job_hooks.py`` once torch is imported. ``GPUDASH_JOB_SET`` holds the settings
(``num_workers=8,pin_memory=True``); ``GPUDASH_JOB_SET_SITE`` (``/path/train.py:33``), where given,
limits the DataLoader ones to the loaders constructed at that line — the training loader, found by a
run before (an evaluation loader is left as the job made it). Each DataLoader keeps its construction
site (the first frame outside torch and gpudash), and so do its iterators: the hooks name the
training loader's at the first step. Standard library and the job's own torch only.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

SET_ENV, SITE_ENV = "GPUDASH_JOB_SET", "GPUDASH_JOB_SET_SITE"
LOADER_KEYS = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
_HERE = os.path.dirname(os.path.abspath(__file__))


def parse(text: str) -> dict[str, str]:
    """``"num_workers=8,pin_memory=True"`` → {"num_workers": "8", "pin_memory": "True"}."""
    pairs = (item.partition("=") for item in text.split(",") if "=" in item)
    return {k.strip(): v.strip() for k, _, v in pairs}


def _value(key: str, text: str) -> Any:
    if key in ("num_workers", "prefetch_factor"):
        return int(text)
    return text.lower() in ("1", "true", "on", "yes")


def _caller_site() -> str:
    """``file:line`` of the first frame outside torch and this folder: where the loader was made."""
    frame = sys._getframe(2)
    torch_dir = os.sep + "torch" + os.sep
    while frame is not None:
        name = frame.f_code.co_filename
        if torch_dir not in name and not name.startswith(_HERE) and not name.startswith("<"):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return ""


def install(torch: Any, loader_module: Any) -> None:
    """Apply the backend settings now; wrap ``DataLoader`` to apply the loader ones and keep sites."""
    settings = parse(os.environ.get(SET_ENV, ""))
    only_at = os.environ.get(SITE_ENV, "")
    if "cudnn_benchmark" in settings:
        torch.backends.cudnn.benchmark = _value("cudnn_benchmark", settings["cudnn_benchmark"])
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
        except Exception:  # noqa: BLE001, S110 - an iterator that takes no attribute: no site
            pass
        return it

    cls.__init__, cls.__iter__ = __init__, __iter__


def _applicable(settings: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The loader settings a DataLoader accepts with the others it is given: prefetching and
    persistence only with worker processes."""
    out = dict(settings)
    workers = out.get("num_workers", given.get("num_workers", 0))
    if not workers:
        out.pop("persistent_workers", None)
        out.pop("prefetch_factor", None)
    return out


def site_of(it: Any) -> str:
    """The construction site of the loader an iterator came from ("" where not known)."""
    return str(getattr(it, "gpudash_site", "") or "")
