"""Message passing between groups of processes: the core of ``hackbench`` / ``perf bench sched
messaging``, built on the substrate alone (pipes, fork, wakeups, the scheduler).

Structure as in hackbench.c: ``groups`` groups; in each, ``receivers`` receivers each owning
one channel, and ``senders`` senders that each write ``loops`` messages to *every* receiver of
their group; a receiver reads ``senders * loops`` messages. The parent forks everyone, the
children wait on a start signal (hackbench's wakeup pipe, polled by all), the parent releases
them together and the run time is from that release to the last child's exit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sim.channel import PIPE_DEF_BUFFERS, Channel, WaitQueue
from sim.config import knob
from sim.errors import ConfigError
from sim.machine import CPU, Machine
from sim.ops import BLOCKED, Call, CpuWork, Recv, Send, Spawn, WaitChild
from sim.stats import LogHistogram
from sim.task import Task
from sim.units import S


@dataclass(frozen=True)
class MessagingConfig:
    groups: int = knob(
        10, doc="groups of senders and receivers (hackbench's first argument)", min=1, max=10_000, source="hackbench.c default"
    )
    senders: int = knob(20, doc="senders per group (hackbench's num_fds)", min=1, max=1000, source="hackbench.c default")
    receivers: int = knob(20, doc="receivers per group (hackbench's num_fds)", min=1, max=1000, source="hackbench.c default")
    loops: int = knob(
        100, doc="messages each sender writes to each receiver", min=1, max=10_000_000, source="hackbench.c default"
    )
    message_bytes: int = knob(100, doc="size of one message", min=1, max=4096, source="hackbench.c default")
    transport: Literal["pipe"] = knob("pipe", doc="channel type (sockets and their locks come with the lock models)")
    mode: Literal["process", "thread"] = knob(
        "process",
        doc="children as processes (fork: an address space each, so a switch between two of them costs "
        "Costs.mm_switch) or threads (one address space, the parent's); creation and exit cost the same",
        source="hackbench.c (-T / --thread)",
    )
    work: int = knob(0, doc="user-mode work per message on each side", unit="ns", min=0, source="hackbench.c does none")

    def check_machine(self, machine: Any, path: str) -> None:
        if self.groups * (self.senders + self.receivers) > 200_000:
            raise ConfigError(f"{path}.groups", "makes more than 200000 tasks", "use fewer groups or fds")


class Messaging:
    """One messaging run on a machine."""

    def __init__(self, m: Machine, cfg: MessagingConfig) -> None:
        self.m = m
        self.cfg = cfg
        self.start_ns = -1
        self.end_ns = -1
        self.delivered = 0
        self.total = cfg.groups * cfg.senders * cfg.receivers * cfg.loops
        self.latency_hist = LogHistogram()
        self.start_wq = WaitQueue(m, "start")
        self.started = False
        self.children: list[Task] = []
        # fs/pipe.c: a ring of PIPE_DEF_BUFFERS pages; how many messages fit depends on when the
        # reader empties it (sim/channel.py, paged mode)
        self.channels = [
            [Channel(m, f"g{g}r{r}", PIPE_DEF_BUFFERS, cfg.message_bytes) for r in range(cfg.receivers)]
            for g in range(cfg.groups)
        ]
        for row in self.channels:
            for ch in row:
                ch.latency = self.latency_hist
        m.spawn(self._parent, "hackbench")

    # -- scripts
    def _wait_start(self, cpu: CPU, t: Task) -> int:
        return 0 if self.started else self.start_wq.block(t)

    def _release(self, cpu: CPU, t: Task) -> int:
        # the parent writes one byte to the wakeup pipe every child polls: pipe_write wakes the
        # pollers with wake_up_interruptible_sync_poll (fs/pipe.c), and pollwake passes the sync
        # flag on to try_to_wake_up (fs/select.c __pollwake): sync wakeups
        self.started = True
        self.start_ns = self.m.now
        return self.start_wq.wake_all(cpu, sync=True)

    def _sender(self, group: int):
        cfg = self.cfg
        sends = [Send(ch) for ch in self.channels[group]]
        work = CpuWork(cfg.work) if cfg.work else None

        def script(task: Task):
            yield Call(self._wait_start)
            for _ in range(cfg.loops):
                for op in sends:
                    if work is not None:
                        yield work
                    yield op

        def script_nowork(task: Task):  # the same without user work (one test less per message)
            yield Call(self._wait_start)
            for _ in range(cfg.loops):
                for op in sends:  # noqa: UP028 (the engine sends each step's result in)
                    yield op

        return script if work is not None else script_nowork

    def _receiver(self, group: int, r: int):
        cfg = self.cfg
        op = Recv(self.channels[group][r])
        n = cfg.senders * cfg.loops
        work = CpuWork(cfg.work) if cfg.work else None

        def script(task: Task):
            yield Call(self._wait_start)
            for _ in range(n):
                yield op
                self.delivered += 1
                if work is not None:
                    yield work

        def script_nowork(task: Task):  # the same without user work (one test less per message)
            yield Call(self._wait_start)
            for _ in range(n):
                yield op
                self.delivered += 1

        return script if work is not None else script_nowork

    def _parent(self, task: Task):
        cfg = self.cfg
        kids = []
        thread = cfg.mode == "thread"
        for g in range(cfg.groups):
            for r in range(cfg.receivers):
                kids.append((yield Spawn(self._receiver(g, r), f"recv-g{g}-{r}", wait=False, exec=False, thread=thread)))
            for s in range(cfg.senders):
                kids.append((yield Spawn(self._sender(g), f"send-g{g}-{s}", wait=False, exec=False, thread=thread)))
        self.children = kids
        yield Call(self._release)
        for k in kids:
            yield WaitChild(k)
        self.end_ns = self.m.now
        self.m.done.succeed()

    # -- results
    def progress(self) -> float:
        return self.delivered / self.total if self.total else 1.0

    def metrics(self) -> dict[str, float]:
        t = (self.end_ns - self.start_ns) if self.end_ns >= 0 else float("nan")
        sw = sum(k.nvcsw + k.nivcsw for k in self.children)
        return {
            "time_s": t / S,
            "messages": float(self.delivered),
            "messages_per_s": self.delivered / (t / S) if t and t == t else float("nan"),
            "switches_per_message": sw / self.delivered if self.delivered else float("nan"),
        }

    def latency(self) -> dict[str, LogHistogram]:
        return {"message_latency_ns": self.latency_hist}


def build(m: Machine, cfg: MessagingConfig) -> Messaging:
    return Messaging(m, cfg)


__all__ = ["MessagingConfig", "Messaging", "build", "BLOCKED"]
