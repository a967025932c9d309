"""Small builders shared by the tests."""

from __future__ import annotations

import dataclasses

from sim.machine import Env, Machine
from sim.params import Costs, KernelConfig, MachineConfig
from sim.rng import Streams
from sim.trace import Tracer

ZERO_COSTS = Costs(
    **{f.name: 0 for f in dataclasses.fields(Costs) if f.name not in ("jitter_cv", "tick_busy", "other_gaps")}, jitter_cv=0.0
)


def every_task(m: Machine):  # type: ignore[no-untyped-def]
    """Record the tasks of ``m`` that exit from now on (a machine keeps only its live ones);
    returns a function giving every task, live or exited, in spawn order."""
    gone: dict[int, object] = {}
    m.exit_hooks.append(lambda cpu, t: gone.__setitem__(t.tid, t))

    def tasks():  # type: ignore[no-untyped-def]
        both = {**gone, **m.tasks}
        return [both[tid] for tid in sorted(both)]

    return tasks


def machine(
    cpus: int = 1,
    hz: int = 100,
    nohz_idle: bool = True,
    preempt: str = "voluntary",
    seed: int = 1,
    trace: bool = False,
    kernel: dict | None = None,
    **costs: int,
) -> Machine:
    """A machine with every cost 0 (unless given) and no jitter: times are exact. ``kernel``:
    further KernelConfig knobs."""
    c = dataclasses.replace(ZERO_COSTS, **costs)
    k = KernelConfig(hz=hz, nohz_idle=nohz_idle, preempt=preempt, **(kernel or {}))  # type: ignore[arg-type]
    return Machine(Env(), MachineConfig(cpus=cpus), k, c, Streams(seed), Tracer() if trace else None)


def cli_error(args: list[str], capsys, *words: str, absent: str | None = None) -> str:  # type: ignore[no-untyped-def]
    """Run the CLI on ``args`` and return its one error line: exit code 2, no traceback, the
    line ``rcusim: error: ...`` holding every one of ``words`` (the field, the problem), and
    ``absent`` nowhere on stderr (e.g. a sign that work started before the input was refused)."""
    from app.cli import main

    rc = main(args)
    out, err = capsys.readouterr()
    lines = [x for x in err.strip().splitlines() if not x.startswith("rcusim: plain Python")]
    assert rc == 2 and "Traceback" not in err and lines and lines[-1].startswith("rcusim: error: "), (rc, out, err)
    for w in words:
        assert w in lines[-1], (w, lines[-1])
    assert absent is None or absent not in err, (absent, err)
    return lines[-1]
