"""rcusim collect: build and run the native collector, validate and write the profile."""

from __future__ import annotations

import argparse
import contextlib
import json
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

from calibration.fit import calibration_gaps
from calibration.profile import dumps, load_profile
from sim.errors import ConfigError, RcusimError

from ..common import ROOT, check_outputs

VERB = "collect"
SUMMARY = """measure this machine with the native collector (calibration/collector)
and write a validated JSON profile; --quick for a run under a minute"""

COLLECTOR_DIR = ROOT / "calibration" / "collector"
COLLECTOR = COLLECTOR_DIR / "rcusim-collector"
COLLECTOR_NAME = "rcusim-collector"
MAX_SAMPLES = 1_000_000
"""The collector's own limit on --max-samples (main.c)."""
_START = re.compile(r"^\[(\d+)/(\d+)\] (\S+) \.\.\.$")
_END = re.compile(r"^\[(\d+)/(\d+)\] (\S+): (.*)$")


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("collect", help="measure this machine and write a profile", description=SUMMARY)
    c.add_argument("--quick", action="store_true", help="fewer samples: under a minute on a 2-CPU machine")
    c.add_argument("--out", metavar="FILE", help="profile to write (default: profile-HOST-DATE.json here)")
    c.add_argument("--items", metavar="A,B", help="only these items (see --list)")
    c.add_argument("--list", action="store_true", help="list the collector's items and exit")
    c.add_argument("--modify-system", action="store_true", help="(root) also run the items that change settings; all restored")
    c.add_argument(
        "--max-samples",
        type=int,
        metavar="N",
        help="raw samples kept per item and series (default 2000; at least 1: calibrate reads the stored samples)",
    )
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
        _check_collector(p)
        return p
    return build_collector()


def _check_collector(binary: Path) -> None:
    """Refuse a binary that is not the rcusim collector (``BINARY --version`` must print
    ``rcusim-collector VERSION``): anything else would only fail later, and misleadingly."""
    fix = f"give the path of {COLLECTOR_NAME}, built in calibration/collector, or leave --collector out to build it"
    try:
        res = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL, timeout=30
        )
    except subprocess.TimeoutExpired:
        raise ConfigError("--collector", f"{binary} is not the rcusim collector ('--version' did not return)", fix) from None
    except OSError as exc:
        raise ConfigError("--collector", f"{binary} cannot be run: {exc.strerror or exc}", fix) from None
    words = res.stdout.split()
    if res.returncode != 0 or len(words) != 2 or words[0] != COLLECTOR_NAME:
        first = res.stdout.strip().splitlines()[:1]
        said = repr(first[0][:60]) if first else "nothing"
        raise ConfigError(
            "--collector",
            f"{binary} is not the rcusim collector ('{binary.name} --version' printed {said}, exit status {res.returncode})",
            fix,
        )


def _item_names(binary: Path) -> list[str]:
    res = subprocess.run([str(binary), "--list"], capture_output=True, text=True)
    return [line.split()[0] for line in res.stdout.splitlines() if line.strip()]


def _parse_items(text: str) -> list[str]:
    """The names of ``--items a,b`` (spaces around a name dropped); empty lists and empty names refused."""
    names = [n.strip() for n in text.split(",")]
    if not any(names):
        raise ConfigError(
            "--items",
            "is empty",
            "give item names separated by commas, e.g. --items syscall,pipe_costs (rcusim collect --list names them all), "
            "or leave --items out to run every item",
        )
    if not all(names):
        raise ConfigError(
            "--items", f"{text!r} has an empty item name", "separate the names with single commas, e.g. syscall,pipe_costs"
        )
    return list(dict.fromkeys(names))


def _check_out(path: str | Path) -> None:
    """Refuse, before the measurement, an --out the profile could not be written to
    (:func:`app.common.check_outputs`: empty, a directory, in a directory that does not exist or
    is a file, one the OS refuses), or that is no regular file (a device, a FIFO)."""
    out = Path(path)
    if out.exists() and not out.is_dir() and not out.is_file():
        raise ConfigError("--out", f"{out} is not a regular file", "give the name of a JSON file to write")
    check_outputs([("--out", path)])


