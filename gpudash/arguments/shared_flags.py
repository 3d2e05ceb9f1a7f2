"""The flags a user carries from one command to the next, declared once: ``-q/--quiet`` (every
command that prints progress), ``--json`` (every command that prints results) and ``--device``
(every command that runs a workload). Each parser that takes one adds it here, so its spelling,
short form, help and meaning cannot drift; ``tests/test_flags.py`` holds every subcommand to them.

What they mean, everywhere: stdout carries the results (with ``--json``, one JSON document and
nothing else); stderr carries progress, information, warnings and errors, and ``-q`` leaves only
the warnings and errors there. ``--device`` is checked by ``argtypes.device`` when parsed (a bad
spelling: one line, exit status 2) and by ``argtypes.check_device`` before anything starts.
"""

from __future__ import annotations

from typing import Any

from gpudash.arguments import argtypes

QUIET_HELP = "no progress or info lines on stderr, only warnings and errors (results on stdout still print)"
JSON_HELP = "the results as one JSON document on stdout, and nothing else there (its keys: docs/usage.md)"
DEVICE_HELP = "auto, cpu, cuda or cuda:N (default: auto = cuda if available)"

SHARED_FLAGS = {  # dest: how the user spells it
    "quiet": ("-q", "--quiet"),
    "json": ("--json",),
    "device": ("--device",),
}


def add_quiet(options: argtypes.Options) -> None:
    """``-q/--quiet``: no progress or info lines on stderr."""
    options.add_argument(*SHARED_FLAGS["quiet"], action="store_true", help=QUIET_HELP)


def add_json(options: argtypes.Options) -> None:
    """``--json``: the results as one JSON document on stdout."""
    options.add_argument(*SHARED_FLAGS["json"], action="store_true", help=JSON_HELP)


def add_device(options: argtypes.Options, **default: Any) -> None:
    """``--device DEV`` (``default``: ``default="auto"`` where the parser keeps defaults; the
    command line's parsers leave it out and take ``options.DEFAULTS``)."""
    options.add_argument(*SHARED_FLAGS["device"], type=argtypes.device, metavar="DEV", help=DEVICE_HELP, **default)


def add_peak_tflops(options: argtypes.Options) -> None:
    """``--peak-tflops``: the dense peak MFU is a share of (the run's commands, sweep and tune)."""
    options.add_argument(
        "--peak-tflops",
        type=argtypes.tflops,
        metavar="TFLOPS",
        help="the GPU's dense peak for the step's dtype that MFU is a share of (default: the datasheet "
        "figure of a known GPU; MFU is blank for others, and on the CPU, without this)",
    )


def add_image_size(options: argtypes.Options) -> None:
    """``--image-size PX``: the image side of a family's workload (the run's commands and tune)."""
    help_text = "image side, a power of two (default: the family's)"
    options.add_argument("--image-size", type=argtypes.image_size, metavar="PX", help=help_text)


def add_workers(options: argtypes.Options, whose: str) -> None:
    """``--workers N``: DataLoader workers of ``whose`` workload, where its variant uses them."""
    options.add_argument(
        "--workers",
        type=argtypes.nonnegative_int,
        metavar="N",
        help=f"DataLoader workers of {whose}, where the variant uses them (default: the CPUs, split among one "
        "machine's ranks)",
    )
