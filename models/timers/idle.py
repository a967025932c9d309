"""CPU idle states and a cpuidle governor (drivers/cpuidle/).

An idle state has an exit latency and a target residency (``struct cpuidle_state``); for the
ACPI driver the target residency is the exit latency times ``latency_factor`` (2,
drivers/acpi/processor_idle.c). On idle entry the governor picks the deepest state whose
target residency fits the predicted idle duration; the prediction starts from the time to the
next timer event (``tick_nohz_get_sleep_length()``), which is why the placement of timers
(push, pull) decides how deep idle CPUs sleep and how often they wake.

Two governors, reduced to their idle-duration predictors:

* ``menu`` (drivers/cpuidle/governors/menu.c): the minimum of the sleep length scaled by
  the *correction factor* of its bucket (``which_bucket()``: < 10 us, < 100 us, < 1 ms,
  < 10 ms, < 100 ms, longer; each factor a decaying average of measured / expected idle
  time, ``RESOLUTION`` 1024, ``DECAY`` 8, starting at unity) and the *typical interval* of
  the last 8 idle periods (``get_typical_interval()``: their average when the standard
  deviation is small, <= 20 us or < average / 6, discarding the largest outliers down to 3/4
  of the samples); the exit latency may not exceed the prediction (the performance multiplier
  without iowaiters). ``menu_update()`` clamps a measured idle to the sleep length it was
  predicted from, so a factor never exceeds unity. The iowait buckets, the PM QoS latency limit
  and the tick retention (the tick kept, and the state capped by the time to it, when the
  prediction is under a tick) are not modelled.
* ``teo`` (drivers/cpuidle/governors/teo.c): the state the sleep length calls for, unless
  most of the recent idle periods were *intercepted* (ended by a non-timer wakeup before that
  state's target residency), in which case the deepest state fitting the typical intercepted
  duration. Its per-state hit/intercept metrics with decay are reduced to the last 8 periods.
"""

from __future__ import annotations

from collections import deque

from .wheel import INF

INTERVALS = 8  # menu.c: INTERVALS, teo.c: the recent-history depth
RESOLUTION = 1024  # menu.c
DECAY = 8  # menu.c
MAX_INTERESTING = 50_000_000  # menu.c: 50 ms, in ns
# tick_nohz_get_sleep_length() of a CPU with no timer is bounded by the scheduler tick's
# maximum deferment, one second (scheduler_tick_max_deferment(), kernel/sched/core.c)
MAX_SLEEP = 1_000_000_000


def which_bucket(ns: int) -> int:
    """menu.c which_bucket() without the iowait half."""
    for i, lim in enumerate((10_000, 100_000, 1_000_000, 10_000_000, 100_000_000)):
        if ns < lim:
            return i
    return 5


def typical_interval(intervals: deque[int]) -> int:
    """menu.c get_typical_interval() of v6.6-v6.9, in nanoseconds (the kernel works in us)."""
    vals = [v // 1000 for v in intervals]
    if len(vals) < INTERVALS:
        return INF
    thresh = INF
    while True:
        sel = [v for v in vals if v <= thresh]
        if not sel:
            return INF
        mx = max(sel)
        if mx == 0:
            return INF
        n = len(sel)
        avg = sum(sel) // n
        variance = sum(v * v for v in sel) // n - avg * avg
        if (avg * avg > variance * 36 and n * 4 >= INTERVALS * 3) or variance <= 400:
            return avg * 1000
        if n * 4 <= INTERVALS * 3:
            return INF  # as in the v6.6-v6.9 era (later kernels return the maximum here)
        thresh = mx - 1


class Governor:
    """Per-CPU idle-state selection."""

    def __init__(
        self, ncpus: int, names: tuple[str, ...], exit_latency: tuple[int, ...], residency: tuple[int, ...], kind: str
    ) -> None:
        self.names = names
        self.exit_latency = exit_latency
        self.residency = residency
        self.kind = kind
        self.history: list[deque[int]] = [deque(maxlen=INTERVALS) for _ in range(ncpus)]
        # menu: correction factor per sleep-length bucket, and what the last selection expected
        self.correction = [[RESOLUTION * DECAY] * 6 for _ in range(ncpus)]
        self.last_next = [0] * ncpus
        # teo: whether each recent period ended by a timer ("hit") or earlier ("intercept")
        self.intercepted: list[deque[bool]] = [deque(maxlen=INTERVALS) for _ in range(ncpus)]

    def deepest_for(self, ns: int) -> int:
        idx = 0
        for i, r in enumerate(self.residency):
            if r <= ns:
                idx = i
        return idx

    def select(self, cpu: int, sleep_length: int) -> int:
        """The state index for an idle period whose next timer event is ``sleep_length``
        away (INF if none)."""
        if sleep_length > MAX_SLEEP:
            sleep_length = MAX_SLEEP
        if self.kind == "menu":
            self.last_next[cpu] = sleep_length
            cf = self.correction[cpu][which_bucket(sleep_length)]
            predicted = (sleep_length * cf + RESOLUTION * DECAY // 2) // (RESOLUTION * DECAY)
            predicted = min(predicted, typical_interval(self.history[cpu]))
            # the performance multiplier (1 without iowaiters) bounds the exit latency by the
            # predicted idle time (interactivity_req in menu_select())
            idx = 0
            for i, (r, lat) in enumerate(zip(self.residency, self.exit_latency, strict=True)):
                if r <= predicted and lat <= predicted:
                    idx = i
            return idx
        # teo
        idx = self.deepest_for(sleep_length)
        hist = self.history[cpu]
        if idx == 0 or len(hist) < INTERVALS:
            return idx
        early = sorted(d for d, ic in zip(hist, self.intercepted[cpu], strict=True) if ic and d < self.residency[idx])
        if 2 * len(early) > len(hist):
            return min(idx, self.deepest_for(early[len(early) // 2]))
        return idx

    def record(self, cpu: int, duration: int, by_timer: bool, state: int) -> None:
        """An idle period of ``duration`` in ``state`` ended (menu_update(), teo_update())."""
        # ``duration`` ends when the wakeup arrives; the kernel's residency also includes the
        # exit latency, which menu_update() then takes off again: the same figure
        measured = duration
        if self.kind == "menu" and measured > self.last_next[cpu]:
            # menu_update(): "Make sure our coefficients do not exceed unity" (the interval
            # history gets the clamped figure too)
            measured = self.last_next[cpu]
        self.history[cpu].append(measured)
        self.intercepted[cpu].append(not by_timer)
        if self.kind == "menu":
            nxt = self.last_next[cpu]
            b = which_bucket(nxt)
            f = self.correction[cpu][b]
            f -= f // DECAY
            if nxt > 0 and measured < MAX_INTERESTING:
                f += RESOLUTION * measured // nxt
            else:
                f += RESOLUTION
            self.correction[cpu][b] = f
