"""``gpudash serve``: the dashboard in a browser, through ``textual-serve``.

Each browser tab that opens the page gets its own ``gpudash run`` process (Textual's web
driver speaking to the page over a websocket), and with it its own workload process; closing
the tab, or stopping the server with Ctrl-C, quits that dashboard, which stops its workload.
When the server dies without that chance (SIGKILL), each tab's dashboard sees it go and quits
too, stopping its workload (``end_with_server``: the server passes its pid in ``SERVER_ENV``).
The server exits 130 (``ExitCode.INTERRUPTED``) once stopped by SIGINT or SIGTERM.
The server listens on 127.0.0.1 unless told otherwise: whoever reaches the port can start
workloads on this machine, so another address is a warning (an ssh tunnel is the safe way in).
Neither torch nor Textual is imported here (textual-serve itself imports no Textual).
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import shlex
import socket
import sys
import threading
from typing import Any, NoReturn

from gpudash.arguments.argparse_adapter import parser_actions
from gpudash.arguments.argtypes import UsageError
from gpudash.core.protocol import ExitCode

WILDCARDS = ("0.0.0.0", "::", "")
STOP_TABS_S = 30.0  # on Ctrl-C, how long the open tabs' dashboards get to stop their workloads
SERVER_ENV = "GPUDASH_SERVE_PID"  # the server's pid, for its tabs' dashboards (end_with_server)
SERVER_GONE_EXIT_S = 3.0  # a tab whose server died: how long stopping its workload may take before it exits anyway
HOST_SHOWN = 60  # characters of a bad --host repeated in its error line


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost
        return False


def public_url(host: str, port: int) -> str:
    """The address a browser uses: the host, or this machine's name when bound to every address."""
    name = socket.gethostname() if host in WILDCARDS else host.strip("[]")
    if ":" in name:  # an IPv6 literal
        name = f"[{name}]"
    return f"http://{name}:{port}"


