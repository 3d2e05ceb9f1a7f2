"""The command line's options: ``DEFAULTS`` and the groups of options the parsers of ``gpudash`` and
its subcommands share (what runs and how it is measured, recording, the theme, serving); the
parsers themselves: ``gpudash.cli.parsers``.

Every parser leaves an option it was not given out of the namespace (``argument_default=SUPPRESS``),
which is how a subcommand's flags and the ones before it merge and how the settings file knows what
the command line set: give an option no ``default=``; its default belongs in ``DEFAULTS``. Nothing
here imports torch or textual at module level (``gpudash --help`` is fast).
"""

from __future__ import annotations

import argparse
from typing import Any

from gpudash.arguments import argtypes, shared_flags
from gpudash.core.controls import PERIODIC_STEPS
from gpudash.core.protocol import RunConfig
from gpudash.host.gpu_selection import gpu_list

DIAGNOSE_WARMUP_S = 5.0  # seconds of running before a diagnosis window (record --diagnose, gpudash diagnose)
DEFAULTS: dict[str, Any] = {  # every option's built-in default (the parsers have none)
    "workload": None,  # the registry's DEFAULT_FAMILY (filled in by settings.with_defaults)
    "variant": None,
    "batch_size": None,
    "device": "auto",
    "image_size": None,
    "workers": None,
    "seed": 0,
    "steps": None,
    "knob": None,
    "theme": None,
    "no_color": False,
    "sample_interval": RunConfig.sample_interval_s,
    "interval": RunConfig.gpu_interval_s,
    "gpus": None,
    "peak_tflops": None,
    "stall_after": RunConfig.stall_after_s,
    "watchdog": RunConfig.watchdog_s,
    "record": None,
    "duration": None,
    "log": None,
    "meta": None,
    "quiet": False,
    "force": False,
    "progress_every": None,
    "trace_every": None,
    "trace_steps": PERIODIC_STEPS,
    "diagnose": None,
    "warmup": DIAGNOSE_WARMUP_S,
    "keep_running": False,
    "no_check": False,
    "memory": False,
    "json": False,
    "once": False,
    "watch": False,
    "host": "127.0.0.1",
    "port": 8000,
    "public_url": None,
    "nproc": 1,
    "nnodes": 1,
    "rdzv_endpoint": None,
    "rdzv_id": None,
}
RECORD_ONLY = (
    ("--duration", "duration"),
    ("--log", "log"),
    ("--meta", "meta"),
    ("--trace-every", "trace_every"),
    ("--diagnose", "diagnose"),
    ("--force", "force"),
    ("--progress-every", "progress_every"),
)


# -- the option groups the parsers share ---------------------------------------------------------
def add_run_options(p: argparse.ArgumentParser) -> None:
    """What runs and how it is measured: the dashboard's, ``record``'s and ``serve``'s options."""
    _add_workload_options(p)
    _add_distributed_options(p)
    _add_measuring_options(p)


def _add_workload_options(p: argparse.ArgumentParser) -> None:
    from workloads.registry import DEFAULT_FAMILY, FAMILIES

    w = p.add_argument_group("workload")
    w.add_argument(
        "-w",
        "--workload",
        metavar="NAME",
        help=f"workload family: {', '.join(FAMILIES)} (default: {DEFAULT_FAMILY}); or your own, FILE.py:FUNCTION "
        "(docs/your-model.md)",
    )
    w.add_argument("-v", "--variant", metavar="NAME", help="variant (default: the family's; see 'gpudash list')")
    w.add_argument(
        "-b", "--batch-size", type=argtypes.batch_size, metavar="N", help="batch size (default: the family's)"
    )
    shared_flags.add_device(w)
    shared_flags.add_image_size(w)
    shared_flags.add_workers(w, "the workload")
    w.add_argument("--seed", type=int, help=f"random seed (default: {DEFAULTS['seed']})")
    argtypes.add_count(w, "--steps", help="stop after N steps")
    w.add_argument(
        "--knob",
        type=argtypes.knob,
        action="append",
        metavar="NAME[=VALUE]",
        help="a knob beyond the variant, repeatable: amp=bf16, channels_last, cudnn_benchmark, "
        "tf32, cuda_graph, compile[=MODE] ('gpudash list' says where each applies)",
    )


def _add_distributed_options(p: argparse.ArgumentParser) -> None:
    d = p.add_argument_group("data parallelism (torch.distributed DDP; torchrun's launcher and rendezvous)")
    argtypes.add_count(d, "--nproc", help="ranks on this node, one GPU each (gloo on the CPU) (default: 1, no DDP)")
    argtypes.add_count(
        d,
        "--nnodes",
        metavar="M",
        help="machines in the run, each running gpudash with the same --rdzv-endpoint (default: 1)",
    )
    d.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="the rendezvous of a multi-node run (torchrun's)")
    d.add_argument("--rdzv-id", metavar="ID", help="the run's id, the same on every node (torchrun's)")


