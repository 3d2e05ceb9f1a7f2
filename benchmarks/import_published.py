"""One-off: the published outputs docs/BENCHMARKS.md quotes (the benchmark scripts' printed tables,
the retired probes' outputs, the multi-GPU test runs) converted into results beside them
(``NAME.result.json``), so that the page is built from JSON. Run once, then removed: git keeps it.

    python -m benchmarks.import_published

Each output's text is taken in exactly (``harness.document.blocks_of``); the figures the page
reads are read off it here, once: a line's ratio, interval, verdict and goal, a header's command,
machine and date. The sweeps and tune runs are taken in by their own cases (``sweep``, ``tune``)."""

from __future__ import annotations

import csv
import json
import re
import shlex
from pathlib import Path

from benchmarks.harness.document import blocks_of
from benchmarks.harness.render import markdown
from benchmarks.harness.result import SUFFIX, Figure, Result

BENCH = Path(__file__).resolve().parents[1] / "docs" / "bench"
RATIO = re.compile(r"^([0-9.]+)× (?:\[([0-9.]+)–([0-9.]+)\]|\(no CI\)), ([a-z ]+?)(?: \((.*)\))?$")
LABELLED = re.compile(r"^(.+?, (?:paired rounds|ratio of means|interleaved burst by burst|by steps alternated)): (.+)$")
MEDIAN = re.compile(r"^(median .+?): ([0-9.]+)")
CEILING = re.compile(
    r"^together, the cost's ceiling(?: with the writer's CPU time (.+?))?: tracked/bare ≥ ([0-9.]+) \((.*)\)$"
)
GOAL = re.compile(r"target >= ([0-9.]+): (met|not met)|overhead at most 1%: (yes|NO)")

OUTPUTS = {  # folder: (case, its outputs the page quotes)
    "h100-vision-overhead": (
        "engine_overhead",
        "resnet50 mine mine-event-per-step mine-polled-every-step mine-paired-before mine-bursts mine-rounds "
        "mine-interleaved resnet50-best-resident",
    ),
    "h100-track": (
        "track_overhead",
        "track-overhead track-overhead-before track-overhead-polled track-overhead-abba track-overhead-abba-again "
        "track-overhead-abba-warm1",
    ),
}
SINGLE = {  # output: case
    "h100-vision-overhead/host-call-cost.txt": "host_call_cost",
    "h100-vision-overhead/step-timing-cost.txt": "step_timing_cost",
    "h100-job/job-overhead-resnet.txt": "job_overhead",
    "h100-job/job-overhead-small-pinned-1.txt": "job_overhead",
    "h100-job/job-overhead-small-pinned-2.txt": "job_overhead",
    "h100-job/job-hook-cost.txt": "job_hook_cost",
    "h100-job/job-hook-cost-as-is.txt": "job_hook_cost",
    "h100-job/job-hook-cost-unfrozen.txt": "job_hook_cost",
    "h100-gpm/gpm-cost.txt": "gpm_cost",
    "h100-gpm/mfu-check.txt": "mfu_check",
    "h200x2-ddp-defaults/torchrun-ab.md": "job_overhead",
    "h100-host-time-probe.md": "host_time_probe",
    "h100-input-pipeline-profile.md": "input_pipeline_profile",
}
SCALING = [
    "h200x2-ddp/scaling.md",
    "h200x2-ddp/scaling-augment.md",
    "h200x2-ddp/scaling-input_pipeline.md",
    *(
        f"h200x2-ddp-knobs/gpudash-{n}.md"
        for n in ("resnet50-plain", "resnet50-ddp-knobs", "encdec-plain", "encdec-ddp-knobs")
    ),
    "h200x2-ddp-defaults/gpudash-resnet50-defaults.md",
    "h200x2-ddp-defaults/gpudash-encdec-defaults.md",
]
BARE = [
    "h200x2-ddp-knobs/bare-resnet50.md",
    "h200x2-ddp-knobs/bare-resnet50-rerun.md",
    "h200x2-ddp-defaults/bare-resnet50-defaults.md",
]
TESTS = [
    "h200x2-ddp/multigpu-tests.md",
    "h200x2-ddp-knobs/multigpu-tests.txt",
    "h200x2-ddp-defaults/multigpu-tests.txt",
]


