"""Kernel mechanisms and workloads built on :mod:`sim`.

:func:`catalog` lists every mechanism (a ``[kernel.NAME]`` section of a scenario) and every
workload kind (``[workload] kind = ...``) that rcusim knows.
"""

from __future__ import annotations

from sim.scenario import Catalog, WorkloadSpec

from .workloads import messaging


def catalog() -> Catalog:
    return Catalog(
        mechanisms={},
        workloads={
            "messaging": WorkloadSpec("messaging", messaging.MessagingConfig, messaging.build, messaging.__doc__ or ""),
        },
    )