def _add_measuring_options(p: argparse.ArgumentParser) -> None:
    m = p.add_argument_group("measuring")
    argtypes.add_seconds(
        m, "--sample-interval", help=f"seconds between throughput samples (default: {DEFAULTS['sample_interval']})"
    )
    argtypes.add_seconds(m, "--interval", help=f"seconds between NVML GPU samples (default: {DEFAULTS['interval']})")
    add_gpus_option(m, "the GPUs to watch, one row and CSV columns each")
    shared_flags.add_peak_tflops(m)
    argtypes.add_seconds(
        m,
        "--stall-after",
        help="your job (gpudash -- CMD): seconds with no step, in no evaluation, checkpoint or compile, "
        "after which it is called stalled and gpudash shows where each of its threads waits; also ten "
        "median steps at the least, never before its median step is known, nor while its step computes "
        f"(default: {DEFAULTS['stall_after']:g})",
    )
    m.add_argument(
        "--set",
        dest="job_set",
        action="append",
        metavar="KEY=VALUE",
        help="your job (gpudash -- CMD): a setting applied without an edit of its script, repeatable: "
        "num_workers, pin_memory, persistent_workers, prefetch_factor (its training DataLoader's; "
        "loader_site=FILE:LINE names it), cudnn_benchmark, expandable_segments; changing the numbers: "
        "tf32, autocast=bf16, compile (the model the optimizer steps); changing the training: batch_size "
        "(with loader_site)",
    )
    argtypes.add_seconds(
        m,
        "--watchdog",
        help="seconds without a sample or event before the workload process is reported as not "
        f"responding; --record then stops it and exits 1 (default: {DEFAULTS['watchdog']:g})",
    )


def add_gpus_option(options: argtypes.Options, what: str) -> None:
    """``--gpus I,J``: which GPUs are watched (the dashboard's, ``record``'s and ``watch``'s)."""
    options.add_argument(
        "--gpus",
        type=gpu_list,
        metavar="I,J",
        help=f"{what}, by index as nvidia-smi numbers them (default: the ones CUDA_VISIBLE_DEVICES names, "
        "else every GPU)",
    )


def add_theme_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--theme",
        metavar="NAME",
        help="the dashboard's Textual theme (default: the settings "
        "file's, where ctrl+p's Change theme saves it; else textual-dark)",
    )
    p.add_argument("--no-color", action="store_true", help="no colour: lines told apart by marker (as NO_COLOR=1)")


def add_record_options(p: argparse.ArgumentParser, title: str) -> None:
    r = p.add_argument_group(title)
    if p.prog == "gpudash":  # 'gpudash record' takes the path as its argument
        r.add_argument(
            "--record",
            metavar="PATH",
            help="record headless to a CSV file ('-': stdout); the same as 'gpudash record PATH'",
        )
    argtypes.add_seconds(r, "--duration", help="seconds to record once the workload runs (default: until Ctrl-C)")
    r.add_argument(
        "--force", action="store_true", help="overwrite the CSV and its metadata file if they exist (default: refuse)"
    )
    r.add_argument(
        "--log",
        metavar="PATH",
        help="the workload process's log (default: beside the CSV, .log); a job after -- writes none",
    )
    r.add_argument("--meta", metavar="PATH", help="metadata JSON (default: beside the CSV, .json)")
    shared_flags.add_quiet(r)
    argtypes.add_seconds(r, "--progress-every", help="seconds between progress lines on stderr (default: 10)")
    argtypes.add_seconds(
        r,
        "--trace-every",
        help="a torch.profiler window every S seconds (Chrome traces in PATH.traces/, figures in event rows)",
    )
    argtypes.add_seconds(
        r,
        "--diagnose",
        nargs="?",
        const=DIAGNOSE_WARMUP_S,
        help="a diagnosis window S seconds after the start (default: "
        f"{DIAGNOSE_WARMUP_S:g}): what bounds the step, an event row and a line on stderr",
    )
    r.add_argument(
        "--trace-steps",
        type=argtypes.int_at_least(1, "at least 1"),
        metavar="N",
        help=f"steps per profiler window (default: {DEFAULTS['trace_steps']}; at most 200)",
    )


def add_serve_options(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("serving")
    s.add_argument(
        "--host",
        metavar="ADDR",
        help=f"address to listen on (default: {DEFAULTS['host']}: this "
        "machine only; anything else lets whoever reaches the port run workloads here)",
    )
    s.add_argument("--port", type=argtypes.port, metavar="N", help=f"port (default: {DEFAULTS['port']})")
    s.add_argument(
        "--public-url",
        metavar="URL",
        help="the address browsers use, when it is not http://HOST:PORT (a proxy, an ssh tunnel to another port)",
    )