# how a retired script's flags read as its case's parameters: flag -> (parameter, "value" | "append" | "flag")
FLAGS: dict[str, dict[str, tuple[str, str]]] = {
    "ddp_scaling": {
        "--nproc": ("nproc", "value"),
        "-w": ("workloads", "append"),
        "-b": ("batches", "append"),
        "--repeats": ("repeats", "value"),
        "--seconds": ("seconds", "value"),
        "--warmup": ("warmup", "value"),
        "--device": ("device", "value"),
        "--knob": ("knobs", "append"),
        "--variant": ("variants", "append"),
        "--out": ("", "value"),  # a temporary folder for its sweeps: not kept
    },
    "ddp_bare": {
        "--model": ("model", "value"),
        "--batch": ("batch", "value"),
        "--amp": ("amp", "value"),
        "--channels-last": ("channels_last", "flag"),
        "--nproc": ("nproc", "value"),
        "--setting": ("settings", "append"),
        "--steps": ("steps", "value"),
        "--repeats": ("repeats", "value"),
        "--warmup": ("warmup", "value"),
        "--trace-steps": ("trace_steps", "value"),
        "--device": ("device", "value"),
    },
    "job_overhead": {
        "--job": ("jobs", "append"),
        "--pairs": ("pairs", "value"),
        "--steps": ("steps", "value"),
        "--job-cpus": ("job_cpus", "value"),
    },
    "job_hook_cost": {"--blocks": ("blocks", "value"), "--pairs": ("pairs", "value"), "--as-is": ("as_is", "flag")},
}


def harness_command(case: str, ran_as: str) -> str:
    """The harness command that runs what a retired script's command line ran (its defaults left out)."""
    from benchmarks.harness.params import build
    from benchmarks.harness.registry import named
    from benchmarks.harness.runner import command_line

    words = shlex.split(ran_as)
    words = words[words.index(next(w for w in words if "benchmarks" in w)) + 1 :]
    given: dict[str, str] = {}
    i = 0
    while i < len(words):
        name, how = FLAGS[case][words[i]]
        if how == "flag":
            given[name] = "true"
            i += 1
            continue
        if name:
            given[name] = f"{given[name]},{words[i + 1]}" if how == "append" and name in given else words[i + 1]
        i += 2
    return command_line(named(case), build(named(case).params, given))


def ratio_figure(name: str, text: str) -> Figure:
    """A printed ratio line as a figure: "0.99× [0.98–0.99], within noise (… target >= 0.98: met)"."""
    said = text.split(": ", 1)[1] if text.startswith(name) else text
    m = RATIO.match(said)
    assert m, f"not a ratio: {said!r}"
    value, low, high, verdict, note = m.groups()
    goal = GOAL.search(note or "")
    target = met = None
    if goal and goal.group(1):
        target, met = f"≥ {goal.group(1)}", goal.group(2)
    return Figure("comparison", text, float(value), _f(low), _f(high), verdict, target=target, met=met)


def _f(text: str | None) -> float | None:
    return float(text) if text else None


def figures_of(r: Result) -> dict[str, Figure]:
    """The figures the page reads off an engine_overhead or track_overhead output's lines."""
    out: dict[str, Figure] = {}
    for line in r.text_lines():
        if m := LABELLED.match(line):
            out[m.group(1)] = ratio_figure(m.group(1), line)
        elif m := MEDIAN.match(line):
            goal = GOAL.search(line)
            target = f"≥ {goal.group(1)}" if goal and goal.group(1) else None
            out[m.group(1)] = Figure("value", line, float(m.group(2)), target=target)
        elif m := CEILING.match(line):
            what = m.group(1) or "all of it"
            met = "met" if m.group(3).endswith("yes") else "not met"
            out[f"ceiling, {what}"] = Figure("value", line, float(m.group(2)), target="≥ 0.99", met=met)
    return out


def converted(path: Path, case: str, command: str = "", markdown_headings: bool = False) -> Result:
    """An output as a result of ``case``, its text taken in exactly."""
    text = path.read_text(encoding="utf-8")
    r = Result(case=case, command=command, source=str(path.relative_to(BENCH.parents[1])))
    r.blocks = blocks_of(text, markdown=markdown_headings)
    assert markdown(r) == text, f"{path}: not taken in exactly"
    return r


def keep(r: Result, path: Path) -> None:
    r.write(
        path.with_name(path.stem + SUFFIX)
        if path.suffix != ".json"
        else path.with_name(path.stem + ".diagnose" + SUFFIX)
    )
    print(path.with_name(path.stem + SUFFIX).relative_to(BENCH.parents[1]))


def backticked(r: Result) -> str:
    """The command a header's backticked line names."""
    return next((line.strip("`") for line in r.text_lines() if line.startswith("`")), "")


def scaling(path: Path) -> None:
    """A ddp_scaling output: its command, the machine its sweeps named, its knobs and date."""
    r = converted(path, "ddp_scaling")
    ran_as = backticked(r)
    r.command = harness_command("ddp_scaling", ran_as) if ran_as else ""
    r.data["ran_as"] = ran_as or None
    lines = r.text_lines()
    r.data["machine"] = next((line for line in lines if "driver" in line), None)
    r.data["knobs"] = next((line.removeprefix("knobs: ") for line in lines if line.startswith("knobs: ")), None)
    r.stamp["date"] = re.search(r"(\d{4}-\d\d-\d\d)", r.comments()[0]).group(1)  # type: ignore[union-attr]
    keep(r, path)


