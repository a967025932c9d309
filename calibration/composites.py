"""The held-back composite benchmarks of a profile, predicted by the calibrated model.

``rcusim validate --profile FILE`` (and ``--all``, with the bundled profile) turns each
composite the collector measured into validation rows (:class:`calibration.validation.Row`):
role ``predicted`` (no parameter was fitted to it: see :data:`calibration.fit.HELD_BACK`),
target 0.25 (the project's commitment for a calibrated machine), source = profile and item.

Composites and their state:

* ``messaging`` (perf bench sched messaging over pipes): simulated with the ``messaging``
  workload on the profile's CPUs, HZ and preemption model with the calibrated costs.
* ``netns_script`` (the netns-2014 fake-router script with the real tools): simulated with the
  ``netns`` workload of the RCU model on today's namespace paths, without the seed's helpers.
* ``pi_futex_handoff`` (PI-futex throughput at 2..2N threads): simulated with the ``pi_futex``
  workload (models/workloads/pi_futex.py) over the rt-mutex of models/locks.

The simulated kernel is the profile's: CPUs, HZ, preemption model, fair-class scheduler
(``kernel.sched`` = ``eevdf`` from Linux 6.6, see :attr:`calibration.profile.Profile.sched`) and
wakeup CPU selection (``kernel.wake_affine`` = ``weight`` from 4.14, WF_SYNC-aware, see
:attr:`calibration.profile.Profile.wake_affine`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from models.workloads.pi_futex import SLOW_HANDOFF
from sim import scenario as sc
from sim.units import S

from .params import Params, apply_params
from .profile import Profile, Series
from .validation import Row, error_interval

TARGET = 0.25
PI_SPAN = 500_000_000  # ns of the PI-futex run simulated (engine cost: ~1 M operations/s simulated)
ProgressFn = Callable[[str, float], None]


def _story(profile: Profile) -> str:
    return f"profile:{Path(profile.source).stem}"


def base_scenario(profile: Profile, name: str) -> dict[str, Any]:
    return {
        "scenario": {"name": name, "seed": 1},
        "machine": {"cpus": profile.cpus, "name": profile.uname.nodename},
        "kernel": profile.kernel_section(),
    }


def _simulate(
    data: dict[str, Any], params: Params, catalog: sc.Catalog, seeds: int, workers: int | None = None
) -> list[dict[str, float]]:
    """The scenario's metrics for seeds 1..seeds (common random numbers across profiles), the
    seeds in ``workers`` processes (the same metrics, in seed order, whatever their number)."""
    from .sweep import pmap, seed_metrics

    scn = sc.validate(apply_params(data, params), catalog)
    return pmap(seed_metrics, [(scn, s) for s in range(1, seeds + 1)], workers=workers)


def messaging_rows(
    profile: Profile,
    params: Params,
    catalog: sc.Catalog,
    seeds: int,
    progress: ProgressFn | None = None,
    workers: int | None = None,
) -> list[Row]:
    item = profile.items.get("messaging")
    if item is None or item.status != "ok":
        return []
    rows = []
    series = [s for s in item.series or () if s.samples_total > 0]
    for i, s in enumerate(series):
        if progress is not None:
            progress(f"messaging {s.label}", i / max(1, len(series)))
        rows.append(_messaging_row(profile, params, catalog, seeds, s, workers))
    return rows


def _messaging_row(
    profile: Profile, params: Params, catalog: sc.Catalog, seeds: int, s: Series, workers: int | None = None
) -> Row:
    p = s.params
    groups, senders, receivers, loops = (int(p[k]) for k in ("groups", "senders", "receivers", "loops"))
    data = base_scenario(profile, f"messaging-{s.label}")
    data["workload"] = {
        "kind": "messaging",
        "groups": groups,
        "senders": senders,
        "receivers": receivers,
        "loops": loops,
        "message_bytes": int(profile.items["messaging"].params.get("message_bytes", 100)),
    }
    runs = _simulate(data, params, catalog, seeds, workers)
    sims = [float(r["time_s"]) for r in runs]
    measured = np.asarray(s.samples, dtype=float) / S
    q1, q3 = np.percentile(measured, [25, 75])
    messages = groups * senders * receivers * loops
    sim_sw = float(np.mean([r["context_switches"] for r in runs])) / messages
    switches = ""
    if "voluntary_switches_per_run" in p:
        real_sw = (float(p["voluntary_switches_per_run"]) + float(p.get("involuntary_switches_per_run", 0))) / messages
        switches = f"; context switches per message: measured {real_sw:.3g}, simulated {sim_sw:.3g}"
    return Row(
        story=_story(profile),
        metric="messaging time",
        config=f"{s.label}: {groups} groups x {senders}+{receivers}, {loops} loops, pipes, {profile.cpus} CPUs",
        reference=float(np.median(measured)),
        simulated=float(np.mean(sims)),
        unit="s",
        role="predicted",
        target=TARGET,
        source=f"{profile.source}: items.messaging.series[{s.label}] median",
        interval=error_interval(measured, sims, lambda runs: np.median(runs, axis=1)),
        note=f"measured IQR {q1:.4g}..{q3:.4g} s over {measured.size} runs; simulated {min(sims):.4g}..{max(sims):.4g} s "
        f"over {seeds} seeds{switches}",
    )


def _tool_note(params: Params) -> str:
    v = params.workload.get("netns", {}).get("tool_work")
    if v is None:
        return "tool_work is the workload's prior (no tool_exec in the params)"
    return f"tool_work {float(v) / 1e3:.0f} us per ip/sysctl run (params [workload.netns])"


def _netdev_note(params: Params, profile: Profile) -> str:
    """The measured kernel knobs of the script's steps, and what the collector's veth requests
    put on each TX queue trim (``netif_set_real_num_tx_queues``: the ``tx-1`` queue object's
    removal, ``synchronize_net()``, the qdisc reset; net/core/dev.c). The model simulates the
    trim's expedited grace period (under ftrace 8-13 us of it on the development machine,
    docs/kernel/rcu-nocb-netns.md §1.7) and prices nothing else of it."""
    wl = params.workload.get("netns", {})
    known = [f"{k} {float(wl[k]) / 1e3:.0f} us" for k in ("setup_net", "register_netdev", "lo_up") if k in wl]
    head = ", ".join(known) + " (params [workload.netns])" if known else "netdevice costs are the workload's priors"
    item = profile.items.get("veth_link")
    if item is None or item.status != "ok":
        return head + "; no veth_link item"
    series = {s.label: np.asarray(s.samples, dtype=float) for s in item.series or () if s.samples_total > 0}
    if not {"create_peer_netns", "create_one_tx_queue"} <= series.keys():
        return head
    full, trimmed = series["create_peer_netns"], series["create_one_tx_queue"]
    med = (float(np.median(full)) - float(np.median(trimmed))) / 2 / 1e3
    mean = (float(np.mean(full)) - float(np.mean(trimmed))) / 2 / 1e3
    return (
        f"{head}; veth_link puts {med:.0f} us median, {mean:.0f} us mean on each TX queue trim "
        "((create_peer_netns - create_one_tx_queue) / 2), of which only the expedited grace period is simulated"
    )


def _futex_note(params: Params) -> str:
    v = params.workload.get("pi_futex", {}).get("futex_op")
    head = "futex_op is the workload's prior (no pi_futex_uncontended in the params)" if v is None else f"futex_op {v} ns"
    return f"{head}; the rt-mutex pass costs (kernel.locks rt_slowpath, atomic, cacheline) are priors"


def netns_rows(
    profile: Profile,
    params: Params,
    catalog: sc.Catalog,
    seeds: int,
    progress: ProgressFn | None = None,
    workers: int | None = None,
) -> list[Row]:
    """The collector's fake-router script (``ip netns add``, two ``ip netns exec``, two ``ip link
    add``; no uuidgen or cut) with the ``netns`` workload on today's namespace paths (``v6``:
    namespace_unlock waits for an expedited grace period), compared with
    ``items.netns_script.routers_per_s.overall``. The process costs (fork, exec, exit) come from
    this profile's microbenchmarks, ``tool_work`` (what an ip or sysctl run costs beyond /bin/true)
    from its ``tool_exec`` item, ``setup_net`` from ``netns_create``, ``register_netdev``
    and ``lo_up`` from ``veth_link``, all through the params' ``[workload.netns]``
    (the priors when the profile lacks the items); the grace periods the 6.x paths wait for
    (namespace_unlock, the veth queue trims) are simulated by the RCU model; the mount costs are
    the workload's estimates and its fit to the netns-2014 story (2014 hardware)."""
    item = profile.items.get("netns_script")
    if item is None or item.status != "ok":
        return []
    rates = item.routers_per_s
    measured = rates.overall if rates is not None else None
    routers = int(item.params.get("routers", 0))
    if not measured or routers < 1:
        return []
    if progress is not None:
        progress("netns_script", 0.0)
    data = base_scenario(profile, "netns-script")
    data["kernel"]["rcu"] = profile.rcu_section()
    data["scenario"]["max_time"] = "600 s"
    data["workload"] = {
        "kind": "netns",
        "routers": routers,
        "report_every": int(item.params.get("block", 50)),
        "steps": "full",
        "helpers": False,
        "paths": "v6",
    }
    runs = _simulate(data, params, catalog, seeds, workers)
    sims = [float(r["routers_per_s"]) for r in runs]
    per_step = ", ".join(f"{s.label} {float(np.median(s.samples)) / 1e6:.2f}" for s in item.series or () if s.samples_total > 0)
    blocks = (rates.model_dump().get("blocks") if rates is not None else None) or []
    trend = ""
    if len(blocks) >= 2:
        trend = f"; measured first/last block {blocks[0]['routers_per_s']:.0f}/{blocks[-1]['routers_per_s']:.0f} routers/s"
    return [
        Row(
            story=_story(profile),
            metric="netns fake routers",
            config=f"{routers} routers, ip netns add + 2 exec + 2 veth, {profile.cpus} CPUs",
            reference=float(measured),
            simulated=float(np.mean(sims)),
            unit="routers/s",
            role="predicted",
            target=TARGET,
            source=f"{profile.source}: items.netns_script.routers_per_s.overall",
            # the rate of a resampled script: routers over their summed time (the per-router samples)
            interval=error_interval(item.samples, sims, lambda runs: 1e9 / np.mean(runs, axis=1), float(measured)),
            note=f"measured per step (median ms): {per_step}{trend}; {seeds} seeds "
            f"({min(sims):.3g}..{max(sims):.3g}/s); {_tool_note(params)}; {_netdev_note(params, profile)}; "
            f"simulated synchronize_rcu_expedited() {float(np.mean([r.get('rcu.synchronize_mean_ms', 0.0) for r in runs])) * 1e3:.0f} us "
            "mean; mount costs are estimates (calibration/fits/netns-2014.toml fits mount_cost on 2014 hardware)",
        )
    ]


