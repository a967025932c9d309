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

CPU_PID = 1
MODEL_PID = 2


class Tracer:
    """Collects trace events in memory; :meth:`write` emits them in a stable order."""

    def __init__(self, limit: int = 5_000_000) -> None:
        self.events: list[dict[str, Any]] = []
        self._tracks: dict[str, int] = {}
        self._meta: list[dict[str, Any]] = []
        self.limit = limit
        self.dropped = 0

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

    def _add(self, ev: dict[str, Any]) -> None:
        if len(self.events) < self.limit:
            self.events.append(ev)
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
        self._add(ev)

    def instant(self, tid: int, name: str, t_ns: int, pid: int = CPU_PID, args: dict[str, Any] | None = None) -> None:
        ev: dict[str, Any] = {"ph": "i", "s": "t", "name": name, "pid": pid, "tid": tid, "ts": t_ns / 1000.0}
        if args:
            ev["args"] = args
        self._add(ev)

    def counter(self, name: str, t_ns: int, values: dict[str, float], pid: int = CPU_PID) -> None:
        self._add({"ph": "C", "name": name, "pid": pid, "ts": t_ns / 1000.0, "args": values})

    def document(self) -> dict[str, Any]:
        procs = [
            {"ph": "M", "name": "process_name", "pid": CPU_PID, "args": {"name": "CPUs"}},
            {"ph": "M", "name": "process_name", "pid": MODEL_PID, "args": {"name": "kernel mechanisms"}},
        ]
        doc: dict[str, Any] = {"traceEvents": procs + self._meta + self.events, "displayTimeUnit": "ns"}
        if self.dropped:
            doc["otherData"] = {"dropped_events": self.dropped, "limit": self.limit}
        return doc

    def write(self, fp: IO[str]) -> None:
        json.dump(self.document(), fp, separators=(",", ":"))
