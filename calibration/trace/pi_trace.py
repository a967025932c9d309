"""How the PI-futex convoys of a machine and of the model wake their sleepers.

For every wakeup of a contending thread that had gone to sleep: how long after its sleep the
wakeup came (its *age*: which stage of going idle its CPU had reached) and how long from the
wakeup until it ran. On the machine from a scheduler trace (``perf record -e
sched:sched_switch -e sched:sched_waking`` around ``pi_loop``, the collector's PI-futex loop;
root and perf needed), in the model from the same loop simulated on a calibrated profile (the
``pi_futex`` workload, the machine's switch hook). docs/notes/bundled-profile.md has the figures of the
development machine: its convoys and the model's wake their sleepers 14-27 us after they slept.

    python -m calibration.trace.pi_trace [--seconds S] [--threads N]            # this machine
    python -m calibration.trace.pi_trace --model PROFILE [--params PARAMS] [...]  # the model
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
AGE_EDGES_US = (0, 1, 2, 5, 8, 10, 20, 50)
_LINE = re.compile(r"\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)")
_SWITCH = re.compile(r"prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+)")
_WAKING = re.compile(r"\bpid=(\d+)")


def sched_events(lines: Iterable[str], tids: set[int]) -> list[tuple[int, str, int, int]]:
    """(time, "sleep" | "wake" | "run", thread, waker) of the threads ``tids``, in trace order,
    from ``perf script --ns -F tid,cpu,time,event,trace`` lines of sched_switch and sched_waking:
    a sleep is a switch away in state S (or D), a run a switch to the thread, a wake a
    sched_waking of it (its waker is the thread the event fired in, whoever that is)."""
    out: list[tuple[int, str, int, int]] = []
    for line in lines:
        m = _LINE.match(line)
        if m is None:
            continue
        t, who, event, rest = round(float(m[3]) * 1e9), int(m[1]), m[4], m[5]
        if event == "sched_switch":
            s = _SWITCH.search(rest)
            if s is None:
                continue
            if int(s[1]) in tids and s[2][:1] in ("S", "D"):
                out.append((t, "sleep", int(s[1]), -1))
            if int(s[3]) in tids:
                out.append((t, "run", int(s[3]), -1))
        elif event == "sched_waking":
            w = _WAKING.search(rest)
            if w is not None and int(w[1]) in tids:
                out.append((t, "wake", int(w[1]), who))
    return out


def ages(events: Iterable[tuple[int, str, int, int]]) -> list[tuple[int, int, int]]:
    """(wakeup time, age, wake-to-run) in ns for every wakeup of a thread that had slept
    (``events`` as :func:`sched_events` gives them, each thread's in time order): the wakeup is
    the first wake after the sleep, the run the next run of the thread."""
    slept: dict[int, int] = {}
    woken: dict[int, int] = {}
    out: list[tuple[int, int, int]] = []
    for t, kind, tid, _ in events:
        if kind == "sleep":
            slept[tid] = t
            woken.pop(tid, None)
        elif kind == "run":
            if tid in woken and tid in slept:
                tw = woken.pop(tid)
                out.append((tw, tw - slept.pop(tid), t - tw))
        elif tid in slept and tid not in woken:
            woken[tid] = t
    return out


def wake_ages(lines: Iterable[str], tids: set[int]) -> list[tuple[int, int, int]]:
    """:func:`ages` of the threads ``tids`` in ``perf script`` lines (see :func:`sched_events`)."""
    return ages(sched_events(lines, tids))


def handoff_races(events: Iterable[tuple[int, str, int, int]], wakers: set[int]) -> list[tuple[int, int, bool]]:
    """For every wakeup of a sleeping thread B by a thread A (``events``: (time, "sleep" | "wake"
    | "run", thread, waker) in time order, ``waker`` only for "wake"): A's time from the wakeup
    to its own next sleep, B's time from the wakeup to running, and whether B ran first. B
    running first ends a convoy (A, back at the lock, finds a running owner and spins); A asleep
    first keeps it going (the next handoff wakes A). Only wakeups made by one of ``wakers`` (the
    contending threads) count."""
    pending: dict[int, tuple[int, int]] = {}  # wakee -> (wake time, waker)
    asleep_at: dict[int, int] = {}  # waker -> its first sleep after a wakeup it made
    out: list[tuple[int, int, bool]] = []
    for t, kind, tid, waker in sorted(events):
        if kind == "wake":
            if waker in wakers:
                pending.setdefault(tid, (t, waker))  # the first waking counts (as in ages)
        elif kind == "sleep":
            for _wakee, (tw, w) in pending.items():
                if w == tid and tid not in asleep_at and t >= tw:
                    asleep_at[tid] = t
        elif kind == "run" and tid in pending:
            tw, w = pending.pop(tid)
            back = asleep_at.pop(w, None)
            if back is not None and back >= tw:
                out.append((back - tw, t - tw, False))
            else:
                out.append((t - tw, t - tw, True))
    return out


CONVOY_GAP = 100_000
"""ns: wakeups closer than this belong to one convoy (a convoy's handoffs are 20-30 us apart)."""


def convoys(wake_times: Iterable[int]) -> list[int]:
    """The lengths (wakeups) of the runs of wakeups each within :data:`CONVOY_GAP` of the last."""
    out: list[int] = []
    last = None
    for t in sorted(wake_times):
        if last is None or t - last > CONVOY_GAP:
            out.append(0)
        out[-1] += 1
        last = t
    return out


def report(rows: list[tuple[int, int, int]], seconds: float, title: str, races: list[tuple[int, int, bool]] | None = None) -> str:
    """A table of the wakeups by age, the percentiles, the convoys they form, and the race
    between each waker going back to sleep and its wakee running."""
    if not rows:
        return f"{title}: no wakeup of a sleeping thread"
    a = np.asarray([(age, run) for _, age, run in rows], dtype=float) / 1e3
    lines = [f"{title}: {len(a)} wakeups of a sleeping thread ({len(a) / seconds:.0f}/s)"]
    edges = [*AGE_EDGES_US, float("inf")]
    for lo, hi in zip(edges, edges[1:], strict=False):
        sel = a[(a[:, 0] >= lo) & (a[:, 0] < hi)]
        if len(sel):
            hi_s = "" if hi == float("inf") else f"{hi:g}"
            lines.append(
                f"  woken {lo:>3g}-{hi_s:<3s} us after the sleep: {len(sel):6d} ({100 * len(sel) / len(a):5.1f} %), "
                f"to run: median {np.median(sel[:, 1]):6.1f} us"
            )
    p = [5, 25, 50, 75, 95]
    lines.append("  age (us) p5/25/50/75/95: " + " / ".join(f"{v:.1f}" for v in np.percentile(a[:, 0], p)))
    lines.append("  wake to run (us) p5/25/50/75/95: " + " / ".join(f"{v:.1f}" for v in np.percentile(a[:, 1], p)))
    c = np.asarray(convoys(t for t, _, _ in rows))
    lines.append(
        f"  convoys (wakeups less than {CONVOY_GAP // 1000} us apart): {len(c) / seconds:.0f}/s, "
        f"{100 * float(np.mean(c == 1)):.0f} % of one wakeup, length p50/p90/max {np.median(c):.0f} / "
        f"{np.percentile(c, 90):.0f} / {c.max()}"
    )
    if races:
        back = np.asarray([b for b, _, first in races if not first], dtype=float) / 1e3
        broke = sum(1 for _, _, first in races if first)
        lines.append(
            f"  handoff races: the wakee ran first in {broke} of {len(races)} ({100 * broke / len(races):.1f} %); "
            "otherwise the waker slept again after p5/50/95 "
            + (" / ".join(f"{v:.1f}" for v in np.percentile(back, [5, 50, 95])) if back.size else "-")
            + " us"
        )
    return "\n".join(lines)


def machine(seconds: float, threads: int) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, bool]], str]:
    """Build and run ``pi_loop`` under ``perf record`` and read its threads' wakeups."""
    for tool in ("gcc", "perf"):
        if shutil.which(tool) is None:
            raise SystemExit(f"pi_trace: {tool} not found (apt-get install {'gcc' if tool == 'gcc' else 'linux-perf'})")
    with tempfile.TemporaryDirectory() as d:
        exe, data = Path(d) / "pi_loop", Path(d) / "perf.data"
        cc = ["gcc", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", "-o", str(exe)]
        subprocess.run([*cc, str(HERE / "pi_loop.c"), "-lpthread"], check=True)
        rec = ["perf", "record", "-q", "-e", "sched:sched_switch", "-e", "sched:sched_waking", "-a", "-o", str(data)]
        run = subprocess.run([*rec, "--", str(exe), str(seconds), str(threads)], capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"pi_trace: perf record failed (root needed): {run.stderr.strip()[-300:]}")
        tids = {int(x) for x in re.search(r"tids ((?:\d+ ?)+)", run.stdout)[1].split()}  # type: ignore[index]
        rate = re.search(r"rate (\d+)", run.stdout)
        script = subprocess.run(
            ["perf", "script", "--ns", "-i", str(data), "-F", "tid,cpu,time,event,trace"], capture_output=True, text=True
        )
        events = sched_events(script.stdout.splitlines(), tids)
        rows, races = ages(events), handoff_races(events, tids)
    return rows, races, f"machine, {threads} threads, {rate[1] if rate else '?'} ops/s"


def model(
    profile_path: str, params_path: str | None, seconds: float, threads: int, seed: int, other_gaps: bool = False
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, bool]], str]:
    """The same loop on the model: the validation's PI-futex scenario of ``profile_path``; with
    ``other_gaps`` the profile's ``irq_cost.other_gaps`` as ``rcusim calibrate --other-gaps``
    would copy them."""
    from app.common import catalog
    from calibration import composites
    from calibration.params import apply_params, load_params, sibling_params
    from calibration.profile import load_profile
    from sim import scenario as sc
    from sim.machine import T_BLOCKED

    profile = load_profile(profile_path)
    params = load_params(params_path or sibling_params(profile_path))
    if other_gaps:
        from dataclasses import replace

        from calibration.fit import gap_table

        g = gap_table(profile, [], apply=True)
        params = replace(params, costs={**params.costs, "other_gaps": list(g.gaps), "other_gaps_per_s": g.per_s})
    item = profile.items.get("pi_futex_handoff")
    cs = int(round(float(item.params.get("critical_section_ns", 0)))) if item is not None else 0
    data = apply_params(composites.pi_futex_scenario(profile, "pi-trace", threads, cs, int(seconds * 1e9)), params)
    cat = catalog()
    m, wl = sc.build(sc.validate(data, cat), cat, seed=seed)
    asleep: set[int] = set()
    events: list[tuple[int, str, int, int]] = []
    workers: list[int] = []

    def hook(cpu, prev, nxt) -> None:  # type: ignore[no-untyped-def]
        now = cpu.env._now
        if prev is not None and prev.name.startswith("pi-") and prev.state == T_BLOCKED:
            asleep.add(prev.tid)
            events.append((now, "sleep", prev.tid, -1))
        if nxt is not None and nxt.name.startswith("pi-"):
            if nxt.tid not in workers:
                workers.append(nxt.tid)
            if nxt.tid in asleep:
                asleep.discard(nxt.tid)
                # the wakeup, when the task became runnable; its waker only with two threads (the
                # other one: the hook does not see who woke it)
                other = [w for w in workers if w != nxt.tid]
                events.append((nxt.wait_since, "wake", nxt.tid, other[0] if threads == 2 and other else -1))
            events.append((now, "run", nxt.tid, -1))

    m.switch_hooks.append(hook)
    m.env.run(until=m.done)
    gaps = ", other_gaps" if other_gaps else ""
    return (
        ages(events),
        handoff_races(events, set(workers)),
        f"model ({Path(profile_path).name}{gaps}, seed {seed}), {threads} threads, {wl.ops / seconds:.0f} ops/s",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", metavar="PROFILE", help="simulate on this profile instead of tracing the machine")
    ap.add_argument("--params", metavar="PARAMS", help="its calibrated params (default PROFILE-params.toml)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--other-gaps", action="store_true", help="the model with the profile's irq_cost.other_gaps")
    a = ap.parse_args(argv)
    if a.seconds <= 0 or not 2 <= a.threads <= 16:
        ap.error("--seconds must be > 0 and --threads 2..16")
    if a.model:
        rows, races, title = model(a.model, a.params, a.seconds, a.threads, a.seed, a.other_gaps)
    else:
        rows, races, title = machine(a.seconds, a.threads)
    print(report(rows, a.seconds, title, races if a.threads == 2 else None))  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
