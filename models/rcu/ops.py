"""The RCU primitives a task script yields (handled by :class:`models.rcu.tree.Rcu`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sim.ops import Op

if TYPE_CHECKING:
    from sim.machine import CPU


class CallRcu(Op):
    """call_rcu(): queue a callback that runs after a grace period.

    ``cost`` is the CPU time its invocation takes (None: the mechanism's ``cb_invoke`` cost);
    ``fn(cpu)`` is an optional effect run at invocation; ``lazy`` asks for call_rcu()'s lazy
    behaviour under CONFIG_RCU_LAZY (None: lazy exactly when the kernel's rcu.lazy knob is on,
    as call_rcu() is; False: call_rcu_hurry()).
    """

    __slots__ = ("cost", "fn", "lazy", "count")

    def __init__(
        self, cost: int | None = None, fn: Callable[[CPU], None] | None = None, lazy: bool | None = None, count: int = 1
    ) -> None:
        if count < 1:
            raise ValueError("count must be >= 1")
        self.cost = cost
        self.fn = fn
        self.lazy = lazy
        self.count = count  # queue this many identical callbacks at once (e.g. one per freed mount)


class SynchronizeRcu(Op):
    """synchronize_rcu(): block until a full grace period has elapsed."""

    __slots__ = ()


class SynchronizeRcuExpedited(Op):
    """synchronize_rcu_expedited(): force a grace period by IPIs (or stop-machine, v3.13)."""

    __slots__ = ()


class RcuBarrier(Op):
    """rcu_barrier(): wait until every callback queued before it has been invoked."""

    __slots__ = ()


class RcuReadLock(Op):
    """rcu_read_lock(): enter a read-side critical section (nests)."""

    __slots__ = ()


class RcuReadUnlock(Op):
    """rcu_read_unlock(): leave a read-side critical section."""

    __slots__ = ()
