"""``gpudash.track()``'s errors: a bad argument raises one line and writes nothing; a bad step or
mark, a full disk and a metadata write that fails are one warning on stderr each, the loop goes on
and the file stays whole (the tracked loop's file, read back: tests/test_track.py)."""

from __future__ import annotations

import resource
import signal

import pytest

import gpudash
from gpudash.core.protocol import EventKind
from tests.test_track import WARNING, events, messages, run_python, samples, train, whole

# -- errors: one line, the loop goes on, the file stays whole -----------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"path": "no/such/dir/run.csv"}, FileNotFoundError, "no directory no/such/dir"),
        ({"label": ""}, ValueError, "label must be a non-empty string"),
        ({"batch_size": 0}, ValueError, "batch_size must be a whole number ≥ 1"),
        ({"interval_s": 0}, ValueError, "interval_s must be a number of seconds"),
        ({"device": "gpu"}, ValueError, "device must be 'cpu', 'cuda' or 'cuda:N'"),
        ({"path": "-"}, ValueError, "path must name a CSV file"),
    ],
)
def test_bad_arguments_raise_a_one_line_error(tmp_path, monkeypatch, kwargs, error, words):
    monkeypatch.chdir(tmp_path)
    kwargs = {"path": "run.csv", **kwargs}
    with pytest.raises(error) as info:
        gpudash.track(**kwargs)
    assert words in str(info.value) and "\n" not in str(info.value) and str(info.value).startswith("gpudash.track:")
    assert not (tmp_path / "run.csv").exists()


def test_a_directory_is_not_a_csv(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a directory"):
        gpudash.track(tmp_path)


def test_cuda_asked_for_without_cuda_is_refused(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="CUDA is not available"):
        gpudash.track(tmp_path / "run.csv", device="cuda")


def test_a_bad_step_argument_is_one_warning_and_the_loop_goes_on(tmp_path, capfd):
    path = tmp_path / "run.csv"
    with gpudash.track(path, interval_s=0.05) as tracker:
        good = train(tracker, 0.3, 2.0)
        tracker.step(samples=-1)
        tracker.step(samples="lots")  # type: ignore[arg-type]
        tracker.mark("after")
        train(tracker, 0.1, 1.0)  # no-ops now
    err = capfd.readouterr().err
    assert err.count(WARNING) == 1, err
    assert "step(samples=-1): samples must be a whole number ≥ 0; recording stopped, training goes on" in err
    rows = whole(path)
    msgs = messages(path)
    assert samples(msgs)[-1].steps == good
    kinds = [(e.kind, e.what) for e in events(msgs)]
    assert kinds[-2:] == [(EventKind.ERROR, "track"), (EventKind.STOPPED, "")]
    assert rows[-1][0] == "event"


def test_a_bad_mark_is_one_warning(tmp_path, capfd):
    with gpudash.track(tmp_path / "run.csv", interval_s=0.05) as tracker:
        train(tracker, 0.1, 1.0)
        tracker.mark(None)  # type: ignore[arg-type]
        tracker.mark("")
    err = capfd.readouterr().err
    assert err.count(WARNING) == 1 and "mark(None): the text must be a non-empty string" in err


@pytest.mark.slow
def test_a_full_disk_is_one_warning_the_loop_goes_on_and_the_file_is_whole(tmp_path):
    limit = 3000  # bytes: a file may grow to this, a write past it fails (EFBIG), as on a full disk

    def small_files() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    code = (
        "import time, gpudash\n"
        "with gpudash.track('run.csv', interval_s=0.05) as t:\n"  # 20 rows a second: past the limit in 1 s
        "    for i in range(800): time.sleep(0.002); t.step(samples=8)\n"  # 1.6 s at least
        "print('trained', i + 1)\n"
    )
    proc = run_python(code, tmp_path, preexec_fn=small_files)
    assert proc.returncode == 0 and proc.stdout == "trained 800\n", proc.stderr  # the training finished
    assert proc.stderr.count(WARNING) == 1, proc.stderr
    assert (
        "gpudash.track: warning: cannot write run.csv: File too large; recording stopped, training goes on"
        in proc.stderr
    )
    path = tmp_path / "run.csv"
    assert path.stat().st_size <= limit
    assert path.read_bytes().endswith(b"\n")
    rows = whole(path)  # every row whole
    assert sum(r[0] == "sample" for r in rows) >= 3


def test_a_failed_metadata_write_is_one_warning_and_the_csv_goes_on(tmp_path, capfd):
    path = tmp_path / "run.csv"
    with gpudash.track(path, interval_s=0.05) as tracker:
        train(tracker, 0.2, 2.0)
        (tmp_path / "run.json").unlink()
        (tmp_path / "run.json").mkdir()  # os.replace onto a directory fails: the JSON cannot be written
        n = train(tracker, 0.2, 2.0)
    err = capfd.readouterr().err
    assert err.count(WARNING) == 1 and "cannot write" in err and "the CSV goes on" in err
    assert n > 0 and events(messages(path))[-1].kind == EventKind.STOPPED
