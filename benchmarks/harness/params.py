"""A case's parameters: a dataclass whose fields have defaults and, in their metadata, a help text
(``param(default, "help")``). On the command line each is ``-p NAME=VALUE``, the value read by the
field's type: int, float, bool (``true``/``false``), str, an optional one (``none``) or a tuple
of str (comma-separated)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

from benchmarks.harness.case import BadParameter


def param(default: Any, help: str) -> Any:
    """A parameter's field: its default and what it sets (a tuple default is kept as given)."""
    return dataclasses.field(default=default, metadata={"help": help})


@dataclasses.dataclass(frozen=True)
class OnDevice:
    """The first parameter of a case that times steps on one device: which (a case's own
    parameters follow, in a dataclass that derives from this one)."""

    device: str = param("cuda", "the device the steps run on (cpu: the case's plumbing, as its tiny run)")


def _convert(name: str, kind: Any, text: str) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if args and type(None) in args:  # X | None
        if text.lower() == "none":
            return None
        (kind,) = [a for a in args if a is not type(None)]
        origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is tuple:
        return tuple(part for part in text.split(",") if part)
    if kind is bool:
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise BadParameter(f"-p {name}={text}: true or false")
        return text.lower() in ("true", "1", "yes")
    if kind in (int, float, str):
        try:
            return kind(text)
        except ValueError:
            raise BadParameter(f"-p {name}={text}: not a {kind.__name__}") from None
    raise TypeError(f"parameter {name}: a type the command line cannot give ({kind})")


def build(params: type, given: Mapping[str, str], overrides: Mapping[str, object] = {}) -> Any:
    """The parameters: the defaults, then ``overrides`` (a case's tiny values), then ``given`` (text)."""
    hints = typing.get_type_hints(params)
    names = {f.name for f in dataclasses.fields(params)}
    unknown = (set(given) | set(overrides)) - names
    if unknown:
        raise BadParameter(f"unknown parameters {sorted(unknown)}; the case takes {sorted(names)}")
    values = {**overrides, **{k: _convert(k, hints[k], v) for k, v in given.items()}}
    return params(**values)


def parse_pairs(pairs: list[str]) -> dict[str, str]:
    """``["rounds=3", "device=cpu"]`` as a mapping (a value may hold ``=``)."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise BadParameter(f"-p {pair}: NAME=VALUE")
        out[name.replace("-", "_")] = value
    return out


def as_dict(params: Any) -> dict[str, Any]:
    """The parameters as JSON values (a tuple as a list)."""
    return {f.name: _plain(getattr(params, f.name)) for f in dataclasses.fields(params)}


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def changed(params: Any) -> list[str]:
    """``NAME=VALUE`` for each parameter that is not its default, as the command line gives it."""
    out = []
    for f in dataclasses.fields(params):
        value = getattr(params, f.name)
        if value != f.default:
            out.append(f"{f.name}={_text(value)}")
    return out


def _text(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return "none" if value is None else str(value)


def described(params: type) -> list[tuple[str, str, str]]:
    """(name, default, help) of each parameter."""
    return [(f.name, _text(f.default), str(f.metadata.get("help", ""))) for f in dataclasses.fields(params)]
