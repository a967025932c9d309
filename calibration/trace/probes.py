"""Side probes of this machine that no collector item runs yet, and the model beside them.

Two small C programs, built here with the system's C compiler, each printing one ``key=value``
line per run (docs/notes/bundled-profile.md has the development machine's figures and what follows
from them):

- ``ring`` (``ring.c``): N members pinned to one CPU pass a byte round a ring of pipes, threads
  or processes, SCHED_OTHER or SCHED_BATCH (whose wakeups never preempt); ns per hop and
  context switches per hop. The collector's rings have 8 members; the model's switch costs the
  same whoever comes next, so its per-hop time does not grow with N (``--model`` shows it).
- ``pi_unlock`` (``pi_unlock.c``): what one ``FUTEX_UNLOCK_PI`` with a queued waiter costs the
  owner, on one CPU (the waiter SCHED_IDLE, so no wakeup preemption), across CPUs with the
  waiter asleep (its CPU idle), and across CPUs with the waiter still spinning on the owner.

    python -m calibration.trace.probes ring [--members 2,3,4,8,40] [--repeats 3] [--model PROFILE]
    python -m calibration.trace.probes pi-unlock [--rounds 2000] [--repeats 3]

No root needed; nothing is changed on the machine. Runs are medians of ``--repeats``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
PROBES = ("ring", "pi_unlock")


def build(name: str, into: Path) -> Path:
    """Compile ``name.c`` (warnings are errors) into ``into``; a clear error without a compiler."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise SystemExit(f"probes: no C compiler ({cc}); apt-get install gcc, or set CC")
    exe = into / name
    cmd = [cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pthread", str(HERE / f"{name}.c"), "-o", str(exe)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"probes: building {name} failed:\n{done.stderr.strip()}")
    return exe


def parse(line: str) -> dict[str, str]:
    """One probe output line, ``key=value`` pairs separated by spaces."""
    out = {}
    for field in line.split():
        key, sep, value = field.partition("=")
        if not sep:
            raise ValueError(f"not a key=value field: {field!r} in {line!r}")
        out[key] = value
    return out


def run(exe: Path, *args: object) -> dict[str, str]:
    done = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"probes: {exe.name} {' '.join(map(str, args))} failed: {done.stderr.strip()}")
    return parse(done.stdout.strip().splitlines()[-1])


def cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def ring_table(members: list[int], hops: int, repeats: int, model: str | None) -> list[list[str]]:
    """Rows: members, then per mode and policy the median ns per hop (involuntary switches per
    hop), then the model's threads / processes if a profile is given."""
    model_ring = model_rings(model) if model else None
    cpu = cpus()[-1]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        exe = build("ring", Path(d))
        for n in members:
            row = [str(n)]
            for policy in ("other", "batch"):
                for mode in ("threads", "processes"):
                    runs = [run(exe, n, max(hops, n), mode, policy, cpu) for _ in range(repeats)]
                    ns = float(np.median([float(r["ns_per_hop"]) for r in runs]))
                    inv = float(np.median([float(r["involuntary_per_hop"]) for r in runs]))
                    row.append(f"{ns:,.0f} ({inv:.2f})")
            if model_ring is not None:
                row.append(" / ".join(f"{v:,.0f}" for v in model_ring(n)))
            rows.append(row)
    return rows


def model_rings(profile_path: str) -> Callable[[int], tuple[float, float]]:
    """The calibration's ring replica on ``profile_path`` with its params (read once): members
    -> ns per hop of threads, of processes."""
    from calibration.fit import make_costs
    from calibration.microbench import Target, ring
    from calibration.params import load_params, sibling_params
    from calibration.profile import load_profile

    costs = make_costs(load_params(sibling_params(profile_path)).costs)
    target = Target.of(load_profile(profile_path))
    return lambda n: (ring(costs, target, members=n, processes=False), ring(costs, target, members=n, processes=True))


def pi_unlock_table(rounds: int, repeats: int) -> list[list[str]]:
    """Rows: series, median of the runs' p10 / median / p90 ns, the uncontended pair and getppid."""
    ids = cpus()
    series = [("same_cpu", ids[-1], ids[-1])]
    if len(ids) >= 2:
        series += [("cross_sleeping", ids[-1], ids[0]), ("cross_spinning", ids[-1], ids[0])]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        exe = build("pi_unlock", Path(d))
        for name, owner, waiter in series:
            # asleep for 1 ms per round: fewer rounds keep that series under a few seconds
            n = max(10, rounds // 5) if name == "cross_sleeping" else rounds
            runs = [run(exe, name, n, owner, waiter) for _ in range(repeats)]

            def med(key: str, runs: list[dict[str, str]] = runs) -> float:
                return float(np.median([float(r[key]) for r in runs]))

            rows.append(
                [name] + [f"{med(k):,.0f}" for k in ("p10_ns", "median_ns", "p90_ns", "pair_median_ns", "getppid_median_ns")]
            )
    return rows


def render(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="probe", required=True)
    r = sub.add_parser("ring", help="rings of N members on one CPU")
    r.add_argument("--members", default="2,3,4,8,40", help="comma-separated ring sizes, 2..256")
    r.add_argument("--hops", type=int, default=100_000)
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--model", metavar="PROFILE", help="also the model's ring on this profile (its -params.toml)")
    p = sub.add_parser("pi-unlock", help="FUTEX_UNLOCK_PI with a queued waiter")
    p.add_argument("--rounds", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    if a.repeats < 1:
        ap.error("--repeats must be >= 1")
    if a.probe == "ring":
        try:
            members = [int(x) for x in a.members.split(",")]
        except ValueError:
            ap.error(f"--members: comma-separated integers, got {a.members!r}")
        if not all(2 <= n <= 256 for n in members) or a.hops < 1:
            ap.error("--members must be 2..256 each and --hops >= 1")
        head = ["members"] + [f"{m} {p} ns/hop (invol.)" for p in ("other", "batch") for m in ("threads", "processes")]
        if a.model:
            head.append("model threads / processes")
        print(render(head, ring_table(members, a.hops, a.repeats, a.model)))  # noqa: T201
    else:
        if a.rounds < 10:
            ap.error("--rounds must be >= 10")
        head = ["series", "p10 ns", "median ns", "p90 ns", "lock+unlock pair ns", "getppid ns"]
        print(render(head, pi_unlock_table(a.rounds, a.repeats)))  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
