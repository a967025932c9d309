"""rcusim collect: build and run the native collector, validate and write the profile."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from calibration.profile import load_profile
from sim.errors import ConfigError, RcusimError

from ..common import ROOT

VERB = "collect"
SUMMARY = """measure this machine with the native collector (calibration/collector)
and write a validated JSON profile; --quick for a run under a minute"""

COLLECTOR_DIR = ROOT / "calibration" / "collector"
COLLECTOR = COLLECTOR_DIR / "rcusim-collector"
_START = re.compile(r"^\[(\d+)/(\d+)\] (\S+) \.\.\.$")
_END = re.compile(r"^\[(\d+)/(\d+)\] (\S+): (.*)$")


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("collect", help="measure this machine and write a profile", description=SUMMARY)
    c.add_argument("--quick", action="store_true", help="fewer samples: under a minute on a 2-CPU machine")
    c.add_argument("--out", metavar="FILE", help="profile to write (default: profile-HOST-DATE.json here)")
    c.add_argument("--items", metavar="A,B", help="only these items (see --list)")
    c.add_argument("--list", action="store_true", help="list the collector's items and exit")
    c.add_argument("--modify-system", action="store_true", help="(root) also run the items that change settings; all restored")
    c.add_argument("--max-samples", type=int, metavar="N", help="raw samples kept per item and series (default 2000)")
    c.add_argument("--collector", metavar="PATH", help="use this collector binary instead of building the bundled one")
    c.add_argument("--no-progress", action="store_true", help="print the collector's progress lines instead of a bar")
    c.set_defaults(fn=cmd_collect)


def build_collector() -> Path:
    """``make -C calibration/collector`` (a no-op when it is up to date)."""
    if not shutil.which("make") or not shutil.which("gcc"):
        if COLLECTOR.is_file():
            return COLLECTOR
        raise RcusimError("collect: building the collector needs make and gcc (apt-get install make gcc)")
    res = subprocess.run(["make", "-s", "-C", str(COLLECTOR_DIR)], capture_output=True, text=True)
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise RcusimError(f"collect: building the collector failed: {tail[0]}")
    return COLLECTOR


def _collector(args: argparse.Namespace) -> Path:
    if args.collector:
        p = Path(args.collector)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ConfigError("--collector", f"{p} is not an executable file", "give the path of rcusim-collector")
        return p
    return build_collector()


def _item_names(binary: Path) -> list[str]:
    res = subprocess.run([str(binary), "--list"], capture_output=True, text=True)
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def _default_out() -> Path:
    host = os.uname().nodename or "host"
    return Path(f"profile-{host}-{time.strftime('%Y%m%d-%H%M%S')}.json")


class _Display:
    """The collector's stderr progress lines as a rich progress bar (or plain lines)."""

    def __init__(self, enabled: bool) -> None:
        self.bar: Any = None
        self.task: Any = None
        self.enabled = enabled and sys.stderr.isatty()
        self.results: list[tuple[str, str]] = []

    def line(self, text: str) -> None:
        text = text.rstrip("\n")
        m_end = _END.match(text)
        m_start = _START.match(text)
        if not self.enabled:
            if m_end or not m_start:
                print(text, file=sys.stderr)
            if m_end:
                self.results.append((m_end.group(3), m_end.group(4)))
            return
        if self.bar is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("collect {task.description:<30}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=True,
            )
            self.bar.start()
        if m_start:
            k, n, name = int(m_start.group(1)), int(m_start.group(2)), m_start.group(3)
            if self.task is None:
                self.task = self.bar.add_task(name, total=n)
            self.bar.update(self.task, description=name, completed=max(0, k - 1))
        elif m_end:
            k, name, what = int(m_end.group(1)), m_end.group(3), m_end.group(4)
            self.results.append((name, what))
            if self.task is not None:
                self.bar.update(self.task, completed=k)
            if not what.startswith("ok"):
                self.bar.console.print(f"  {name}: {what}")
        elif not text.startswith("profile written"):
            self.bar.console.print(text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def cmd_collect(args: argparse.Namespace) -> int:
    binary = _collector(args)
    if args.list:
        res = subprocess.run([str(binary), "--list"], capture_output=True, text=True)
        sys.stdout.write(res.stdout)
        return res.returncode
    cmd = [str(binary)]
    if args.quick:
        cmd.append("--quick")
    if args.items:
        known = _item_names(binary)
        for name in args.items.split(","):
            if name not in known:
                import difflib

                close = difflib.get_close_matches(name, known, n=1)
                raise ConfigError(
                    "--items", f"unknown item {name!r}", f"did you mean {close[0]!r}?" if close else "see rcusim collect --list"
                )
        cmd += ["--items", args.items]
    if args.modify_system:
        cmd.append("--modify-system")
    if args.max_samples is not None:
        if args.max_samples < 0:
            raise ConfigError("--max-samples", f"{args.max_samples} is negative", "use a value >= 0")
        cmd += ["--max-samples", str(args.max_samples)]
    out = Path(args.out) if args.out else _default_out()
    if out.parent and not out.parent.exists():
        raise ConfigError("--out", f"directory {out.parent} does not exist", "create it or choose another path")
    with tempfile.TemporaryDirectory(prefix="rcusim-collect-") as tmp:
        raw = Path(tmp) / "profile.json"
        display = _Display(not args.no_progress)
        proc = subprocess.Popen([*cmd, "--out", str(raw)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                display.line(line)
            rc = proc.wait()
        except KeyboardInterrupt:
            # the collector restores what it changed and kills its children on SIGINT
            proc.send_signal(signal.SIGINT)
            proc.wait()
            raise
        finally:
            display.close()
        if rc != 0 or not raw.is_file():
            raise RcusimError(f"collect: the collector failed (exit status {rc}); see the messages above")
        profile = load_profile(raw)
        shutil.copyfile(raw, out)
    ok = [n for n, it in profile.items.items() if it.status == "ok"]
    others = [f"{n} ({it.status}: {it.reason})" for n, it in profile.items.items() if it.status != "ok"]
    print(f"profile written to {out}: {len(ok)} items measured in {profile.duration_s or 0:.1f} s")
    for o in others:
        print(f"  not measured: {o}")
    for w in profile.warnings:
        print(f"  warning: {w}")
    print(f"next: rcusim calibrate {out}")
    return 0
