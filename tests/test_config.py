"""The settings file: where it is, what it sets, flags over it, a bad file, the saved theme."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pandas as pd
import pytest
from textual.pilot import Pilot

from gpudash.arguments import config
from gpudash.cli.main import main
from gpudash.tui.app import GpuDashApp
from gpudash.tui.widgets import MessageBar
from tests.tui.conftest import wait_until
from tests.tui.fakes import FakeSource


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private XDG_CONFIG_HOME; returns the settings file's path there (not yet written)."""
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home / "gpudash" / "config.toml"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def gpudash(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpudash", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("gpudash: warning: ")]


# -- where it is -------------------------------------------------------------------------------------
def test_config_path_is_under_xdg_config_home(config_home: Path, tmp_path: Path) -> None:
    r = gpudash("--config-path", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.strip() == str(config_home)
    assert config.config_path() == config_home
    assert not config_home.exists()  # printing the path creates nothing


def test_no_file_is_no_settings_and_no_problem(config_home: Path) -> None:
    loaded = config.load()
    assert loaded.values == {} and loaded.problems == ()


# -- reading and checking ----------------------------------------------------------------------------
def test_every_key_is_read_and_checked(config_home: Path, tmp_path: Path) -> None:
    write(
        config_home,
        f'theme = "nord"\nworkload = "sync_loss"\nvariant = "fixed"\nbatch_size = 4\n'
        f'device = "CPU"\nsample_interval = 0.1\ngpu_interval = 2\nrecord_dir = "{tmp_path}"\n',
    )
    loaded = config.load()
    assert loaded.problems == ()
    assert loaded.values == {
        "theme": "nord",
        "workload": "sync_loss",
        "variant": "fixed",
        "batch_size": 4,
        "device": "cpu",
        "sample_interval": 0.1,
        "gpu_interval": 2.0,
        "record_dir": str(tmp_path),
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("batch_size = 0\n", "batch_size = 0: batch size must be at least 1"),
        ('batch_size = "eight"\n', 'batch_size = "eight": batch size must be a whole number'),
        ('device = "gpu"\n', 'device = "gpu": expected auto, cpu, cuda or cuda:N'),
        ("sample_interval = -1\n", "sample_interval = -1: must be more than 0"),
        ("sample_interval = true\n", "sample_interval = True: expected a number or a string"),
        ('workload = "nope"\n', "workload = \"nope\": unknown workload 'nope'"),
        ('variant = "gpu"\n', "variant = \"gpu\": unknown variant 'gpu' for workload 'encdec'"),
        ('record_dir = "/no/such/dir"\n', 'record_dir = "/no/such/dir": /no/such/dir is not a directory'),
        ("theme = 3\n", "theme = 3: expected a non-empty string"),
        ('thme = "nord"\n', "unknown key 'thme' (known: theme, workload,"),
        ("[run]\nworkload = 'augment'\n", "unknown key 'run'"),
    ],
)
def test_a_bad_key_or_value_is_one_line_naming_it_and_the_rest_still_applies(
    config_home: Path, text: str, says: str
) -> None:
    write(config_home, f"gpu_interval = 1.5\n{text}")
    loaded = config.load()
    assert len(loaded.problems) == 1, loaded.problems
    assert loaded.problems[0].startswith(f"config {config_home}: ")
    assert says in loaded.problems[0]
    assert loaded.values.get("gpu_interval") == 1.5  # the good key still counts


def test_a_syntax_error_names_the_line_and_every_default_applies(config_home: Path) -> None:
    write(config_home, 'device = "cpu"\nworkload = augment\n')
    loaded = config.load()
    assert loaded.values == {}
    (problem,) = loaded.problems
    assert "line 2" in problem and problem.endswith("using the defaults")


def test_variant_and_batch_size_go_with_their_workload(config_home: Path) -> None:
    write(config_home, 'workload = "sync_loss"\nvariant = "fixed"\nbatch_size = 4\ndevice = "cpu"\n')
    loaded = config.load()
    assert loaded.option_defaults() == {"workload": "sync_loss", "variant": "fixed", "batch_size": 4, "device": "cpu"}
    assert loaded.option_defaults("sync_loss")["variant"] == "fixed"
    assert loaded.option_defaults("augment") == {"workload": "sync_loss", "device": "cpu"}


# -- the command line over the file (checked before anything starts: nothing runs) -------------------
def test_the_files_variant_is_used_and_checked_like_a_flag(
    config_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(config_home, 'workload = "encdec"\nvariant = "pipelined"\n')
    assert main(["--record", "-", "--device", "cpu"]) == 2
    assert "pipelined" in capsys.readouterr().err  # the catalog's refusal of the file's variant on a CPU


def test_a_flag_overrides_the_file(config_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(config_home, 'workload = "encdec"\nvariant = "pipelined"\ndevice = "cpu"\n')
    # -v from the command line replaces the file's variant; -w another family drops it altogether;
    # both then stop at the unwritable path, after the variant and device were accepted
    for argv in (["-v", "serial"], ["-w", "augment"]):
        assert main(["--record", str(tmp_path / "no" / "x.csv"), *argv]) == 2
        assert "does not exist" in capsys.readouterr().err


def test_a_bad_file_warns_once_and_the_command_goes_on(config_home: Path, tmp_path: Path) -> None:
    write(config_home, 'device = "gpu"\n')
    r = gpudash("--record", str(tmp_path / "no" / "x.csv"), "--device", "cpu", cwd=tmp_path)
    assert r.returncode == 2
    assert warnings(r.stderr) == [
        f'gpudash: warning: config {config_home}: device = "gpu": expected auto, cpu, '
        "cuda or cuda:N, got 'gpu'; using the default"
    ]
    assert "does not exist" in r.stderr.splitlines()[-1]


@pytest.mark.slow
def test_a_recording_runs_with_the_files_settings_under_the_flags(config_home: Path, tmp_path: Path) -> None:
    write(
        config_home,
        'workload = "sync_loss"\nvariant = "fixed"\nbatch_size = 4\ndevice = "cpu"\n'
        "sample_interval = 0.1\ngpu_interval = 3\nnot_a_key = 1\n",
    )
    r = gpudash("record", "run.csv", "-b", "2", "--image-size", "16", "--steps", "10", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(warnings(r.stderr)) == 1 and "not_a_key" in r.stderr
    ran = json.loads((tmp_path / "run.json").read_text())["config"]
    assert (ran["workload"], ran["variant"], ran["batch_size"], ran["device"]) == ("sync_loss", "fixed", 2, "cpu")
    assert (ran["sample_interval_s"], ran["gpu_interval_s"]) == (0.1, 3.0)  # the file's; -b 2 over its 4
    s = pd.read_csv(tmp_path / "run.csv").query("row_kind == 'sample'")
    assert set(s.workload) == {"sync_loss"} and set(s.variant) == {"fixed"} and set(s.batch_size) == {2}


# -- writing back ----------------------------------------------------------------------------------------
def test_save_setting_keeps_every_other_line(config_home: Path) -> None:
    write(config_home, '# my settings\ndevice = "cpu"  # this box has no GPU\ntheme = "nord"\n')
    assert config.save_setting("theme", "dracula") is None
    assert config_home.read_text() == '# my settings\ndevice = "cpu"  # this box has no GPU\ntheme = "dracula"\n'
    config_home.unlink()
    assert config.save_setting("theme", "nord") is None  # no file yet: created, folder and all
    assert config_home.read_text() == 'theme = "nord"\n'


def test_save_setting_leaves_a_broken_file_alone(config_home: Path) -> None:
    write(config_home, "device = \n")
    why = config.save_setting("theme", "nord")
    assert why is not None and "fix it first" in why
    assert config_home.read_text() == "device = \n"


async def pick_in_palette(pilot, query: str, opened: bool = False) -> None:
    """Type ``query`` in the command palette (ctrl+p unless it is open) and take the first hit."""
    from textual.command import CommandPalette

    app = pilot.app
    if not opened:
        await pilot.press("ctrl+p")
    await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
    await pilot.press(*query)
    await wait_until(pilot, lambda: app.screen.query("CommandList").first().option_count > 0, "a hit")
    await pilot.press("enter")


@asynccontextmanager
async def dashboard() -> AsyncIterator[tuple[GpuDashApp, Pilot]]:
    """The dashboard (a scripted source) with the settings file as it is now, mounted."""
    app = GpuDashApp(FakeSource(), clock=lambda: 0.0, toasts=False, user_config=config.load())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        yield app, pilot


@pytest.mark.slow
async def test_the_palettes_theme_is_saved_and_the_next_run_starts_on_it(config_home: Path) -> None:
    write(config_home, 'device = "cpu"\n')
    async with dashboard() as (app, pilot):
        assert app.theme == "textual-dark"
        assert config_home.read_text() == 'device = "cpu"\n'  # starting writes nothing
        await pick_in_palette(pilot, "theme")  # "Theme": Textual's list of themes
        await pick_in_palette(pilot, "nord", opened=True)
        await wait_until(pilot, lambda: app.theme == "nord", "the theme to change")
        await wait_until(pilot, lambda: "nord" in config_home.read_text(), "the theme to be saved")
        assert f"saved in {config_home}" in app.query_one(MessageBar).text
    assert config.load().values == {"device": "cpu", "theme": "nord"}
    async with dashboard() as (app, pilot):
        assert app.theme == "nord"


async def test_an_unknown_theme_in_the_file_is_a_message_and_the_default_theme(config_home: Path) -> None:
    write(config_home, 'theme = "no-such-theme"\n')
    async with dashboard() as (app, pilot):
        assert app.theme == "textual-dark"
        assert "theme 'no-such-theme' is not a Textual theme" in app.query_one(MessageBar).text
    assert config_home.read_text() == 'theme = "no-such-theme"\n'


async def test_the_dashboards_recordings_go_to_the_record_dir(config_home: Path, tmp_path: Path) -> None:
    from textual.widgets import Input

    from gpudash.tui.screens import PromptScreen

    folder = tmp_path / "runs"
    folder.mkdir()
    write(config_home, f'record_dir = "{folder}"\n')
    user_config = config.load()
    app = GpuDashApp(
        FakeSource(), clock=lambda: 0.0, toasts=False, user_config=user_config, save_dir=user_config.get("record_dir")
    )  # as gpudash run builds it
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, PromptScreen), "the record prompt")
        path = Path(app.screen.query_one(Input).value)
    assert path.parent == folder and path.name.startswith("gpudash-") and path.suffix == ".csv"


def test_the_theme_flag_is_checked(config_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--theme", "nope", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpudash: error: --theme nope: not a Textual theme; choose one of: ") and "nord" in err