def _share_at_least(s: Series, ns: int) -> float:
    """The share of a series' samples at or above ``ns``, from its full histogram (``ns`` must
    be a bucket edge; the stored samples are a subsample)."""
    h = s.histogram
    total = sum(c for _, _, c in h.buckets) + h.underflow + h.overflow
    above = sum(c for lo, _, c in h.buckets if lo >= ns) + h.overflow
    return above / total if total else float("nan")


def pi_futex_scenario(profile: Profile, name: str, threads: int, critical_section: int, duration: int) -> dict[str, Any]:
    """The scenario of the collector's PI-futex loop on ``profile``'s machine: ``threads``
    threads pinned round-robin, the lock model with today's rules, ``duration`` ns from the start
    signal (the validation rows, and calibration.trace.pi_trace's model side)."""
    data = base_scenario(profile, name)
    data["kernel"]["locks"] = {}
    data["workload"] = {
        "kind": "pi_futex",
        "threads": threads,
        "critical_section": critical_section,
        "duration": duration,
        "warmup": 0,
    }
    return data


def pi_futex_rows(
    profile: Profile,
    params: Params,
    catalog: sc.Catalog,
    seeds: int,
    progress: ProgressFn | None = None,
    workers: int | None = None,
) -> list[Row]:
    """N threads contending one PI futex (the ``pi_futex`` workload: FUTEX_LOCK_PI /
    FUTEX_UNLOCK_PI over the rt-mutex with today's spinning rules), one row per measured N,
    compared with ``items.pi_futex_handoff.throughput_ops_per_s``. The critical section is the
    collector's own measurement of it; ``futex_op`` (the futex(2) work around the rt-mutex) comes
    from the ``pi_futex_uncontended`` item through the params' ``[workload.pi_futex]``; the
    rt-mutex pass costs are the lock models' priors (nothing is fitted to this item)."""
    item = profile.items.get("pi_futex_handoff")
    if item is None or item.status != "ok":
        return []
    cs = int(round(float(item.params.get("critical_section_ns", 0))))
    series = [s for s in item.series or () if s.samples_total > 0 and "threads" in s.params]
    rows = []
    for i, s in enumerate(series):
        if progress is not None:
            progress(f"pi_futex_handoff {s.label}", i / max(1, len(series)))
        n = int(s.params["threads"])
        measured = (s.model_extra or {}).get("throughput_ops_per_s")
        if not measured:
            continue  # a series without its rate (a failed run) has nothing to compare
        # the collector times each run from its start signal: one 2 s run per N before collector
        # 0.9.0, since then three, alternating between the counts, its rate all runs' operations
        # over their time; each seed here is one run, 0.5 s of it (PI_SPAN) from the start too, so
        # the start-up transient (the convoy of sleepers forms within ~20 ms) weighs at most a
        # few per cent, as it does in the measurement
        run_ns = item.params.get("run_duration_ns", item.params.get("duration_ns", PI_SPAN))
        span = min(int(run_ns), PI_SPAN)
        data = pi_futex_scenario(profile, f"pi-futex-{s.label}", n, cs, span)
        runs = _simulate(data, params, catalog, seeds, workers)
        sims = [float(r["throughput_ops_per_s"]) for r in runs]
        sim_handoff = float(np.nanmedian([r["handoff_median_ns"] for r in runs]))
        sim_sleeps = float(np.mean([r.get("locks.pi_futex.sleeps", 0.0) / max(1.0, r["ops"]) for r in runs]))
        sim_slow = float(np.mean([r["slow_handoff_share"] for r in runs]))
        sim_fast = float(np.mean([1.0 - r["kernel_waits"] / max(1.0, r["ops"]) for r in runs]))
        extra = s.model_extra or {}
        ops, waits = extra.get("ops"), extra.get("kernel_waits")
        measured_runs = extra.get("run_throughputs_ops_per_s") or []
        runs_note = (
            f"measured over {len(measured_runs)} runs ({min(measured_runs):.4g}..{max(measured_runs):.4g} ops/s each); "
            if len(measured_runs) > 1
            else ""
        )
        fast = f"{1.0 - float(waits) / float(ops):.1%}" if ops and waits is not None else "n/a"
        vcs = extra.get("voluntary_switches")  # newer collector runs count them
        sleeps = (
            f"voluntary context switches per op: measured {float(vcs) / float(ops):.2g}, simulated sleeps"
            if ops and vcs is not None
            else "simulated sleeps per op"
        )
        rows.append(
            Row(
                story=_story(profile),
                metric="PI-futex throughput",
                config=f"{s.label}: {n} threads pinned round-robin, {profile.cpus} CPUs, critical section {cs} ns",
                reference=float(measured),
                simulated=float(np.mean(sims)),
                unit="ops/s",
                role="predicted",
                target=TARGET,
                source=f"{profile.source}: items.pi_futex_handoff.series[{s.label}].throughput_ops_per_s",
                # three 2-s runs per count since collector 0.9.0 (one before: no interval)
                interval=error_interval(measured_runs, sims, lambda runs: np.mean(runs, axis=1), float(measured)),
                note=f"handoff latency median: measured {float(np.median(s.samples)) / 1000:.3g} us, simulated "
                f"{sim_handoff / 1000:.3g} us; handoffs of {SLOW_HANDOFF / 1000:.3g} us or more (the waiter was "
                f"not running): measured {_share_at_least(s, SLOW_HANDOFF):.1%}, simulated {sim_slow:.1%}; "
                f"acquisitions by the user-space cmpxchg: measured {fast}, simulated {sim_fast:.1%}; "
                f"{sleeps} {sim_sleeps:.2g}; {runs_note}{seeds} seeds "
                f"({min(sims):.4g}..{max(sims):.4g} ops/s); {_futex_note(params)}",
            )
        )
    return rows


def pending(profile: Profile, catalog: sc.Catalog) -> list[str]:
    """Measured composites that have no simulated counterpart yet (for a footnote): none today;
    kept for composites a newer collector may add."""
    return []


def profile_rows(
    profile: Profile,
    params: Params,
    catalog: sc.Catalog,
    seeds: int,
    progress: ProgressFn | None = None,
    workers: int | None = None,
) -> list[Row]:
    """Every held-back composite row of ``profile``."""
    rows = messaging_rows(profile, params, catalog, seeds, progress, workers)
    rows += netns_rows(profile, params, catalog, seeds, progress, workers)
    rows += pi_futex_rows(profile, params, catalog, seeds, progress, workers)
    return rows
