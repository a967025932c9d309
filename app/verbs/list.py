"""rcusim list: the bundled scenarios."""

from __future__ import annotations

import argparse

from ..common import SCENARIO_DIR

VERB = "list"
SUMMARY = "the bundled scenarios, with their descriptions"


def register(sub: argparse._SubParsersAction) -> None:
    ls = sub.add_parser("list", help="list the bundled scenarios", description="List the bundled scenarios.")
    ls.set_defaults(fn=cmd_list)


def cmd_list(args: argparse.Namespace) -> int:
    import tomllib

    for p in sorted(SCENARIO_DIR.glob("*.toml")):
        meta = tomllib.loads(p.read_text()).get("scenario", {})
        print(f"{p.stem:28s} {meta.get('description', '')}")
    return 0
