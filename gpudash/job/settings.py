"""Settings applied to a user's job from outside, without an edit of its script (``--set K=V``).

The safe ones change how fast the job runs, not what it computes: the training DataLoader's
worker processes, pinned memory, persistent workers and prefetching (applied where the DataLoader
is constructed, by the bootstrap's ``gpudash_boot.settings``: only at ``loader_site`` where that is
given, so an evaluation loader keeps what the job gave it), ``cudnn.benchmark`` and the CUDA
caching allocator's ``expandable_segments`` (through ``PYTORCH_CUDA_ALLOC_CONF``).

``NUMERICS`` change the numbers (``tune`` races them only with ``--allow-numerics``): ``tf32``
(TF32 matmuls and convolutions) and ``autocast=bf16`` (the forward of the model the optimizer
steps under bf16 autocast, its outputs back in float32 for the loss); ``compile`` (``tune``'s
``--allow-compile``) compiles that model (``nn.Module.compile``) at the first step. Torch-free.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from gpudash.boot.gpudash_boot.wire import SET_ENV, SITE_ENV

LOADER_SITE = "loader_site"
BOOLEANS = ("pin_memory", "persistent_workers", "cudnn_benchmark", "expandable_segments", "tf32", "compile")
COUNTS = {"num_workers": 0, "prefetch_factor": 1, "batch_size": 1}  # each one's least value
AUTOCAST = "autocast"
AUTOCAST_TYPES = ("bf16", "off")
KEYS = (*COUNTS, *BOOLEANS, AUTOCAST, LOADER_SITE)
NUMERICS = ("tf32", AUTOCAST)  # settings that change what the job computes (opt-in in tune)
TRAINING = ("batch_size",)  # settings that change the training itself (opt-in in tune: --allow-batch)
_TRUE, _FALSE = ("true", "on", "1", "yes"), ("false", "off", "0", "no")
_SITE = re.compile(r".+:\d+")

Settings = tuple[tuple[str, str], ...]


class SettingError(ValueError):
    """A ``--set`` value gpudash cannot apply: one line saying why."""


def parse_set(values: Iterable[str]) -> Settings:
    """``--set`` values (``num_workers=8``) as (key, value) pairs in ``KEYS`` order, values normal
    (``True``/``False``, integers); ``SettingError`` (one line) for anything else."""
    found: dict[str, str] = {}
    for text in values:
        key, eq, value = text.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or key not in KEYS:
            raise SettingError(f"--set {text}: give KEY=VALUE with KEY one of {', '.join(KEYS)}")
        found[key] = _checked(key, value, text)
    if "batch_size" in found and LOADER_SITE not in found:
        raise SettingError(
            f"--set batch_size={found['batch_size']}: give {LOADER_SITE}=FILE:LINE too, the training DataLoader's "
            "line (its batch size alone changes; an evaluation loader's stays its own)"
        )
    return tuple((k, found[k]) for k in KEYS if k in found)


def _checked(key: str, value: str, text: str) -> str:
    if key in BOOLEANS:
        if value.lower() in _TRUE:
            return "True"
        if value.lower() in _FALSE:
            return "False"
        raise SettingError(f"--set {text}: {key} is true or false")
    if key in COUNTS:
        if not value.isdigit() or int(value) < COUNTS[key]:
            raise SettingError(f"--set {text}: {key} is a whole number, {COUNTS[key]} or more")
        return str(int(value))
    if key == AUTOCAST:
        if value.lower() not in AUTOCAST_TYPES:
            raise SettingError(f"--set {text}: {AUTOCAST} is one of {', '.join(AUTOCAST_TYPES)}")
        return value.lower()
    if not _SITE.fullmatch(value):
        raise SettingError(f"--set {text}: {LOADER_SITE} is FILE:LINE, where the training DataLoader is made")
    return value


def job_env(settings: Settings, base: Mapping[str, str]) -> dict[str, str]:
    """The environment variables that carry ``settings`` into the job (``base``: its environment)."""
    given = dict(settings)
    out: dict[str, str] = {}
    inside = ",".join(f"{k}={v}" for k, v in settings if k not in (LOADER_SITE, "expandable_segments"))
    if inside:
        out[SET_ENV] = inside
    if LOADER_SITE in given:
        out[SITE_ENV] = given[LOADER_SITE]
    if "expandable_segments" in given:
        conf = [part for part in base.get("PYTORCH_CUDA_ALLOC_CONF", "").split(",") if part]
        conf = [part for part in conf if not part.startswith("expandable_segments")]
        out["PYTORCH_CUDA_ALLOC_CONF"] = ",".join([*conf, f"expandable_segments:{given['expandable_segments']}"])
    return out


def describe(settings: Settings) -> str:
    """ "num_workers=8, pin_memory=True" (the loader's site left out); "as written" for none."""
    shown = [f"{k}={v}" for k, v in settings if k != LOADER_SITE]
    return ", ".join(shown) or "as written"
