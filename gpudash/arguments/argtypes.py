"""The argument types and parser of every ``gpudash`` command: each bad argument is one line
(``gpudash: error: ...``) and exit status 2. Nothing here imports torch."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, Protocol, TypeVar

from gpudash.core.protocol import ExitCode
from gpudash.core.textfmt import shown
from gpudash.host.gpu_checks import cuda_devices

if TYPE_CHECKING:  # pragma: no cover
    from workloads.catalog_types import FamilyInfo, VariantInfo
    from workloads.knobs import Knobs

DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


class UsageError(Exception):
    """A bad argument: the message is one line."""


class Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line: ``gpudash: error: ...``, exit status 2, with the way
    out where there is one (the flag or command meant, the job after ``--``: ``suggest``)."""

    typed: list[str] | None = None  # the command line being parsed (after the program's name)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self.typed = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        """Print ``gpudash: error: MESSAGE`` (one line), and its hint, and exit with status 2."""
        from gpudash.arguments.suggest import explain

        said = explain(self, self.typed, " ".join(message.split()))
        self.exit(ExitCode.USAGE, f"gpudash: error: {said}\n")


# -- argument types (each raises ArgumentTypeError with one line) -----------------------------------
def positive_float(text: str) -> float:
    value = _seconds(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = _seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _seconds(text: str) -> float:
    """A finite number of seconds."""
    return _finite(text, "seconds")


def tflops(text: str) -> float:
    """A peak in TFLOP/s: a finite number above 0 (``--peak-tflops``)."""
    value = _finite(text, "TFLOP/s")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of TFLOP/s, got {text}")
    return value


def _finite(text: str, unit: str) -> float:
    """A finite number of ``unit`` (each fault one line that names the unit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of {unit}, got {text!r}") from None
    if value != value or abs(value) == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number of {unit}, got {text}")
    return value


def int_at_least(minimum: int, words: str) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum`` ("must be <words>, got N")."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {words}, got {value}")
        return value

    return parse


positive_int = int_at_least(1, "at least 1")
nonnegative_int = int_at_least(0, "0 or more")


class Options(Protocol):
    """Where options are added: a parser or one of its argument groups."""

    def add_argument(self, *name_or_flags: str, **kwargs: Any) -> argparse.Action: ...


def add_seconds(options: Options, flag: str, *, help: str, **kw: Any) -> None:
    """Add ``flag S``: a number of seconds, more than 0 (``kw``: add_argument's others)."""
    options.add_argument(flag, type=positive_float, metavar="S", help=help, **kw)


def add_count(options: Options, flag: str, *, help: str, metavar: str = "N", **kw: Any) -> None:
    """Add ``flag N``: a whole number, at least 1 (``kw``: add_argument's others)."""
    options.add_argument(flag, type=positive_int, metavar=metavar, help=help, **kw)


def port(text: str) -> int:
    """A TCP port to listen on: 1 to 65535."""
    value = int_at_least(1, "a port from 1 to 65535")(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be a port from 1 to 65535, got {value}")
    return value


def batch_size(text: str) -> int:
    from workloads.catalog_types import WorkloadError
    from workloads.registry import parse_batch_size

    try:
        return parse_batch_size(text)
    except WorkloadError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_batch_limits(info: FamilyInfo, batch_size: int | None, ranks: int = 1) -> None:
    """Raise UsageError when ``batch_size`` is over the family's fixed limits (its dataset, its
    cap; ``FamilyInfo.batch_refusal``); None (the family's default) is within them."""
    why = None if batch_size is None else info.batch_refusal(batch_size, ranks)
    if why is not None:
        raise UsageError(why)


def image_size(text: str) -> int:
    from workloads.catalog_types import WorkloadError
    from workloads.registry import check_image_size

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    try:
        return check_image_size(value)
    except WorkloadError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def device(text: str) -> str:
    text = text.strip().lower()
    if not DEVICE_RE.match(text):
        raise argparse.ArgumentTypeError(f"expected auto, cpu, cuda or cuda:N, got {text!r}")
    return text


def check_device(device: str, variant: VariantInfo | None = None) -> None:
    """Raise UsageError when ``device`` cannot run here, or cannot run ``variant``."""
    refusal = None  # why the variant cannot run without a GPU
    if device in ("cpu", "auto"):
        refusal = variant.refusal("cpu") if variant is not None else None
        if refusal is None:
            return  # the CPU runs it (auto: on a GPU if there is one)
        if device == "cpu":
            raise UsageError(f"{refusal}: run it with --device cuda")
    count, why = cuda_devices()
    if count == 0:
        if refusal is not None:  # auto, and the variant needs a GPU
            raise UsageError(f"{refusal}, and no CUDA GPU was found ({why})")
        raise UsageError(f"--device {device}: no CUDA GPU found ({why}); use --device cpu")
    if device.startswith("cuda:"):
        index = int(device.split(":", 1)[1])
        if index >= count:
            raise UsageError(
                f"--device {device}: only {count} CUDA GPU{'s' if count != 1 else ''} visible "
                f"(cuda:0..cuda:{count - 1})"
            )


def knob(text: str) -> tuple[str, str]:
    """``--knob NAME[=VALUE]``: ("amp", "bf16"), ("cuda_graph", "on"); checked against the catalog."""
    from workloads.catalog_types import WorkloadError
    from workloads.knobs import parse_knob

    try:
        return parse_knob(text)
    except WorkloadError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def knobs_from(pairs: list[tuple[str, str]] | None) -> Knobs:
    """The ``--knob`` flags as one setting; a knob given twice with two values is a UsageError."""
    from workloads.knobs import Knobs

    chosen: dict[str, str] = {}
    for name, value in pairs or ():
        if chosen.get(name, value) != value:
            raise UsageError(f"--knob {name} given twice: {chosen[name]} and {value}")
        chosen[name] = value
    return Knobs(chosen)


def check_knobs(knobs: Knobs, device: str, variant: VariantInfo, world_size: int = 1) -> None:
    """Raise UsageError when ``knobs`` cannot be on for ``variant`` on ``device`` (``auto``: the
    GPU if one is visible) in a run of ``world_size`` data-parallel ranks."""
    if not knobs:
        return
    kind = device.split(":", 1)[0]
    if kind == "auto":
        kind = "cuda" if cuda_devices()[0] > 0 else "cpu"
    why = knobs.refusal(variant, kind, world_size)
    if why is not None:
        advice = "; run it with --device cuda" if kind == "cpu" and "needs CUDA" in why else ""
        raise UsageError(f"{why}{advice}")


def default_out(command: str, name: str) -> str:
    """``sweep-encdec``, ``tune-mine`` (a file's workload: its file's stem), ``sweep-all`` (a preset)."""
    stem = name.rsplit("/", 1)[-1].split(":", 1)[0].removesuffix(".py")
    return f"{command}-" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", stem) or "workload")


def check_out_dir(out: str) -> Path:
    """The output directory, created if missing; UsageError when it is a file, unwritable, or its
    name is too long for the file system."""
    path = Path(out)
    try:
        if path.exists() and not path.is_dir():
            raise UsageError(f"--out {shown(out)} is a file; give a directory")
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out {shown(out)}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write in --out {shown(out)}")
    return path


class Dataclass(Protocol):
    """Any dataclass (what ``dataclasses.fields`` takes)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


D = TypeVar("D", bound=Dataclass)


def from_args(cls: type[D], args: argparse.Namespace, **overrides: Any) -> D:
    """A settings dataclass ``cls`` with each field that ``args`` has an option of the same name
    for, then ``overrides`` (what is computed, or named otherwise); the rest its defaults."""
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    return cls(**{**given, **overrides})


def check_parallel(nproc: int, nnodes: int, endpoint: str | None, device: str) -> None:
    """Raise UsageError for a data-parallel layout this machine cannot run: more ranks than GPUs
    on a CUDA run, a multi-node run without a rendezvous, a rank pinned to one GPU."""
    if nnodes > 1 and not endpoint:
        raise UsageError(f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT (the same on every node)")
    if endpoint and not re.fullmatch(r"[\w.\-\[\]:]+:\d+", endpoint):
        raise UsageError(f"--rdzv-endpoint takes HOST:PORT, got {endpoint!r}")
    if nproc == 1:
        return
    kind = device.split(":", 1)[0]
    if ":" in device:
        raise UsageError(
            f"--nproc {nproc} gives each rank its own GPU (cuda:LOCAL_RANK): use --device cuda, not {device}"
        )
    count, why = cuda_devices()
    if kind == "cuda" or (kind == "auto" and count > 0):
        if nproc > count:
            raise UsageError(
                f"--nproc {nproc} needs {nproc} GPUs, one per rank; this machine has {count}"
                + (f" ({why})" if why else "")
            )


def check_host_budget(nproc: int, workers: int | None, device: str) -> None:
    """Raise UsageError when this machine cannot hold the processes the run starts (ranks, loader
    workers: ``gpudash.host.host_budget``), their sockets' temp dir is too long, or the memory
    guard's setting is not a limit."""
    from gpudash.core import memguard
    from gpudash.host.host_budget import (
        HostBudgetError,
        ProcessPlan,
        available_cpus,
        check_process_caps,
        check_temp_dir,
    )

    try:
        memguard.check_setting()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    kind = device.split(":", 1)[0]
    on_cpu = kind == "cpu" or (kind == "auto" and cuda_devices()[0] == 0)
    per_rank = workers if workers is not None else max(1, available_cpus() // nproc)
    try:
        check_temp_dir()
        check_process_caps(ProcessPlan(ranks=nproc, workers_per_rank=per_rank), on_cpu, workers is not None)
    except HostBudgetError as exc:
        raise UsageError(str(exc)) from None
