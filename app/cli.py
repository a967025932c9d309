"""The ``rcusim`` command line.

Each verb lives in its own module under :mod:`app.verbs` with ``VERB``, ``SUMMARY`` and
``register(subparsers)``; this module finds them, builds ``--help`` from their summaries and
turns every user error into one line ``rcusim: error: FIELD: problem (fix)`` with exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType

from sim import compiled
from sim.errors import RcusimError
from sim.scenario import VERSION

from . import verbs as _verbs_pkg

# The order verbs appear in --help; verbs not listed come after, alphabetically.
ORDER = ("run", "compare", "sweep", "validate", "collect", "calibrate", "app", "list", "knobs")


def verb_modules() -> list[ModuleType]:
    mods = [importlib.import_module(f"{_verbs_pkg.__name__}.{m.name}") for m in pkgutil.iter_modules(_verbs_pkg.__path__)]
    rank = {v: i for i, v in enumerate(ORDER)}
    return sorted(mods, key=lambda m: (rank.get(m.VERB, len(ORDER)), m.VERB))


def description(mods: Sequence[ModuleType]) -> str:
    lines = [
        "rcusim: a discrete-event simulator of the Linux mechanisms behind scalability",
        "(scheduling, RCU, locks, timers), for what-if questions about kernel changes.",
        "",
        "verbs:",
    ]
    for m in mods:
        summary = [x.strip() for x in m.SUMMARY.strip().splitlines()]
        lines.append(f"  {m.VERB:<17}{summary[0]}")
        lines.extend(f"  {'':<17}{x}" for x in summary[1:])
    lines += ["", "Run 'rcusim VERB --help' for a verb's options."]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    mods = verb_modules()
    p = argparse.ArgumentParser(
        prog="rcusim", description=description(mods), formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--version",
        action="version",
        version=f"rcusim {VERSION}; engine: {compiled.status()[1]}",
        help="version, and whether the engine runs compiled",
    )
    sub = p.add_subparsers(dest="verb", metavar="VERB")
    for m in mods:
        m.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return 2
    try:
        return int(args.fn(args))
    except RcusimError as exc:
        print(f"rcusim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rcusim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
