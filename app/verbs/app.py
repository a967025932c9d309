"""rcusim app: start the Streamlit what-if explorer."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

from sim.errors import ConfigError

VERB = "app"
SUMMARY = """start the what-if explorer in a browser (Streamlit): the seed stories,
a workload lab and A/B mode; headless, no usage statistics"""

MAIN = Path(__file__).resolve().parents[1] / "explorer" / "main.py"


def register(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser(
        "app",
        help="start the what-if explorer (Streamlit)",
        description="Start the what-if explorer: streamlit run on app/explorer/main.py, headless and without telemetry.",
    )
    a.add_argument("--port", type=int, default=8501, help="port to listen on (default 8501)")
    a.add_argument("--address", default="localhost", help="address to listen on (default localhost; 0.0.0.0 for every interface)")
    a.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    a.set_defaults(fn=cmd_app)


def command(port: int, address: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(MAIN),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
    ]


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["STREAMLIT_BROWSER_GATHER_USAGE_STATS"] = "false"
    return env


def cmd_app(args: argparse.Namespace) -> int:
    if not 1 <= args.port <= 65535:
        raise ConfigError("--port", f"{args.port} is not a port number", "use 1..65535, e.g. --port 8501")
    try:  # Streamlit would fail on it with a page of traceback after starting
        socket.getaddrinfo(args.address, args.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise ConfigError(
            "--address",
            f"{args.address!r} does not resolve to an address",
            "use localhost, 0.0.0.0 or one of this machine's IP addresses",
        ) from None
    cmd = command(args.port, args.address)
    if args.dry_run:
        print(shlex.join(cmd))
        return 0
    if importlib.util.find_spec("streamlit") is None:
        raise ConfigError("streamlit", "is not installed", "install the app extra: pip install -e '.[app]' (make install does)")
    print(f"rcusim explorer: http://{args.address}:{args.port}  (Ctrl-C stops it)", file=sys.stderr)
    try:
        return subprocess.call(cmd, env=environment())
    except KeyboardInterrupt:
        return 0
