"""``gpudash serve``: the dashboard in a real headless browser (Debian's chromium driven by
Playwright), the localhost default and its warning, its exit status, and no process left behind,
even when the server is SIGKILLed with a tab open (a websocket as the page opens it)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpudash.cli.parsers import build_parsers
from gpudash.cli.serve import as_argv, dashboard_command, is_loopback, public_url
from gpudash.core import proctree

CHROMIUM = next(filter(None, (shutil.which(n) for n in ("chromium", "chromium-browser"))), None)
SERVING = "gpudash: serving the dashboard on "
# textual-serve draws the terminal on a canvas (xterm.js); the test names xterm's Terminal object
# in the page so that it can read the screen's text from xterm's buffer
TERMINAL_JS = re.compile(r"this\.terminal=new (\w+)\.Terminal\(")
SCREEN_JS = """() => {
  const t = window.__terminal;
  if (!t) return "";
  const lines = [];
  for (let y = 0; y < t.rows; y++) {
    const line = t.buffer.active.getLine(y);
    lines.push(line ? line.translateToString(true) : "");
  }
  return lines.join("\\n");
}"""
THROUGHPUT = re.compile(r"^ now +\d+(\.\d+)?k? ", re.MULTILINE)  # the stats panel's first figure: steps/s now
INTERRUPTED = 130  # gpudash serve's exit status after SIGINT or SIGTERM (ExitCode.INTERRUPTED)
DIE_WITH_SERVER_S = 5.0  # issue 23: a SIGKILLed server's tabs (dashboards, workloads) are gone this soon


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_processes(sid: int) -> list[str]:
    """The live processes of session ``sid`` (the server started its own), as "pid command"."""
    return [f"{pid} {(proctree.command_line(pid) or '').strip()}" for pid in proctree.session_members(sid)]


def wait_for(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.2)


@contextmanager
def serving(tmp_path: Path, *args: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """``gpudash serve ARGS`` in its own session, once it listens; its stderr's file. Whatever is
    left of the session afterwards is killed (the tests assert there is nothing)."""
    err = tmp_path / "serve.err"
    with open(err, "wb") as errfile:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpudash", "serve", *args],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=errfile,
            start_new_session=True,
        )
    try:
        wait_for("the server to listen", lambda: SERVING in err.read_text() or proc.poll() is not None, 60)
        assert proc.poll() is None, err.read_text()
        yield proc, err
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        for line in session_processes(proc.pid):  # the workloads lead groups of their own
            try:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass


# -- the real browser ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium); README: serve")
def test_the_dashboard_in_a_headless_browser_and_nothing_left_behind(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install -e '.[dev]')")
    port = free_port()
    with serving(
        tmp_path,
        "--port",
        str(port),
        "-w",
        "sync_loss",
        "--device",
        "cpu",
        "--image-size",
        "16",
        "--sample-interval",
        "0.5",
    ) as (server, err):
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox"] if os.geteuid() == 0 else []
            )
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.route(re.compile(r".*/static/js/textual\.js$"), name_the_terminal)
            page.route(re.compile(rf"^(?!http://127\.0\.0\.1:{port}/).*"), lambda route: route.abort())  # no fonts
            page.goto(f"http://127.0.0.1:{port}/")

            def screen() -> str:
                return page.evaluate(SCREEN_JS)

            page.wait_for_function(f"() => ({SCREEN_JS})().trimStart().startsWith('gpudash')", timeout=60_000)
            header = screen().splitlines()[0]
            assert "sync_loss / sync-heavy" in header and "cpu" in header  # the options reached the dashboard
            wait_for("a throughput figure", lambda: THROUGHPUT.search(screen()), 300)
            running = session_processes(server.pid)
            assert any("gpudash run" in p for p in running) and any("spawn_main" in p for p in running), running
            page.focus("textarea.xterm-helper-textarea")  # the terminal's keyboard input
            page.keyboard.press("Space")  # pause, as in a terminal
            wait_for("the header to say paused", lambda: "paused" in screen().splitlines()[0], 60)
            browser.close()  # the tab goes: its dashboard quits and stops its workload
        assert isinstance(server.args, list)  # serving() starts it from a list of words
        alone = f"{server.pid} {' '.join(map(str, server.args))}"
        wait_for("the tab's dashboard and workload to stop", lambda: session_processes(server.pid) == [alone], 60)
        server.send_signal(signal.SIGINT)
        assert server.wait(30) == INTERRUPTED
    assert session_processes(server.pid) == []
    assert "Traceback" not in err.read_text()


def name_the_terminal(route) -> None:  # noqa: ANN001 - a Playwright Route
    """Serve textual-serve's script with its xterm Terminal kept as ``window.__terminal``."""
    response = route.fetch()
    script, found = TERMINAL_JS.subn(r"this.terminal=window.__terminal=new \1.Terminal(", response.text(), count=1)
    assert found, "textual-serve's textual.js no longer creates its terminal as this test expects"
    route.fulfill(response=response, body=script)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium); README: serve")