def bare(path: Path) -> None:
    """A ddp_bare output: its command, and when, with what and where it ran (its header's end)."""
    r = converted(path, "ddp_bare")
    r.data["ran_as"] = backticked(r)
    r.command = harness_command("ddp_bare", r.data["ran_as"])
    r.data["when"] = r.comments()[0].split(" — ")[1]
    keep(r, path)


def tests(path: Path) -> None:
    """A run of the multi-GPU tests: its summary line."""
    r = converted(path, "multigpu_tests", "pytest -m multigpu tests/test_ddp_multigpu.py tests/test_ddp.py")
    r.data["summary"] = [line for b in r.blocks for line in b.lines if line.strip()][-1]
    keep(r, path)


def torchrun_first_look(folder: Path) -> None:
    """A user's torchrun script bare and under gpudash, two pairs by hand, and two diagnoses of it."""
    pairs: dict[str, dict[str, float]] = {}
    for line in (folder / "torchrun-resnet-bare-vs-gpudash.txt").read_text().splitlines():
        who, _, job = line.partition(": ")
        setting, run = who.split()
        pairs.setdefault(run, {})[setting] = float(job.split("world_samples_per_s=")[1])
    (summary,) = csv.DictReader((folder / "torchrun-resnet-gpudash-summary-run1.csv").open())
    diagnoses = {b: json.loads((folder / f"torchrun-diagnose-b{b}.json").read_text()) for b in (16, 128)}
    r = Result(
        case="torchrun_first_look",
        command="python3 -m torch.distributed.run --nproc-per-node 2 benchmarks/jobs/ddp_resnet_job.py",
        source="docs/bench/h200x2-ddp-knobs/torchrun-resnet-bare-vs-gpudash.txt",
    )
    r.data = {
        "pairs": pairs,
        "gpudash_samples_per_s_run1": float(summary["samples_per_s"]),
        "diagnoses": {
            str(b): {k: d[k] for k in ("bound", "why")} | {"comm_exposed_ms": d["evidence"].get("comm_exposed_ms")}
            for b, d in diagnoses.items()
        },
    }
    r.write(folder / f"torchrun-first-look{SUFFIX}")


def finetune_traces(path: Path) -> None:
    """The batch-64 profiler windows of finetune: each window's variant, time and message."""
    r = converted(path, "finetune_traces")
    r.command = r.comments()[0].split("  (")[0]
    windows = []
    for line in r.text_lines():
        variant, time_s, message = line.split(" | ")
        figures = dict(re.findall(r"(GPU busy|overlap) ([0-9.]+)%", message))
        stages = re.search(r"stages ([^:]+) ms/step on the GPU", message)
        kernels = re.search(r"([0-9]+) kernels/step", message)
        assert stages and kernels, message
        stage_ms = {name: float(ms) for name, ms in re.findall(r"([a-z]+) ([0-9.]+)", stages.group(1))}
        windows.append(
            {
                "variant": variant,
                "time_s": float(time_s),
                "gpu_busy_pct": float(figures["GPU busy"]),
                "overlap_pct": float(figures["overlap"]),
                "kernels_per_step": int(kernels.group(1)),
                "stage_ms": stage_ms,
                "message": message,
            }
        )
    r.data["windows"] = windows
    keep(r, path)


def autotune_log(path: Path) -> None:
    """The interrupted max-autotune sweep's log: how many kernels it had autotuned."""
    r = Result(case="sweep_log", command="gpudash sweep (its log)", source=str(path.relative_to(BENCH.parents[1])))
    r.data["autotuned"] = path.read_text().count("\nAUTOTUNE ")
    r.write(path.with_name(path.stem + SUFFIX))


def main() -> None:
    for folder, (case, stems) in OUTPUTS.items():
        for stem in stems.split():
            path = BENCH / folder / f"{stem}.txt"
            r = converted(path, case)
            r.figures = figures_of(r)
            keep(r, path)
    for name, case in SINGLE.items():
        path = BENCH / name
        r = converted(path, case)
        ran_as = next((c.split("`")[1] for c in r.comments() if c.startswith("`benchmarks/")), None)
        if ran_as:
            r.data["ran_as"] = f"python {ran_as}"
            r.command = harness_command(case, ran_as)
        if case == "job_overhead" and path.suffix == ".md":
            r.data["on"] = r.comments()[0].removeprefix("job overhead on ")
        keep(r, path)
    for name in SCALING:
        scaling(BENCH / name)
    for name in BARE:
        bare(BENCH / name)
    for name in TESTS:
        tests(BENCH / name)
    torchrun_first_look(BENCH / "h200x2-ddp-knobs")
    finetune_traces(BENCH / "h100-vision-finetune" / "traces-b64.txt")
    autotune_log(BENCH / "h100-vision-resnet50-autotune" / "sweep-resnet50.log")


if __name__ == "__main__":
    main()
