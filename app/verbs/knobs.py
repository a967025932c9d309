"""rcusim knobs: every configuration key with its default and source."""

from __future__ import annotations

import argparse

from sim import scenario as sc
from sim.config import describe
from sim.params import Costs, KernelConfig, MachineConfig

from ..common import catalog

VERB = "knobs"
SUMMARY = """every configuration key (machine, kernel, costs, mechanisms,
workloads) with its default, meaning and source"""


def register(sub: argparse._SubParsersAction) -> None:
    k = sub.add_parser(
        "knobs", help="list every configuration key", description="List every configuration key with its default and source."
    )
    k.set_defaults(fn=cmd_knobs)


def cmd_knobs(args: argparse.Namespace) -> int:
    cat = catalog()
    groups: list[tuple[str, type]] = [
        ("scenario.", sc.ScenarioMeta),
        ("machine.", MachineConfig),
        ("kernel.", KernelConfig),
        ("costs.", Costs),
    ]
    groups += [(f"kernel.{n}.", m.config) for n, m in cat.mechanisms.items()]
    groups += [(f"workload ({k}): ", w.config) for k, w in cat.workloads.items()]
    for prefix, cls in groups:
        for key, tp, default, doc, source in describe(cls, prefix):
            src = f" [source: {source}]" if source else ""
            print(f"{key}  ({tp}, default {default})\n    {doc}{src}")
    return 0
