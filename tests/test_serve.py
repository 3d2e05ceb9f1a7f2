"""``gpudash serve``: the dashboard in a real headless browser (Debian's chromium driven by
Playwright), the localhost default and its warning, and no process left behind."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpudash.cli import as_argv, build_parsers
from gpudash.serve import dashboard_command, is_loopback, public_url

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_processes(sid: int) -> list[str]:
    """The live processes of session ``sid`` (the server started its own), as "pid command"."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
            command = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()  # state ppid pgrp session ...
        if int(fields[3]) == sid and fields[0] not in (b"Z", b"X"):
            found.append(f"{name} {command.strip()}")
    return found


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
        proc = subprocess.Popen([sys.executable, "-m", "gpudash", "serve", *args], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=errfile, start_new_session=True)
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
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# -- the real browser ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium); README: serve")
def test_the_dashboard_in_a_headless_browser_and_nothing_left_behind(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (pip install -e '.[dev]')")
    port = free_port()
    with serving(tmp_path, "--port", str(port), "-w", "sync_loss", "--device", "cpu", "--image-size", "16",
                 "--sample-interval", "0.5") as (server, err):
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                                 args=["--no-sandbox"] if os.geteuid() == 0 else [])
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
        wait_for("the tab's dashboard and workload to stop",
                 lambda: session_processes(server.pid) == [f"{server.pid} {' '.join(server.args)}"], 60)
        server.send_signal(signal.SIGINT)
        assert server.wait(30) == 0
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
            server, err):
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                                 args=["--no-sandbox"] if os.geteuid() == 0 else [])
            page = browser.new_page()
            page.route(re.compile(rf"^(?!http://127\.0\.0\.1:{port}/).*"), lambda route: route.abort())
            page.goto(f"http://127.0.0.1:{port}/")
            wait_for("the tab's workload", lambda: any("spawn_main" in p for p in session_processes(server.pid)), 120)
            server.send_signal(signal.SIGTERM)
            assert server.wait(60) == 0
            browser.close()
    assert session_processes(server.pid) == []


# -- without a browser -----------------------------------------------------------------------------------
def test_another_address_than_localhost_is_a_warning(tmp_path: Path) -> None:
    port = free_port()
    with serving(tmp_path, "--host", "0.0.0.0", "--port", str(port)) as (server, err):
        text = err.read_text()
    assert text.startswith(f"gpudash: warning: serving on 0.0.0.0:{port}: anyone who can reach this port can run "
                           "workloads on this machine")
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
        r = subprocess.run([sys.executable, "-m", "gpudash", "serve", "--port", str(port)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"gpudash: error: cannot listen on 127.0.0.1:{port}: Address already in use"]


def test_each_tab_runs_gpudash_run_with_the_serve_options() -> None:
    top, commands = build_parsers()
    given = vars(top.parse_args(["serve", "--port", "9000", "-w", "augment", "-v", "gpu", "-b", "16",
                                 "--knob", "amp=bf16", "--knob", "channels_last", "--theme", "nord",
                                 "--sample-interval", "0.5"]))
    given.pop("command")
    argv = as_argv(commands["run"], given)
    assert "--port" not in " ".join(argv)  # the server's own options stay with the server
    command = dashboard_command(argv)
    assert command.startswith(f"exec {sys.executable} -m gpudash run ")
    again = vars(commands["run"].parse_args(argv))
    assert again == {k: v for k, v in given.items() if k != "port"}


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                                ("127.0.0.2", True), ("0.0.0.0", False), ("::", False),
                                                ("192.168.1.5", False), ("gpu-box", False)])
def test_which_addresses_are_this_machine_only(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_address_browsers_use() -> None:
    assert public_url("127.0.0.1", 8000) == "http://127.0.0.1:8000"
    assert public_url("::1", 8000) == "http://[::1]:8000"
    assert public_url("0.0.0.0", 8080) == f"http://{socket.gethostname()}:8080"