def check_port_free(host: str, port: int) -> None:
    """Raise UsageError when nothing can listen on ``host:port`` (taken, or not an address here)."""
    shown = host if len(host) <= HOST_SHOWN else host[: HOST_SHOWN - 1] + "…"
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {shown}: {exc.strerror or exc}") from None
    except ValueError as exc:  # UnicodeError from the idna codec (a label over 63 characters), a NUL
        raise UsageError(f"--host {shown}: not a host name ({exc})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def dashboard_command(run_argv: list[str], command: str = "run") -> str:
    """The shell command textual-serve starts for each browser tab (exec: no shell stays between):
    ``gpudash run`` (or ``watch``) with the server's own options; a browser names nothing."""
    return "exec " + shlex.join([sys.executable, "-m", "gpudash", command, *run_argv])


def as_argv(parser: argparse.ArgumentParser, given: dict[str, Any]) -> list[str]:
    """The options of ``given`` that ``parser`` reads, written back as its flags
    (``--knob=amp=bf16``): how ``serve`` starts ``gpudash run`` with the options it was given."""
    argv: list[str] = []
    for action in parser_actions(parser):
        if action.dest not in given or not action.option_strings:
            continue
        flag, value = action.option_strings[-1], given[action.dest]
        if action.nargs == 0:  # store_true
            argv.append(flag)
            continue
        for item in value if isinstance(value, list) else [value]:
            argv.append(f"{flag}={'='.join(item) if isinstance(item, tuple) else item}")
    return argv


def end_with_server() -> None:
    """In a tab's ``gpudash run`` (``SERVER_ENV`` set): stop the workload and exit 130 as soon as
    the server is gone, even SIGKILLed (``gpudash.core.parent_watch``). A no-op otherwise. The
    variable is removed here, so the workload and anything it starts do not inherit it."""
    value = os.environ.pop(SERVER_ENV, None)
    if value is None:
        return
    from gpudash.core import parent_watch

    try:
        server = int(value)
    except ValueError:
        print(f"gpudash: warning: {SERVER_ENV}={value!r} is not a pid: not watching the server", file=sys.stderr)
        return
    if os.getppid() != server and _alive(server):  # set by hand, not by a server that started this process
        print(f"gpudash: warning: {SERVER_ENV}={server} is not this process's parent: not watching it", file=sys.stderr)
        return
    parent_watch.on_parent_exit(server, _server_gone, name="gpudash-serve-watch")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _server_gone() -> NoReturn:
    """The server died: stop the workloads at once (terminate), then exit, in at most
    ``SERVER_GONE_EXIT_S`` (the workload's own watcher ends it once this process is gone).

    First stdout and stderr (pipes to the dead server: nobody reads them) go to /dev/null, so the
    dashboard's next frame does not fail meanwhile with a broken pipe (a "crash" of its own)."""
    from gpudash.host import live_runners

    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    deadline = threading.Timer(SERVER_GONE_EXIT_S, os._exit, (ExitCode.INTERRUPTED,))
    deadline.daemon = True
    deadline.start()
    live_runners.stop_all(timeout=0)
    os._exit(ExitCode.INTERRUPTED)


def serve(host: str, port: int, url: str | None, run_argv: list[str], command: str = "run") -> int:
    """Serve ``gpudash run RUN_ARGV`` (``command`` "watch": ``gpudash watch``) on ``host:port``
    until Ctrl-C or SIGTERM; the exit status (130 after those, 2 when it cannot listen)."""
    try:
        check_port_free(host, port)
    except UsageError as exc:
        print(f"gpudash: error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if not is_loopback(host):
        can = "see this machine's GPUs and their processes" if command == "watch" else "run workloads on this machine"
        print(
            f"gpudash: warning: serving on {host}:{port}: anyone who can reach this port can {can}; "
            f"prefer the default 127.0.0.1 and 'ssh -L {port}:127.0.0.1:{port} HOST'",
            file=sys.stderr,
            flush=True,
        )
    DashboardServer = dashboard_server_class()
    os.environ[SERVER_ENV] = str(os.getpid())  # each tab's environment is a copy of this one
    server = DashboardServer(
        dashboard_command(run_argv, command),
        host=host,
        port=port,
        title="gpudash",
        public_url=url or public_url(host, port),
    )
    if command == "watch":
        server.each_tab = "runs gpudash watch"
    server.serve()
    return ExitCode.INTERRUPTED if server.interrupted else ExitCode.OK


def dashboard_server_class() -> type[Any]:
    """textual-serve's ``Server`` (imported here: only ``serve`` needs it), made gpudash's."""
    from textual_serve.server import Server

    class DashboardServer(Server):
        """textual-serve's server, announcing itself in one line instead of its banner, and
        stopping every open tab's dashboard (and so its workload) before it exits: left to
        itself it would leave them running, cut off from their stdin."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.tabs: set[asyncio.Task[Any]] = set()  # the websocket handlers: one per open tab
            self.interrupted = False  # SIGINT or SIGTERM came
            self.each_tab = "runs its own workload"  # what the start-up line says of a tab

        def request_exit(self) -> None:
            """textual-serve's handler of SIGINT and SIGTERM."""
            self.interrupted = True
            super().request_exit()

        async def on_startup(self, app: Any) -> None:
            print(
                f"gpudash: serving the dashboard on {self.public_url} (each tab {self.each_tab}; Ctrl-C stops)",
                file=sys.stderr,
                flush=True,
            )

        async def handle_websocket(self, request: Any) -> Any:
            tab = asyncio.current_task()
            assert tab is not None
            self.tabs.add(tab)
            try:
                return await super().handle_websocket(request)
            finally:
                self.tabs.discard(tab)

        async def on_shutdown(self, app: Any) -> None:
            """Cancel each tab's handler: textual-serve then asks its dashboard to quit and waits for it."""
            tabs = list(self.tabs)
            for tab in tabs:
                tab.cancel()
            if tabs:
                await asyncio.wait(tabs, timeout=STOP_TABS_S)

    return DashboardServer
