"""The timer-migration hierarchy of the pull model (kernel/time/timer_migration.c, v6.9+).

CPUs are grouped ``TMIGR_CHILDREN_PER_GROUP`` (8) to a level-0 group, groups eight to a group
of the next level, up to one top group (``tmigr_init()``: ``ceil(log2(cpus) / 3)`` levels on
one NUMA node). Each group has a state: the mask of its active children and its *migrator*,
one active child (or none). A CPU going idle (``tmigr_cpu_deactivate()``) clears its bit
walking up the hierarchy as long as it was the migrator of a group that is left without an
active child (``tmigr_inactive_up()``); it hands its first *global* timer, when that comes
before its first local one, to its group as an event. A CPU leaving idle
(``tmigr_cpu_activate()``) sets its bit walking up as long as the group had no migrator
(``tmigr_active_up()``).

An event of an idle CPU is queued in its group and, while that group is inactive, in the
parent group and so on: it sits in the lowest group that still has an active child, whose
migrator chain of active CPUs expires it remotely from its tick (``tmigr_requires_handle_remote()``
then ``tmigr_handle_remote()`` in the timer softirq). When the last CPU goes idle the top group
has no migrator and the walk hands back the system's first event (``data->firstexp``): that
CPU arms its own clock event for it, wakes, and expires the others' timers.

The kernel keeps per-group timer queues updated by cmpxchg and locks; here each group's first
event is derived state (:meth:`Hierarchy.refresh`) recomputed along the path of a change, and
the *walks* (which groups a CPU's idle entry, idle exit or remote expiry touches) are what the
model charges for. The races the kernel's sequence counter and locking guard against do not
exist in a sequential simulation.
"""

from __future__ import annotations

from collections.abc import Callable

from .wheel import INF

NONE = -1  # TMIGR_NONE: no migrator


class Group:
    """A ``struct tmigr_group``: children, active mask, migrator and first event."""

    __slots__ = ("level", "index", "parent", "bit", "cpus", "groups", "active", "migrator", "next", "line_cpu")

    def __init__(self, level: int, index: int) -> None:
        self.level = level
        self.index = index
        self.parent: Group | None = None
        self.bit = 0  # this group's childmask bit in its parent (groupmask)
        self.cpus: list[int] = []  # children of a level-0 group
        self.groups: list[Group] = []  # children of an upper group
        self.active = 0  # bitmask of active children
        self.migrator = NONE
        self.next = INF  # first event (ns) queued here by inactive children (group->next_expiry)
        self.line_cpu = -1  # CPU whose cache holds the group's state line (migr_state, lock)

    @property
    def name(self) -> str:
        return f"GRP{self.level}:{self.index}"

    def __repr__(self) -> str:
        return f"<{self.name} active={self.active:#x} migrator={self.migrator}>"