def test_stopping_the_server_with_a_tab_open_stops_its_dashboard(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install -e '.[dev]')")
    port = free_port()
    with serving(tmp_path, "--port", str(port), "-w", "sync_loss", "--device", "cpu", "--image-size", "16") as (
        server,
        err,
    ):
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox"] if os.geteuid() == 0 else []
            )
            page = browser.new_page()
            page.route(re.compile(rf"^(?!http://127\.0\.0\.1:{port}/).*"), lambda route: route.abort())
            page.goto(f"http://127.0.0.1:{port}/")
            wait_for("the tab's workload", lambda: any("spawn_main" in p for p in session_processes(server.pid)), 120)
            server.send_signal(signal.SIGTERM)
            assert server.wait(60) == INTERRUPTED
            browser.close()
    assert session_processes(server.pid) == []


# -- without a browser -----------------------------------------------------------------------------------
def open_tab(port: int) -> threading.Thread:
    """One tab as the page opens it: textual-serve's websocket, read (and dropped) until it closes."""
    import aiohttp  # textual-serve's own dependency

    async def tab() -> None:
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(f"http://127.0.0.1:{port}/ws?width=120&height=40") as ws:
                async for _ in ws:
                    pass

    thread = threading.Thread(target=asyncio.run, args=(tab(),), daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_a_sigkilled_server_leaves_no_dashboard_nor_workload(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cause 5: SIGKILL gives the server no chance to stop its tabs: each tab's dashboard sees it
    go, stops its workload and quits, within 5 s, leaving no temp file or dir of its run."""
    tmp = short_tmp
    monkeypatch.setenv("TMPDIR", str(tmp))
    port = free_port()
    with serving(
        tmp_path, "--port", str(port), "-w", "input_pipeline", "-v", "baseline", "--device", "cpu", "--image-size", "16"
    ) as (server, err):
        open_tab(port)
        wait_for(
            "the tab's workload and its 4 loader workers",
            lambda: sum("spawn_main" in p for p in session_processes(server.pid)) >= 5,
            180,
        )
        assert any("gpudash run" in p for p in session_processes(server.pid))
        server.kill()
        server.wait()
        deadline = time.monotonic() + DIE_WITH_SERVER_S
        while (left := session_processes(server.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left == []
    # the run's scratch dir and the workload's log: gone. Not looked at: the dashboard's crash log, which it
    # writes when a frame meets the broken pipe to the dead server before its watcher acts (a race)
    assert sorted(p.name for p in tmp.iterdir() if p.name.startswith("gpudash-") and "crash" not in p.name) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_server_with_exit_130(tmp_path: Path, sig: int) -> None:
    with serving(tmp_path, "--port", str(free_port())) as (server, err):
        server.send_signal(sig)
        assert server.wait(30) == INTERRUPTED
    assert "Traceback" not in err.read_text()


def test_a_host_name_that_is_not_one_is_one_line_and_exit_2(tmp_path: Path) -> None:
    host = "a" * 300  # a label over 63 characters: the idna codec refuses it
    r = subprocess.run(
        [sys.executable, "-m", "gpudash", "serve", "--host", host, "--port", str(free_port())],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith("gpudash: error: --host aaaa") and "label too long" in r.stderr, r.stderr


def test_another_address_than_localhost_is_a_warning(tmp_path: Path) -> None:
    port = free_port()
    with serving(tmp_path, "--host", "0.0.0.0", "--port", str(port)) as (server, err):
        text = err.read_text()
    assert text.startswith(
        f"gpudash: warning: serving on 0.0.0.0:{port}: anyone who can reach this port can run workloads on this machine"
    )
    assert f"{SERVING}http://{socket.gethostname()}:{port} " in text


def test_localhost_is_the_default_and_says_nothing_but_where(tmp_path: Path) -> None:
    port = free_port()
    with serving(tmp_path, "--port", str(port)) as (server, err):
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass
        text = err.read_text()
    assert text.splitlines()[0] == f"{SERVING}http://127.0.0.1:{port} (each tab runs its own workload; Ctrl-C stops)"
    assert "warning" not in text


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "gpudash", "serve", "--port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"gpudash: error: cannot listen on 127.0.0.1:{port}: Address already in use"]


def test_each_tab_runs_gpudash_run_with_the_serve_options() -> None:
    top, commands = build_parsers()
    given = vars(
        top.parse_args(
            [
                "serve",
                "--port",
                "9000",
                "-w",
                "augment",
                "-v",
                "gpu",
                "-b",
                "16",
                "--knob",
                "amp=bf16",
                "--knob",
                "channels_last",
                "--theme",
                "nord",
                "--sample-interval",
                "0.5",
            ]
        )
    )
    given.pop("command")
    argv = as_argv(commands["run"], given)
    assert "--port" not in " ".join(argv)  # the server's own options stay with the server
    command = dashboard_command(argv)
    assert command.startswith(f"exec {sys.executable} -m gpudash run ")
    again = vars(commands["run"].parse_args(argv))
    assert again == {k: v for k, v in given.items() if k != "port"}


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("127.0.0.2", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("gpu-box", False),
    ],
)
def test_which_addresses_are_this_machine_only(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_address_browsers_use() -> None:
    assert public_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert public_url("::1", 8000) == "http://[::1]:8000"
    assert public_url("0.0.0.0", 8080) == f"http://{socket.gethostname()}:8080"
