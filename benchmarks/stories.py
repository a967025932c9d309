"""Wall time of each seed story at full size (target: each under 30 s on the 2-core development machine).

For every story that is modelled (``calibration.stories.get(name)`` is not None) this runs the
story's bundled scenarios (``scenarios/NAME.toml``, or ``scenarios/PREFIX-*.toml`` for a story
told by several, e.g. ``timers-idle`` for ``timers-2023``) once each, at full size and their
own seed, and prints the wall time with the simulated time and events. ``--rows`` also times the story's
whole validation (``rcusim validate NAME --seeds 1``: every configuration of the story) in one
process and in ``--workers`` processes (default: every core), with the speedup and whether the
rows came out identical.
Stories not modelled yet are listed with the reason. Prints figures only; nothing here is a test.

    python benchmarks/stories.py [NAME ...] [--rows]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import models  # noqa: E402
from calibration import stories  # noqa: E402
from calibration.prescreen import story_prefix  # noqa: E402
from calibration.sweep import default_workers  # noqa: E402
from calibration.validation import StoryOptions  # noqa: E402
from sim import compiled  # noqa: E402
from sim import scenario as sc  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 30.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"stories (default all): {', '.join(stories.NAMES)}")
    ap.add_argument("--rows", action="store_true", help="also time each story's whole validation (--seeds 1)")
    ap.add_argument("--workers", type=int, default=default_workers(), help="worker processes for --rows (default: all cores)")
    a = ap.parse_args()
    print(
        f"machine: {platform.machine()} {os.cpu_count()} CPUs, python {platform.python_version()}, load {os.getloadavg()[0]:.1f}"
    )
    print(f"engine: {compiled.status()[1]}")
    cat = models.catalog()
    for name in a.names or list(stories.NAMES):
        story = stories.get(name)
        if story is None:
            print(f"{name:22s} skipped: {stories.pending(name)}")
            continue
        own = ROOT / "scenarios" / f"{name}.toml"
        paths = [own] if own.exists() else sorted((ROOT / "scenarios").glob(f"{story_prefix(name)}-*.toml"))
        if not paths:
            print(f"{name:22s} no bundled scenario (scenarios/{name}.toml or {story_prefix(name)}-*.toml)")
        for path in paths:
            scn = sc.validate(sc.load(path), cat)
            t0 = time.perf_counter()
            res = sc.run(scn, cat)
            wall = time.perf_counter() - t0
            ok = "ok" if wall < TARGET_S else "OVER TARGET"
            print(
                f"{name:22s} {path.name:24s} {wall:6.2f} s wall ({ok}, target < {TARGET_S:.0f} s), "
                f"{res.sim_ns / 1e9:.3g} s simulated, {res.events:,} events = {res.events / wall:,.0f} ev/s"
            )
        if a.rows:
            walls, tables = [], []
            for workers in (1, a.workers):
                t0 = time.perf_counter()
                rows = story.rows(StoryOptions(seeds=1, workers=workers))
                walls.append(time.perf_counter() - t0)
                tables.append([r.to_json() for r in rows])
            print(
                f"{'':22s} validation: {len(rows)} rows in {walls[0]:6.2f} s wall on 1 process, {walls[1]:6.2f} s on "
                f"{a.workers} ({walls[0] / walls[1]:.2f}x; rows {'identical' if tables[0] == tables[1] else 'DIFFER'})"
            )


if __name__ == "__main__":
    main()
