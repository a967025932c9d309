"""Kernel mechanisms and workloads built on :mod:`sim`.

:func:`catalog` lists every mechanism (a ``[kernel.NAME]`` section of a scenario) and every
workload kind (``[workload] kind = ...``) that rcusim knows. Each area package (``rcu``,
``locks``, ``timers``, ``sync``) exports ``MECHANISMS`` (name -> Mechanism) and ``WORKLOADS``
(kind -> WorkloadSpec); mechanisms install in this order, so later ones may use earlier ones.
"""

from __future__ import annotations

from sim.scenario import Catalog, WorkloadSpec

from . import locks, rcu, sync, timers
from .workloads import messaging, pi_futex

AREAS = (rcu, locks, timers, sync)


def catalog() -> Catalog:
    mechanisms: dict = {}
    workloads: dict = {
        "messaging": WorkloadSpec("messaging", messaging.MessagingConfig, messaging.build, messaging.__doc__ or ""),
        "pi_futex": WorkloadSpec("pi_futex", pi_futex.PiFutexConfig, pi_futex.build, pi_futex.__doc__ or ""),
    }
    for area in AREAS:
        for name, mech in area.MECHANISMS.items():
            if name in mechanisms:
                raise RuntimeError(f"mechanism {name!r} defined twice")
            mechanisms[name] = mech
        for kind, spec in area.WORKLOADS.items():
            if kind in workloads:
                raise RuntimeError(f"workload {kind!r} defined twice")
            workloads[kind] = spec
    return Catalog(mechanisms=mechanisms, workloads=workloads)
