"""The user's settings file: ``config.toml`` in ``platformdirs.user_config_dir("gpudash")``
(``~/.config/gpudash/config.toml`` on Linux; ``gpudash --config-path`` prints it).

It holds defaults the command line overrides; one row of ``SETTINGS`` a key. A file that
cannot be read or parsed counts as empty, and a bad key or value is left out: each is one
line in ``UserConfig.problems`` (naming the key) and the run goes on with the defaults.
The dashboard writes one key back, ``theme``, when the palette changes it (``save_setting``).
Neither torch nor Textual is imported here.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudash.arguments import argtypes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_FILE = "config.toml"


def config_path() -> Path:
    """Where the settings file lives (it need not exist)."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("gpudash")) / CONFIG_FILE


# -- the table of settings --------------------------------------------------------------------------
def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty string")
    return value.strip()


def _workload(value: Any) -> str:
    from workloads.registry import family

    return family(_text(value)).name  # WorkloadError is a ValueError


def _through(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    """A value checked by an argparse type of ``gpudash.arguments.argtypes`` (numbers given as numbers)."""

    def check(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"expected a number or a string, got {type(value).__name__}")
        try:
            return parse(str(value))
        except argparse.ArgumentTypeError as exc:
            raise ValueError(str(exc)) from None

    return check


def _directory(value: Any) -> str:
    path = Path(_text(value)).expanduser()
    if not path.is_dir():
        raise ValueError(f"{path} is not a directory")
    return str(path)


@dataclass(frozen=True)
class Setting:
    """One key of the file: how its value is checked, and the option it is the default of."""

    key: str
    check: Callable[[Any], Any]  # the value, or ValueError saying why not
    help: str
    dest: str | None = None  # the argparse destination it provides the default for


SETTINGS: tuple[Setting, ...] = (
    Setting("theme", _text, "the dashboard's Textual theme (the palette's choice is saved here)", "theme"),
    Setting("workload", _workload, "default workload family (-w)", "workload"),
    Setting("variant", _text, "default variant of that workload (-v)", "variant"),
    Setting("batch_size", _through(argtypes.batch_size), "default batch size of that workload (-b)", "batch_size"),
    Setting("device", _through(argtypes.device), "auto, cpu, cuda or cuda:N (--device)", "device"),
    Setting(
        "sample_interval",
        _through(argtypes.positive_float),
        "seconds between throughput samples (--sample-interval)",
        "sample_interval",
    ),
    Setting("gpu_interval", _through(argtypes.positive_float), "seconds between NVML samples (--interval)", "interval"),
    Setting("record_dir", _directory, "folder for the dashboard's recordings (c)"),
)
_BY_KEY = {s.key: s for s in SETTINGS}
WORKLOAD_BOUND = ("variant", "batch_size")  # these go with the file's workload, not another one


# -- reading ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UserConfig:
    """The file's checked values and what was wrong with it (one line each)."""

    path: Path
    values: dict[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def option_defaults(self, workload: str | None = None) -> dict[str, Any]:
        """The file's values by argparse destination. ``workload``: the one the command line
        asks for; when it is another family, the file's variant and batch size do not apply."""
        own = self.values.get("workload")
        other_family = workload is not None and workload != own
        return {
            s.dest: self.values[s.key]
            for s in SETTINGS
            if s.dest and s.key in self.values and not (other_family and s.key in WORKLOAD_BOUND)
        }


def load(path: Path | None = None) -> UserConfig:
    """Read and check the settings file; a missing file is an empty one."""
    path = config_path() if path is None else path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return UserConfig(path)
    except (OSError, UnicodeDecodeError) as exc:
        return UserConfig(path, problems=(f"config {path}: cannot read it ({_reason(exc)}); using the defaults",))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return UserConfig(path, problems=(f"config {path}: {exc}; using the defaults",))
    values, problems = _check(data)
    return UserConfig(path, values, tuple(f"config {path}: {p}" for p in problems))


def _check(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, raw in data.items():
        setting = _BY_KEY.get(key)
        if setting is None:
            problems.append(f"unknown key {key!r} (known: {', '.join(_BY_KEY)}); ignored")
            continue
        try:
            values[key] = setting.check(raw)
        except ValueError as exc:
            problems.append(f"{key} = {_toml(raw)}: {' '.join(str(exc).split())}; using the default")
    if "variant" in values:
        problems.extend(_check_variant(values))
    if "batch_size" in values:
        problems.extend(_check_batch_size(values))
    return values, problems


def _check_variant(values: dict[str, Any]) -> list[str]:
    """The variant must belong to the file's workload (or the default one); else it is dropped."""
    from workloads.catalog_types import WorkloadError
    from workloads.registry import DEFAULT_FAMILY, family

    try:
        family(values.get("workload", DEFAULT_FAMILY)).variant(values["variant"])
    except WorkloadError as exc:
        return [f"variant = {_toml(values.pop('variant'))}: {exc}; using the default"]
    return []


def _check_batch_size(values: dict[str, Any]) -> list[str]:
    """The batch size must be within the file's workload's fixed limits (its cap, its dataset);
    else it is dropped and the family's default is used."""
    from workloads.registry import DEFAULT_FAMILY, family

    why = family(values.get("workload", DEFAULT_FAMILY)).batch_refusal(values["batch_size"], 1)
    if why is None:
        return []
    return [f"batch_size = {_toml(values.pop('batch_size'))}: {why}; using the default"]


def _toml(value: Any) -> str:
    """A value as TOML writes it (strings quoted), for messages and for ``save_setting``."""
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc)


# -- writing ------------------------------------------------------------------------------------------
def save_setting(key: str, value: str, path: Path | None = None) -> str | None:
    """Set ``key = value`` in the file, keeping every other line; None when saved, else why not.

    The key's line is replaced (or added at the top); the result is parsed back before it
    replaces the file, so a file with an error is left as it is.
    """
    path = config_path() if path is None else path
    _BY_KEY[key].check(value)
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read {path}: {_reason(exc)}"
    except tomllib.TOMLDecodeError as exc:
        return f"{path} has an error ({exc}); fix it first"
    line = f"{key} = {_toml(value)}"
    pattern = re.compile(rf"^[ \t]*{re.escape(key)}[ \t]*=.*$", re.MULTILINE)
    new = pattern.sub(line, text, count=1) if pattern.search(text) else f"{line}\n{text}"
    try:
        written = tomllib.loads(new).get(key)
    except tomllib.TOMLDecodeError:
        written = None
    if written != value:  # the key's line was not a plain top-level one
        return f"{path}: could not set {key} without rewriting the file; set it by hand"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(new, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        return f"cannot write {path}: {_reason(exc)}"
    return None