class Hierarchy:
    """The groups and per-CPU state (``struct tmigr_cpu``) of one machine."""

    def __init__(self, ncpus: int, fanout: int = 8) -> None:
        if fanout < 2 or fanout & (fanout - 1):
            raise ValueError("TMIGR_CHILDREN_PER_GROUP must be a power of two >= 2")
        self.ncpus = ncpus
        self.fanout = fanout
        # tmigr_init(): levels = DIV_ROUND_UP(order_base_2(cpus_per_node), ilog2(fanout))
        order = max(0, (ncpus - 1).bit_length())
        shift = fanout.bit_length() - 1
        self.nlevels = max(1, -(-order // shift))
        self.levels: list[list[Group]] = []
        lvl0 = [Group(0, i) for i in range(-(-ncpus // fanout))]
        self.cpu_group: list[Group] = []
        self.cpu_bit: list[int] = []
        for c in range(ncpus):
            g = lvl0[c // fanout]
            self.cpu_bit.append(len(g.cpus))
            g.cpus.append(c)
            self.cpu_group.append(g)
        self.levels.append(lvl0)
        while len(self.levels[-1]) > 1:
            below = self.levels[-1]
            up = [Group(len(self.levels), i) for i in range(-(-len(below) // fanout))]
            for i, g in enumerate(below):
                p = up[i // fanout]
                g.parent = p
                g.bit = len(p.groups)
                p.groups.append(g)
            self.levels.append(up)
        self.top = self.levels[-1][0]
        # every CPU starts idle (the machine's CPUs start in the idle loop)
        self.idle = [True] * ncpus
        self.evt = [INF] * ncpus  # queued first global event (tmc->cpuevt), ns
        self.wakeup = [INF] * ncpus  # tmc->wakeup: first event to handle when last idle

    # ------------------------------------------------------------------ derived state
    def _group_next(self, g: Group) -> int:
        best = INF
        if g.level == 0:
            idle, evt = self.idle, self.evt
            for c in g.cpus:
                if idle[c] and evt[c] < best:
                    best = evt[c]
        else:
            for ch in g.groups:
                if not ch.active and ch.next < best:
                    best = ch.next
        return best

    def refresh(self, cpu: int) -> None:
        """Recompute the first events of every group on ``cpu``'s path to the top."""
        g: Group | None = self.cpu_group[cpu]
        while g is not None:
            g.next = self._group_next(g)
            g = g.parent

    def path(self, cpu: int) -> list[Group]:
        out = []
        g: Group | None = self.cpu_group[cpu]
        while g is not None:
            out.append(g)
            g = g.parent
        return out

    # ------------------------------------------------------------------ the three walks
    def activate(self, cpu: int) -> list[Group]:
        """tmigr_cpu_activate(): the groups whose state the walk changes."""
        self.idle[cpu] = False
        self.evt[cpu] = INF
        self.wakeup[cpu] = INF
        touched = []
        g: Group | None = self.cpu_group[cpu]
        bit = self.cpu_bit[cpu]
        while g is not None:
            touched.append(g)
            done = True
            if g.migrator == NONE:
                g.migrator = bit
                done = False  # the group became active: propagate to the parent
            g.active |= 1 << bit
            if done:
                break
            bit = g.bit
            g = g.parent
        self.refresh(cpu)
        return touched

    def deactivate(self, cpu: int, global_next: int) -> tuple[int, list[Group]]:
        """tmigr_cpu_deactivate(global_next): returns (firstexp, touched groups). ``firstexp``
        is the system's first global event when this CPU was the last active one (it must
        wake for it), else INF."""
        self.idle[cpu] = True
        self.evt[cpu] = global_next
        touched = []
        g: Group | None = self.cpu_group[cpu]
        bit = self.cpu_bit[cpu]
        reached_top_idle = False
        while g is not None:
            touched.append(g)
            g.active &= ~(1 << bit)
            done = True
            if g.migrator == bit:
                act = g.active
                if act:
                    g.migrator = (act & -act).bit_length() - 1  # find_first_bit
                else:
                    g.migrator = NONE
                    done = False
            if done:
                break
            if g.parent is None:
                reached_top_idle = True
                break
            bit = g.bit
            g = g.parent
        self.refresh(cpu)
        first = self.top.next if reached_top_idle else INF
        self.wakeup[cpu] = first
        return first, touched

    def update_idle_event(self, cpu: int, global_next: int) -> list[Group]:
        """After a remote expiry: the idle CPU's new first global event (walk_groups with
        tmigr_new_timer_up from tmigr_handle_remote_cpu()); returns the groups walked (up to
        the first active one)."""
        self.evt[cpu] = global_next
        self.refresh(cpu)
        touched = []
        g: Group | None = self.cpu_group[cpu]
        while g is not None:
            touched.append(g)
            if g.active:
                break
            g = g.parent
        return touched

    # ------------------------------------------------------------------ remote expiry
    def requires_handle_remote(self, cpu: int, now: int) -> bool:
        """tmigr_requires_handle_remote() for an active CPU (checked from its tick)."""
        if self.idle[cpu]:
            return now >= self.wakeup[cpu]
        g: Group | None = self.cpu_group[cpu]
        bit = self.cpu_bit[cpu]
        while g is not None:
            if g.migrator != bit and g.migrator != NONE:
                return False
            if g.next <= now:
                return True
            bit = g.bit
            g = g.parent
        return False

    def first_expired(self, g: Group, now: int) -> int:
        """The idle CPU owning ``g``'s first event if it is due, else -1."""
        if g.next > now:
            return -1
        while g.level > 0:
            best: Group | None = None
            for ch in g.groups:
                if not ch.active and ch.next <= now and (best is None or ch.next < best.next):
                    best = ch
            if best is None:
                return -1
            g = best
        idle, evt = self.idle, self.evt
        owner, when = -1, INF
        for c in g.cpus:
            if idle[c] and evt[c] <= now and evt[c] < when:
                owner, when = c, evt[c]
        return owner

    def handle_remote(self, cpu: int, now: int, expire: Callable[[int], None]) -> list[Group]:
        """tmigr_handle_remote(): walk up while ``cpu`` is (on the way to) the migrator, and
        expire every due event in those groups with ``expire(remote_cpu)``, which must run the
        remote CPU's due global timers and requeue its next event (:meth:`update_idle_event`).
        Returns the groups checked."""
        checked = []
        g: Group | None = self.cpu_group[cpu]
        bit = self.cpu_bit[cpu]
        while g is not None:
            if g.migrator != bit and g.migrator != NONE:
                break
            checked.append(g)
            for _ in range(self.ncpus + 1):
                x = self.first_expired(g, now)
                if x < 0:
                    break
                expire(x)
                assert not (self.idle[x] and self.evt[x] <= now), "remote expiry made no progress"
            bit = g.bit
            g = g.parent
        self.wakeup[cpu] = INF
        return checked

    # ------------------------------------------------------------------ invariants (tests)
    def check(self) -> None:
        """Assert the state invariants: a group has a migrator iff it has an active child,
        the migrator is an active child, and a group is active in its parent iff it has an
        active child."""
        for lvl in self.levels:
            for g in lvl:
                assert (g.migrator == NONE) == (g.active == 0), g
                if g.migrator != NONE:
                    assert g.active >> g.migrator & 1, g
                if g.level == 0:
                    for c in g.cpus:
                        assert bool(g.active >> self.cpu_bit[c] & 1) == (not self.idle[c]), (g, c)
                if g.parent is not None:
                    assert bool(g.parent.active >> g.bit & 1) == bool(g.active), g
