"""Chrome trace-event JSON recorder (opens in Perfetto and chrome://tracing).

One process ("machine") with a thread track per CPU showing what runs there (task spans,
irq and softirq spans, idle), and further tracks that models add (kthreads, grace periods,
lock ownership). Instant events mark IPIs, ticks and wakeups; counter events carry levels.

The recorder is off unless a run asks for it: hot paths hold ``tracer = machine.tracer`` and
test ``if tracer is not None`` so a run without a trace pays one comparison per event.
Timestamps are integer nanoseconds in the simulation and microseconds (floats) in the file,
as the format requires.
"""

from __future__ import annotations

import json
from typing import IO, Any

TRACE_LIMIT = 5_000_000
"""Events a trace keeps by default (about 1 GiB at ~207 bytes each; benchmarks/memory.py)."""
CPU_PID = 1
MODEL_PID = 2


class Tracer:
    """Collects trace events in memory; :meth:`write` emits them in a stable order.

    An event is kept as a tuple of its fields, in integer nanoseconds, and becomes the format's
    dict only when it is written or read through :attr:`events`: a dict per event cost about 470
    bytes, the tuple about half (benchmarks/memory.py --trace), and a traced run of a large
    scenario keeps millions. At most ``limit`` events are kept; later ones are counted in
    :attr:`dropped` (and in the file's ``otherData``).
    """

    def __init__(self, limit: int = TRACE_LIMIT) -> None:
        # ("X", name, pid, tid, start_ns, end_ns, cat, args) | ("i", name, pid, tid, t_ns, args)
        # | ("C", name, pid, t_ns, values)
        self._events: list[tuple[Any, ...]] = []
        self._tracks: dict[str, int] = {}
        self._meta: list[dict[str, Any]] = []
        self.limit = limit
        self.dropped = 0

    def __len__(self) -> int:
        """Events kept."""
        return len(self._events)

    @property
    def events(self) -> list[dict[str, Any]]:
        """The kept events as the format's dicts (built on each call: for tests and tools)."""
        return [_as_dict(e) for e in self._events]

    def track(self, name: str, pid: int = MODEL_PID, sort: int | None = None) -> int:
        """The thread id of the named track, created on first use."""
        tid = self._tracks.get(name)
        if tid is None:
            tid = self._tracks[name] = len(self._tracks) + 1
            self._meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            self._meta.append(
                {
                    "ph": "M",
                    "name": "thread_sort_index",
                    "pid": pid,
                    "tid": tid,
                    "args": {"sort_index": sort if sort is not None else tid},
                }
            )
        return tid

    def _add(self, ev: tuple[Any, ...]) -> None:
        if len(self._events) < self.limit:
            self._events.append(ev)
        else:
            self.dropped += 1

    def span(
        self,
        tid: int,
        name: str,
        start_ns: int,
        end_ns: int,
        pid: int = CPU_PID,
        cat: str = "",
        args: dict[str, Any] | None = None,
    ) -> None:
        self._add(("X", name, pid, tid, start_ns, end_ns, cat, args))

    def instant(self, tid: int, name: str, t_ns: int, pid: int = CPU_PID, args: dict[str, Any] | None = None) -> None:
        self._add(("i", name, pid, tid, t_ns, args))

    def counter(self, name: str, t_ns: int, values: dict[str, float], pid: int = CPU_PID) -> None:
        self._add(("C", name, pid, t_ns, values))

    def _head(self) -> list[dict[str, Any]]:
        procs = [
            {"ph": "M", "name": "process_name", "pid": CPU_PID, "args": {"name": "CPUs"}},
            {"ph": "M", "name": "process_name", "pid": MODEL_PID, "args": {"name": "kernel mechanisms"}},
        ]
        return procs + self._meta

    def _tail(self) -> dict[str, Any]:
        tail: dict[str, Any] = {"displayTimeUnit": "ns"}
        if self.dropped:
            tail["otherData"] = {"dropped_events": self.dropped, "limit": self.limit}
        return tail

    def document(self) -> dict[str, Any]:
        """The whole trace as one JSON-ready dict (every event a dict: :meth:`write` does not
        build this)."""
        return {"traceEvents": self._head() + self.events, **self._tail()}

    def write(self, fp: IO[str], batch: int = 20_000) -> None:
        """Write the trace as JSON, the same text as ``json.dump(self.document(), fp,
        separators=(",", ":"))``, turning ``batch`` events into dicts at a time."""
        dumps = json.JSONEncoder(separators=(",", ":")).encode
        fp.write('{"traceEvents":[')
        fp.write(dumps(self._head())[1:-1])  # never empty: the two process names come first
        evs = self._events
        for i in range(0, len(evs), batch):
            fp.write("," + dumps([_as_dict(e) for e in evs[i : i + batch]])[1:-1])
        fp.write("]")
        for key, value in self._tail().items():
            fp.write(f",{dumps(key)}:{dumps(value)}")
        fp.write("}")


def _as_dict(e: tuple[Any, ...]) -> dict[str, Any]:
    """One kept event as the format's dict (timestamps and durations in microseconds)."""
    ph = e[0]
    if ph == "X":
        _, name, pid, tid, start_ns, end_ns, cat, args = e
        ev: dict[str, Any] = {
            "ph": "X",
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": start_ns / 1000.0,
            "dur": (end_ns - start_ns) / 1000.0,
        }
        if cat:
            ev["cat"] = cat
        if args:
            ev["args"] = args
        return ev
    if ph == "i":
        _, name, pid, tid, t_ns, args = e
        ev = {"ph": "i", "s": "t", "name": name, "pid": pid, "tid": tid, "ts": t_ns / 1000.0}
        if args:
            ev["args"] = args
        return ev
    _, name, pid, t_ns, values = e
    return {"ph": "C", "name": name, "pid": pid, "ts": t_ns / 1000.0, "args": values}
