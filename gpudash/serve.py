"""``gpudash serve``: the dashboard in a browser, through ``textual-serve``.

Each browser tab that opens the page gets its own ``gpudash run`` process (Textual's web
driver speaking to the page over a websocket), and with it its own workload process; closing
the tab, or stopping the server with Ctrl-C, quits that dashboard, which stops its workload.
The server listens on 127.0.0.1 unless told otherwise: whoever reaches the port can start
workloads on this machine, so another address is a warning (an ssh tunnel is the safe way in).
Neither torch nor Textual is imported here (textual-serve itself imports no Textual).
"""

from __future__ import annotations

import asyncio
import ipaddress
import shlex
import socket
import sys
from typing import Any

from gpudash.argtypes import UsageError
from gpudash.protocol import ExitCode

WILDCARDS = ("0.0.0.0", "::", "")
STOP_TABS_S = 30.0  # on Ctrl-C, how long the open tabs' dashboards get to stop their workloads


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
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: {exc.strerror or exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def dashboard_command(run_argv: list[str]) -> str:
    """The shell command textual-serve starts for each browser tab (exec: no shell stays between)."""
    return "exec " + shlex.join([sys.executable, "-m", "gpudash", "run", *run_argv])


def serve(host: str, port: int, url: str | None, run_argv: list[str]) -> int:
    """Serve ``gpudash run RUN_ARGV`` on ``host:port`` until Ctrl-C or SIGTERM; the exit status."""
    try:
        check_port_free(host, port)
    except UsageError as exc:
        print(f"gpudash: error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    if not is_loopback(host):
        print(f"gpudash: warning: serving on {host}:{port}: anyone who can reach this port can run workloads "
              f"on this machine; prefer the default 127.0.0.1 and 'ssh -L {port}:127.0.0.1:{port} HOST'",
              file=sys.stderr, flush=True)
    from textual_serve.server import Server

    class DashboardServer(Server):
        """textual-serve's server, announcing itself in one line instead of its banner, and
        stopping every open tab's dashboard (and so its workload) before it exits: left to
        itself it would leave them running, cut off from their stdin."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.tabs: set[asyncio.Task[Any]] = set()  # the websocket handlers: one per open tab

        async def on_startup(self, app: Any) -> None:
            print(f"gpudash: serving the dashboard on {self.public_url} (each tab runs its own workload; "
                  "Ctrl-C stops)", file=sys.stderr, flush=True)

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

    server = DashboardServer(dashboard_command(run_argv), host=host, port=port, title="gpudash",
                             public_url=url or public_url(host, port))
    server.serve()
    return ExitCode.OK