def _with_out(text: str, out: Path) -> str:
    """The collector's profile with ``options.out`` set to where it is written (the collector
    only saw the temporary file)."""
    raw = json.loads(text)
    opts = raw.get("options")
    if not isinstance(opts, dict):
        return text
    opts["out"] = str(out)
    return dumps(raw)


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
            if (m_end or not m_start) and not text.startswith("profile written"):
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
    if args.list:
        binary = _collector(args)
        res = subprocess.run([str(binary), "--list"], capture_output=True, text=True)
        sys.stdout.write(res.stdout)
        return res.returncode
    # every check that needs no measurement comes first: a full collection takes 15 minutes
    names = _parse_items(args.items) if args.items is not None else None
    if args.max_samples is not None and not 1 <= args.max_samples <= MAX_SAMPLES:
        raise ConfigError(
            "--max-samples",
            f"{args.max_samples} is {'below 1' if args.max_samples < 1 else f'above {MAX_SAMPLES:,}'}",
            "give 1 to 1000000, default 2000: rcusim calibrate reads the stored samples of every item",
        )
    given = args.out if args.out is not None else _default_out()
    _check_out(given)
    out = Path(given)
    binary = _collector(args)
    cmd = [str(binary)]
    if args.quick:
        cmd.append("--quick")
    if names is not None:
        known = _item_names(binary)
        for name in names:
            if name not in known:
                import difflib

                close = difflib.get_close_matches(name, known, n=1)
                raise ConfigError(
                    "--items", f"unknown item {name!r}", f"did you mean {close[0]!r}?" if close else "see rcusim collect --list"
                )
        cmd += ["--items", ",".join(names)]
    if args.modify_system:
        cmd.append("--modify-system")
    if args.max_samples is not None:
        cmd += ["--max-samples", str(args.max_samples)]
    tmp = Path(tempfile.mkdtemp(prefix="rcusim-collect-"))
    keep = False  # the measured profile outlives a failure to write --out
    try:
        raw = tmp / "profile.json"
        display = _Display(not args.no_progress)
        proc = subprocess.Popen([*cmd, "--out", str(raw)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                display.line(line)
            rc = proc.wait()
        except BaseException:
            # the collector restores what it changed and kills its children on SIGINT (also when
            # the display fails: it must not run on unattended)
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait()
            raise
        finally:
            display.close()
        if rc != 0 or not raw.is_file():
            raise RcusimError(f"collect: the collector failed (exit status {rc}); see the messages above")
        try:
            profile = load_profile(raw)
        except ConfigError as exc:
            keep = True
            raise ConfigError(
                exc.field, exc.problem, f"{exc.fix}; the collector's output is kept in {raw}".lstrip("; ")
            ) from None
        text = _with_out(raw.read_text(encoding="utf-8"), out)
        opened = False
        try:
            with open(out, "w", encoding="utf-8") as f:
                opened = True
                f.write(text)
        except OSError as exc:
            keep = True
            if opened:  # no truncated profile under the name asked for
                with contextlib.suppress(OSError):
                    out.unlink()
            raise ConfigError(
                "--out",
                f"cannot write {out}: {exc.strerror or exc}",
                f"the measured profile is kept in {raw}: copy it from there",
            ) from None
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    ok = [n for n, it in profile.items.items() if it.status == "ok"]
    others = [f"{n} ({it.status}: {it.reason})" for n, it in profile.items.items() if it.status != "ok"]
    print(f"profile written to {out}: {len(ok)} items measured in {profile.duration_s or 0:.1f} s")
    for o in others:
        print(f"  not measured: {o}")
    for w in profile.warnings:
        print(f"  warning: {w}")
    missing, unusable = calibration_gaps(profile)
    if not missing and not unusable:
        print(f"next: rcusim calibrate {out}")
        return 0
    # a partial collection: say what calibrate still needs instead of a next step that fails
    parts = []
    if missing:
        want = ",".join(dict.fromkeys([*profile.items, *missing]))
        parts.append(
            f"it also needs {', '.join(missing)}: collect them with rcusim collect --items {want} (or a full rcusim collect)"
        )
    if unusable:
        parts.append(f"{', '.join(unusable)} could not be measured (see above): collect them where they can run")
    print(f"not ready for rcusim calibrate: {'; '.join(parts)}")
    return 0
