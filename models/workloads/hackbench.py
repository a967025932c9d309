"""``hackbench N`` as it runs: N groups of 20 receivers and 20 senders (processes) exchanging
100-byte messages over AF_UNIX stream socketpairs (or pipes, ``hackbench -pipe``: :class:`Pipe`),
with the kernel locks each message takes.

Structure (hackbench.c, Rusty Russell 2001 / Ingo Molnar 2007; ``perf bench sched messaging``):
per group one ``socketpair(AF_UNIX, SOCK_STREAM)`` per receiver; the receiver reads end B, and
all 20 senders of the group write end A of every pair, so the 20 senders share one sending
socket per receiver. Each sender writes ``loops`` rounds of one message to every receiver in
order 0..19; each receiver reads ``20 * loops`` messages, one per ``read()`` (a stream read
stops at the end of an skb and never glues messages of different writers). The parent forks
everyone, releases them together (the ``poll()`` on the wake-up socket) and waits for all:
the time reported is from the release to the last child reaped.

The kernel path of one message (2.6.24 ``net/unix/af_unix.c`` unix_stream_sendmsg /
unix_stream_recvmsg / unix_stream_data_wait, ``net/core/sock.c`` sock_alloc_send_pskb /
sock_def_readable / sock_wfree, ``fs/read_write.c`` vfs_write, ``fs/dnotify.c``
dnotify_parent) and which locks are modelled as locks:

* ``unix_state`` = ``unix_sk(B)->lock`` (spinlock_t), taken by every sender to queue the skb
  (skb_queue_tail) and by the receiver to dequeue it and around its sleep: 21 tasks, every
  message, both sides. The hottest lock; the skb queue's own lock nests inside it and is
  therefore never contended (its cost is part of the critical section).
* ``d_lock`` = the dentry lock of A's socket inode, taken by ``dnotify_parent`` from
  ``fsnotify_modify`` after every write while ``dir_notify_enable`` (default on): the 20
  senders of the pair, tiny critical section.
* ``sk_callback_lock`` of B (rwlock_t, read side) in ``sock_def_readable``: the 20 senders;
  readers share it in vanilla, and under -rt it is an rt-mutex when rwlocks are exclusive
  (``kernel.locks.rwlock``).
* ``wq_lock`` = the wait-queue lock of B's ``sk_sleep`` (spinlock_t): the receiver's
  prepare_to_wait/finish_wait and a sender's wake_up when the receiver sleeps; and of A's
  ``sk_sleep`` for senders that wait for send-buffer space and the receiver that wakes them.
* ``slab`` = the -rt per-CPU slab lock (DEFINE_PER_CPU_LOCKED ``slab_irq_locks``, a sleeping
  spinlock_t taken on the CPU the task runs on), taken once **per slab call**: an skb is two
  objects, so a message takes it four times. ``__alloc_skb`` (net/core/skbuff.c) calls
  ``kmem_cache_alloc_node(skbuff_head_cache)`` and then ``kmalloc_node_track_caller`` for the
  data; ``__kfree_skb`` runs the destructor (sock_wfree), then ``skb_release_data`` ->
  ``kfree(skb->head)`` and ``kfree_skbmem`` -> ``kmem_cache_free(skbuff_head_cache)``; each of
  these slab entry points brackets its work with ``slab_irq_save``/``slab_irq_restore``
  (mm/slab.c of the -rt patch: get/put_cpu_var_locked(slab_irq_locks)), so the lock is
  released and taken again between the two objects. Under strict handoff that matters: a
  releaser that finds waiters makes the first one pending owner and, a few instructions later,
  asks for the same lock again and must queue behind it. In vanilla the same sections run with
  interrupts off, a per-CPU spinning section that never contends.

* ``slab_list_lock`` = ``l3->list_lock`` of the two slab caches an skb uses
  (skbuff_head_cache, and the kmalloc cache of its data), one per cache on a non-NUMA machine:
  a CPU's array of free objects is refilled from the cache (cache_alloc_refill) when an
  allocation finds it empty and flushed to it (cache_flusharray) when a free finds it full,
  ``batchcount`` objects at a time, under this global spinlock_t, nested inside the per-CPU
  slab lock (mm/slab.c: enable_cpucache limits 120 / 54 objects by size, batchcount =
  (limit + 1) / 2, a shared array of 8 batches). Senders allocate on their CPUs and receivers
  free on theirs, so arrays empty and fill all the time.

Locks only ever taken by one task are never contended and appear as their fast-path cost in
the path: the receiver's ``readlock`` mutex, B's dentry lock (fsnotify_access after a read)
and A's callback lock (unix_write_space from the receiver's sock_wfree). The run-queue lock is
a raw spinlock in both kernels; its cost is inside the substrate's wakeup and switch costs.

Flow control (net/core/sock.c): every skb charges its ``truesize`` to A's ``sk_wmem_alloc``;
a sender sleeps on A's wait queue while it is at least ``sk_sndbuf`` (SK_WMEM_MAX) and the
receiver's ``unix_write_space`` wakes all of them once it has drained below a quarter
(unix_writable).

The same script runs on vanilla and -rt kernels: what a lock does when contended is the lock
model's business (``models/locks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sim.channel import WaitQueue
from sim.config import knob
from sim.errors import ConfigError
from sim.machine import CPU, Machine
from sim.ops import BLOCKED, Call, CpuWork, Script, Spawn, WaitChild
from sim.stats import FLUSH, LogHistogram
from sim.task import Task
from sim.units import S

from ..locks.core import Lock, LockModel, PerCpuLock, Unlock

PATH = "split of collector item unix_socket_message (cross_cpu_stream, 866 ns/message/side on the dev machine) "
PATH += "along the path of docs/kernel/rtmutex-hackbench.md §6 (prior); scaled by cost_scale"
DEFAULT_LOOPS = 100  # hackbench.c


@dataclass(frozen=True)
class HackbenchConfig:
    """``hackbench GROUPS`` over sockets or pipes in process mode, and the costs of its kernel path."""

    groups: int = knob(10, doc="hackbench's N: groups of fds receivers and fds senders", min=1, max=1000, source="hackbench.c")
    fds: int = knob(20, doc="receivers (and senders) per group", min=1, max=200, source="hackbench.c num_fds")
    loops: int = knob(DEFAULT_LOOPS, doc="rounds each sender writes to every receiver", min=1, max=100_000, source="hackbench.c")
    message_bytes: int = knob(100, doc="bytes per message", min=1, max=4096, source="hackbench.c DATASIZE")
    transport: Literal["socket", "pipe"] = knob(
        "socket",
        doc="socketpair(AF_UNIX, SOCK_STREAM) (hackbench's default) or pipe() (hackbench -pipe: the pipe's i_mutex "
        "and wait queue instead of the socket locks, no skb and so no slab lock)",
        source="hackbench.c; fs/pipe.c (2.6.24)",
    )
    mode: Literal["process"] = knob(
        "process", doc="children are processes (hackbench's default; thread mode is not modelled)", source="hackbench.c"
    )
    skb_overhead: int = knob(
        240,
        doc="sizeof(struct sk_buff): truesize = SKB_DATA_ALIGN(bytes) + this; SK_WMEM_MAX = (this + 256) * 256",
        min=0,
        max=4096,
        source="include/linux/skbuff.h, net/core/sock.c (2.6.24, x86_64; size unverified)",
    )
    cost_scale: float = knob(
        1.0,
        doc="multiplies every path cost below (the measured machine's speed on this path relative to the dev machine)",
        min=0.01,
        max=100.0,
        source="fitted to hackbench-rt-2008 vanilla (calibration/fits/hackbench-rt-2008.toml)",
    )
    shinfo_bytes: int = knob(
        320,
        doc="sizeof(struct skb_shared_info): the data buffer is kmalloc(SKB_DATA_ALIGN(bytes) + this)",
        min=0,
        max=4096,
        source="include/linux/skbuff.h (2.6.24, x86_64; size unverified)",
    )
    send_entry: int = knob(150, doc="write(): vfs_write, unix_stream_sendmsg prologue, scm_send", unit="ns", min=0, source=PATH)
    slab_alloc: int = knob(
        100,
        doc="the skb's two slab allocations from the CPU's arrays (half under each of the two slab-lock sections)",
        unit="ns",
        min=0,
        source=PATH,
    )
    slab_batch_object: int = knob(
        10,
        doc="moving one object between a CPU's array and its cache under l3->list_lock (refill or flush)",
        unit="ns",
        min=0,
        source=PATH,
    )
    copy_in: int = knob(80, doc="copying the message from user space, skb_put, credentials", unit="ns", min=0, source=PATH)
    queue_tail: int = knob(40, doc="skb_queue_tail under unix_state_lock", unit="ns", min=0, source=PATH)
    readable: int = knob(30, doc="sock_def_readable's checks under sk_callback_lock", unit="ns", min=0, source=PATH)
    dnotify: int = knob(20, doc="dnotify_parent under the dentry lock", unit="ns", min=0, source=PATH)
    send_exit: int = knob(80, doc="vfs_write tail and return", unit="ns", min=0, source=PATH)
    recv_entry: int = knob(
        150, doc="read(): vfs_read, unix_stream_recvmsg prologue, readlock fast path", unit="ns", min=0, source=PATH
    )
    dequeue: int = knob(40, doc="skb_dequeue under unix_state_lock", unit="ns", min=0, source=PATH)
    copy_out: int = knob(100, doc="copying the message to user space, credentials", unit="ns", min=0, source=PATH)
    write_space: int = knob(40, doc="sock_wfree and unix_write_space", unit="ns", min=0, source=PATH)
    slab_free: int = knob(
        80,
        doc="the skb's two slab frees into the CPU's arrays (half under each of the two slab-lock sections)",
        unit="ns",
        min=0,
        source=PATH,
    )
    recv_exit: int = knob(80, doc="readlock unlock, fsnotify_access, return", unit="ns", min=0, source=PATH)
    wait_queue: int = knob(
        60, doc="prepare_to_wait or finish_wait, or a wake_up's walk, under the wait-queue lock", unit="ns", min=0, source=PATH
    )

    def check_machine(self, machine: Any, path: str) -> None:
        if self.groups * self.fds * 2 > 100_000:
            raise ConfigError(f"{path}.groups", "makes more than 100000 tasks", "use fewer groups or fds")

    def scaled(self, ns: int) -> int:
        return int(round(ns * self.cost_scale))

    @property
    def truesize(self) -> int:
        return -(-self.message_bytes // 64) * 64 + self.skb_overhead

    @property
    def sndbuf(self) -> int:
        return (self.skb_overhead + 256) * 256

    @property
    def data_bytes(self) -> int:
        """The kmalloc size class of the skb's data (SKB_DATA_ALIGN(bytes) + shared info)."""
        size = -(-self.message_bytes // 64) * 64 + self.shinfo_bytes
        cls = 32
        while cls < size:
            cls *= 2
        return cls


def slab_limit(object_bytes: int) -> int:
    """mm/slab.c enable_cpucache: objects a CPU's array holds, by object size."""
    if object_bytes > 131072:
        return 1
    if object_bytes > 4096:
        return 8
    if object_bytes > 1024:
        return 24
    if object_bytes > 256:
        return 54
    return 120


class SlabCache:
    """One SLAB cache: a free-object array per CPU (limit, batchcount), the cache's shared
    array (8 batches) and its ``l3->list_lock`` (mm/slab.c ____cache_alloc, cache_alloc_refill,
    __cache_free, cache_flusharray)."""

    __slots__ = ("name", "limit", "batch", "avail", "shared", "shared_cap", "list_lock", "refills", "flushes")

    def __init__(self, name: str, object_bytes: int, cpus: int, locks: LockModel) -> None:
        self.name = name
        self.limit = slab_limit(object_bytes)
        self.batch = (self.limit + 1) // 2
        self.avail = [0] * cpus
        self.shared = 0
        self.shared_cap = 8 * self.batch
        self.list_lock = locks.new_lock("spinlock", f"{name}.list_lock", "slab_list_lock")
        self.refills = 0
        self.flushes = 0

    def refill(self, cpu: int) -> None:
        """cache_alloc_refill: a batch from the shared array, or from the slabs."""
        self.shared -= min(self.shared, self.batch)
        self.avail[cpu] += self.batch
        self.refills += 1

    def flush(self, cpu: int) -> None:
        """cache_flusharray: a batch to the shared array if it has room, else to the slabs."""
        if self.shared + self.batch <= self.shared_cap:
            self.shared += self.batch
        self.avail[cpu] -= self.batch
        self.flushes += 1


class UnixPair:
    """One socketpair used one way: the group's senders write end A, one receiver reads end B."""

    __slots__ = (
        "queue", "wmem", "r_waiting", "r_woken", "r_blocked", "receiver", "senders_wq",
        "state_lock", "d_lock", "callback_lock", "wq_lock_b", "wq_lock_a",
    )  # fmt: skip

    def __init__(self, m: Machine, locks: LockModel, name: str) -> None:
        self.queue: list[int] = []  # send times of the skbs in B's receive queue (a FIFO)
        self.wmem = 0
        self.r_waiting = False  # the receiver is on B's wait queue (prepare_to_wait done)
        self.r_woken = False  # ... and a wake_up removed it since
        self.r_blocked = False  # ... and it is asleep in schedule()
        self.receiver: Task | None = None
        self.senders_wq = WaitQueue(m, f"{name}.A.sk_sleep")
        self.state_lock = locks.new_lock("spinlock", f"{name}.B.unix_state", "unix_state")
        self.d_lock = locks.new_lock("spinlock", f"{name}.A.d_lock", "d_lock")
        self.callback_lock = locks.new_lock("rwlock", f"{name}.B.sk_callback_lock", "sk_callback_lock")
        self.wq_lock_b = locks.new_lock("spinlock", f"{name}.B.wq_lock", "wq_lock")
        self.wq_lock_a = locks.new_lock("spinlock", f"{name}.A.wq_lock", "wq_lock")


PIPE_BUFFERS = 16  # include/linux/pipe_fs_i.h (2.6.24): pages a pipe holds
PAGE_SIZE = 4096


class PipeWait:
    """A wait queue used with prepare_to_wait / schedule / finish_wait (kernel/wait.c): a task
    joins under the queue's lock, drops its other locks, then sleeps unless a wake_up removed it
    meanwhile; every wake_up wakes every waiter (none is exclusive here)."""

    __slots__ = ("m", "waiting", "blocked")

    def __init__(self, m: Machine) -> None:
        self.m = m
        self.waiting: dict[Task, None] = {}  # on the list (prepare_to_wait), in arrival order
        self.blocked: set[Task] = set()  # ... and asleep in schedule()

    def steps(self, cost: int) -> tuple[Callable[[CPU, Task], int], Callable[[CPU, Task], int]]:
        """prepare_to_wait and finish_wait as Call/Lock steps, each ``cost`` under the queue's lock."""

        def prepare(cpu: CPU, t: Task) -> int:
            self.waiting[t] = None
            return cost

        def finish(cpu: CPU, t: Task) -> int:
            self.waiting.pop(t, None)
            return cost

        return prepare, finish

    def sleep(self, t: Task) -> int:
        if t not in self.waiting:  # woken since prepare_to_wait
            return 0
        self.blocked.add(t)
        return BLOCKED

    def wake_all(self, cpu: CPU) -> int:
        """__wake_up_common with autoremove_wake_function: take every waiter off the list."""
        cost = 0
        for t in list(self.waiting):
            del self.waiting[t]
            if t in self.blocked:
                self.blocked.discard(t)
                cost += self.m.wake(t, cpu)
        return cost


class Pipe:
    """One pipe used one way: the group's senders write, one receiver reads (fs/pipe.c of 2.6.24,
    pipe_write / pipe_read / pipe_wait). Both ends are files on the same pipefs dentry, so the
    senders and the receiver share its ``d_lock`` (fsnotify after every read and write)."""

    __slots__ = ("bufs", "msgs", "wait", "receiver", "mutex", "wq_lock", "d_lock", "per_page")

    def __init__(self, m: Machine, locks: LockModel, name: str, message_bytes: int) -> None:
        self.bufs: list[int] = []  # messages in each page buffer, oldest first
        self.msgs: list[int] = []  # send times, a FIFO
        self.wait = PipeWait(m)  # pipe->wait: readers and writers alike
        self.receiver: Task | None = None
        self.per_page = max(1, PAGE_SIZE // message_bytes)  # a small write merges into the last page if it fits
        self.mutex = locks.new_lock("mutex", f"{name}.i_mutex", "pipe_mutex")
        self.wq_lock = locks.new_lock("spinlock", f"{name}.pipe_wait", "wq_lock")
        self.d_lock = locks.new_lock("spinlock", f"{name}.d_lock", "d_lock")

    def has_room(self) -> bool:
        return bool(self.bufs and self.bufs[-1] < self.per_page) or len(self.bufs) < PIPE_BUFFERS


class Hackbench:
    """One run of hackbench.c (process mode, sockets or pipes) on a machine with the lock models
    installed: the parent, the receivers and senders of every group, their socket pairs and
    the two slab caches their skbs come from."""

    def __init__(self, m: Machine, cfg: HackbenchConfig, locks: LockModel) -> None:
        self.m = m
        self.cfg = cfg
        self.locks = locks
        self.start_ns = -1
        self.end_ns = -1
        self.delivered = 0
        self.total = cfg.groups * cfg.fds * cfg.fds * cfg.loops
        self.latency_hist = LogHistogram()
        self.start_wq = WaitQueue(m, "hackbench.wake")
        self.started = False
        self.children: list[Task] = []
        self.busy0 = self.busy1 = 0
        pipe = cfg.transport == "pipe"
        self.pairs = [] if pipe else [[UnixPair(m, locks, f"g{g}r{r}") for r in range(cfg.fds)] for g in range(cfg.groups)]
        self.pipes = (
            [[Pipe(m, locks, f"g{g}r{r}", cfg.message_bytes) for r in range(cfg.fds)] for g in range(cfg.groups)] if pipe else []
        )
        self.slab: PerCpuLock = locks.new_percpu_lock("spinlock", "slab", "slab")
        self.slab_cpu = {lk: i for i, lk in enumerate(self.slab.locks)}
        ncpu = len(m.cpus)
        self.caches = (
            SlabCache("skbuff_head_cache", cfg.skb_overhead, ncpu, locks),
            SlabCache(f"size-{cfg.data_bytes}", cfg.data_bytes, ncpu, locks),
        )
        self.batch_ops = {
            c: (
                Lock(c.list_lock, cfg.scaled(cfg.slab_batch_object * c.batch)),
                Unlock(c.list_lock),
            )
            for c in self.caches
        }
        self.pair_ops: dict[UnixPair, tuple[Any, ...]] = {}  # a pair's send steps (_sender)
        self.alloc_ops: list[tuple[SlabCache, Lock, Unlock]] = []  # a sender's two slab allocations
        m.spawn(self._parent, "hackbench")

    # -- start and end
    def _wait_start(self, cpu: CPU, t: Task) -> int:
        return 0 if self.started else self.start_wq.block(t)

    def _release(self, cpu: CPU, t: Task) -> int:
        self.started = True
        self.start_ns = self.m.now
        self.busy0 = self._busy_ns()
        return self.start_wq.wake_all(cpu)

    def _busy_ns(self) -> int:
        return sum(c["user_ns"] + c["kernel_ns"] + c["irq_ns"] + c["softirq_ns"] + c["switch_ns"] for c in self.m.cpu_stats())

    def _parent(self, task: Task) -> Script:
        cfg = self.cfg
        kids = []
        for g in range(cfg.groups):
            for r in range(cfg.fds):
                rscript = self._pipe_receiver(self.pipes[g][r]) if self.pipes else self._receiver(self.pairs[g][r])
                kids.append((yield Spawn(rscript, f"recv-g{g}-{r}", wait=False, exec=False)))
            for s in range(cfg.fds):
                sscript = self._pipe_sender(self.pipes[g]) if self.pipes else self._sender(self.pairs[g])
                kids.append((yield Spawn(sscript, f"send-g{g}-{s}", wait=False, exec=False)))
        self.children = kids
        yield Call(self._release)
        for k in kids:
            yield WaitChild(k)
        self.end_ns = self.m.now
        self.busy1 = self._busy_ns()
        self.m.done.succeed()

    # -- a sender
    def _sender(self, pairs: list[UnixPair]):  # type: ignore[no-untyped-def]
        cfg, m = self.cfg, self.m
        env = m.env
        sc = cfg.scaled
        truesize, sndbuf = cfg.truesize, cfg.sndbuf
        entry = CpuWork(m.costs.syscall + sc(cfg.send_entry), user=False)
        slab = self.slab
        alloc_ns, copy_ns, tail_ns = sc(cfg.slab_alloc), sc(cfg.copy_in), sc(cfg.queue_tail)
        readable_ns, dn_ns, exit_ns, wq_ns = sc(cfg.readable), sc(cfg.dnotify), sc(cfg.send_exit), sc(cfg.wait_queue)

        def per_pair(p: UnixPair) -> tuple[Any, ...]:
            def charge(cpu: CPU, t: Task) -> int:  # skb_set_owner_w, after the two allocations
                p.wmem += truesize
                return copy_ns

            def queue_tail(cpu: CPU, t: Task) -> int:
                p.queue.append(env._now)  # m.now without its two property calls (per message)
                return tail_ns

            def wake_receiver(cpu: CPU, t: Task) -> int:  # __wake_up -> autoremove_wake_function
                cost = wq_ns
                if p.r_waiting:
                    p.r_waiting = False
                    p.r_woken = True
                    if p.r_blocked:
                        p.r_blocked = False
                        assert p.receiver is not None
                        cost += m.wake(p.receiver, cpu)
                return cost

            def wait_wmem(cpu: CPU, t: Task) -> int:  # sock_wait_for_wmem: sleep if still no room
                if p.wmem < sndbuf:
                    return 0
                return p.senders_wq.block(t)

            return (
                Lock(p.wq_lock_a, wq_ns),
                Unlock(p.wq_lock_a),
                Call(wait_wmem),
                Call(charge),
                Lock(p.state_lock, queue_tail),
                Unlock(p.state_lock),
                Lock(p.callback_lock, readable_ns),
                Lock(p.wq_lock_b, wake_receiver),
                Unlock(p.wq_lock_b),
                Unlock(p.callback_lock),
                Lock(p.d_lock, dn_ns),
                Unlock(p.d_lock, exit_ns),
            )

        # A pair's steps depend on the pair only: the group's senders share them (ops and
        # their callbacks hold no per-task state), built once rather than once per sender.
        cache = self.pair_ops
        plan = []
        for p in pairs:
            ops = cache.get(p)
            if ops is None:
                ops = cache[p] = per_pair(p)
            plan.append((p, ops))
        slab_cpu, batch_ops = self.slab_cpu, self.batch_ops
        if not self.alloc_ops:
            halves = (alloc_ns // 2, alloc_ns - alloc_ns // 2)
            self.alloc_ops = [(c, Lock(slab, h), Unlock(slab)) for c, h in zip(self.caches, halves, strict=True)]
        slab_ops = self.alloc_ops

        def script(task: Task) -> Script:
            yield Call(self._wait_start)
            for _ in range(cfg.loops):
                for p, ops in plan:
                    wq_l, wq_u, wait, charge_op, st_l, st_u, cb_l, wb_l, wb_u, cb_u, d_l, d_u = ops
                    yield entry
                    while p.wmem >= sndbuf:  # sock_alloc_send_pskb: no room, wait on A's sk_sleep
                        yield wq_l
                        yield wq_u
                        yield wait
                    for c, slab_l, slab_u in slab_ops:  # __alloc_skb: the head, then the data, one slab call each
                        yield slab_l
                        x = slab_cpu[slab.held[task.tid]]
                        if not c.avail[x]:  # ____cache_alloc: refill an empty array first
                            lk, ulk = batch_ops[c]
                            yield lk
                            c.refill(x)
                            yield ulk
                        c.avail[x] -= 1
                        yield slab_u
                    yield charge_op
                    yield st_l
                    yield st_u
                    yield cb_l
                    if p.r_waiting:  # waitqueue_active(B's sk_sleep)
                        yield wb_l
                        yield wb_u
                    yield cb_u
                    yield d_l
                    yield d_u

        return script

    # -- a receiver
    def _receiver(self, p: UnixPair):  # type: ignore[no-untyped-def]
        cfg, m = self.cfg, self.m
        env = m.env
        sc = cfg.scaled
        truesize, sndbuf = cfg.truesize, cfg.sndbuf
        n = cfg.fds * cfg.loops
        entry = CpuWork(m.costs.syscall + sc(cfg.recv_entry), user=False)
        slab = self.slab
        dq_ns, copy_ns, ws_ns = sc(cfg.dequeue), sc(cfg.copy_out), sc(cfg.write_space)
        free_ns, exit_ns, wq_ns = sc(cfg.slab_free), sc(cfg.recv_exit), sc(cfg.wait_queue)
        got = [False]
        lat = self.latency_hist
        lat_pending = lat.pending

        def dequeue(cpu: CPU, t: Task) -> int:
            if p.queue:
                sent = p.queue.pop(0)
                # lat.add(env._now - sent), inlined (an int; see LogHistogram.pending)
                lat_pending.append(env._now - sent)
                if len(lat_pending) >= FLUSH:
                    lat.flush()
                got[0] = True
            else:
                got[0] = False
            return dq_ns

        def wfree(cpu: CPU, t: Task) -> int:  # kfree_skb -> sock_wfree on A
            p.wmem -= truesize
            self.delivered += 1
            return copy_ns + ws_ns

        def prepare(cpu: CPU, t: Task) -> int:  # prepare_to_wait(B's sk_sleep)
            p.r_waiting = True
            p.r_woken = False
            return wq_ns

        def finish(cpu: CPU, t: Task) -> int:  # finish_wait: still on the list, take it off
            p.r_waiting = False
            return wq_ns

        def sleep(cpu: CPU, t: Task) -> int:  # schedule_timeout, unless woken since prepare_to_wait
            if p.r_woken:
                return 0
            p.r_blocked = True
            return BLOCKED

        def wake_senders(cpu: CPU, t: Task) -> int:  # unix_write_space: wake_up_interruptible_sync
            return wq_ns + p.senders_wq.wake_all(cpu, sync=True)

        st_l, st_u = Lock(p.state_lock, dequeue), Unlock(p.state_lock)
        st_lock, st_u_copy = Lock(p.state_lock), Unlock(p.state_lock, wfree)
        relock = Unlock(p.state_lock)  # then mutex_lock(readlock) again (fast path) and retry
        wb_prep, wb_fin, wb_u = Lock(p.wq_lock_b, prepare), Lock(p.wq_lock_b, finish), Unlock(p.wq_lock_b)
        op_sleep = Call(sleep)
        wa_l, wa_u = Lock(p.wq_lock_a, wake_senders), Unlock(p.wq_lock_a)
        exit_op = CpuWork(exit_ns, user=False)
        slab_cpu, batch_ops = self.slab_cpu, self.batch_ops
        halves = (free_ns // 2, free_ns - free_ns // 2)
        # skb_release_data frees the data first, kfree_skbmem the head after it
        free_ops = [(c, Lock(slab, h), Unlock(slab)) for c, h in zip(reversed(self.caches), halves, strict=True)]

        def script(task: Task) -> Script:
            p.receiver = task
            yield Call(self._wait_start)
            for _ in range(n):
                yield entry
                while True:
                    yield st_l
                    if got[0]:
                        yield st_u_copy
                        break
                    yield st_u
                    # unix_stream_data_wait
                    yield st_lock
                    while True:
                        yield wb_prep
                        yield wb_u
                        if p.queue:
                            break
                        yield st_u
                        yield op_sleep
                        yield st_lock
                    if p.r_waiting:
                        yield wb_fin
                        yield wb_u
                    yield relock
                if p.senders_wq.waiters and p.wmem * 4 <= sndbuf:  # unix_writable and waitqueue_active
                    yield wa_l
                    yield wa_u
                for c, slab_l, slab_u in free_ops:  # __kfree_skb: kfree(data), then kmem_cache_free(head)
                    yield slab_l
                    x = slab_cpu[slab.held[task.tid]]
                    if c.avail[x] >= c.limit:  # __cache_free: flush a full array first
                        lk, ulk = batch_ops[c]
                        yield lk
                        c.flush(x)
                        yield ulk
                    c.avail[x] += 1
                    yield slab_u
                yield exit_op

        return script

    # -- pipes (hackbench -pipe)
    def _pipe_sender(self, pipes: list[Pipe]):  # type: ignore[no-untyped-def]
        """pipe_write: under the pipe's i_mutex, merge the message into the last page or start a
        new one; if all PIPE_BUFFERS pages are full, pipe_wait (prepare_to_wait, drop the mutex,
        sleep, finish_wait, take it again). After the mutex, wake_up_interruptible_sync of
        pipe->wait (its lock is taken after every write, waiters or not), then vfs_write's
        fsnotify_modify (the dentry lock)."""
        cfg, m = self.cfg, self.m
        env = m.env
        sc = cfg.scaled
        entry = CpuWork(m.costs.syscall + sc(cfg.send_entry), user=False)
        copy_ns, tail_ns, dn_ns, exit_ns, wq_ns = (
            sc(cfg.copy_in),
            sc(cfg.queue_tail),
            sc(cfg.dnotify),
            sc(cfg.send_exit),
            sc(cfg.wait_queue),
        )

        def per_pipe(p: Pipe) -> tuple[Any, ...]:
            wrote = [False]

            def write(cpu: CPU, t: Task) -> int:  # under i_mutex: copy into a page buffer
                if not p.has_room():
                    wrote[0] = False
                    return 0
                if p.bufs and p.bufs[-1] < p.per_page:
                    p.bufs[-1] += 1
                else:
                    p.bufs.append(1)
                p.msgs.append(env._now)
                wrote[0] = True
                return copy_ns + tail_ns

            prepare, finish = p.wait.steps(wq_ns)

            def wake(cpu: CPU, t: Task) -> int:
                return wq_ns + p.wait.wake_all(cpu)

            ops = (
                Lock(p.mutex, write),
                Lock(p.wq_lock, prepare),
                Unlock(p.wq_lock),
                Unlock(p.mutex),
                Call(lambda cpu, t: p.wait.sleep(t)),
                Lock(p.wq_lock, finish),
                Lock(p.mutex),
                Call(write),
                Lock(p.wq_lock, wake),
                Lock(p.d_lock, dn_ns),
                Unlock(p.d_lock, exit_ns),
            )
            return ops, wrote

        plan = [per_pipe(p) for p in pipes]

        def script(task: Task) -> Script:
            yield Call(self._wait_start)
            for _ in range(cfg.loops):
                for ops, wrote in plan:
                    lock_write, wq_prep, wq_u, mu_u, sleep, wq_fin, mu_l, retry, wq_wake, d_l, d_u = ops
                    yield entry
                    yield lock_write
                    while not wrote[0]:  # full: pipe_wait
                        yield wq_prep
                        yield wq_u
                        yield mu_u
                        yield sleep
                        yield wq_fin
                        yield wq_u
                        yield mu_l
                        yield retry
                    yield mu_u
                    yield wq_wake  # do_wakeup
                    yield wq_u
                    yield d_l
                    yield d_u

        return script

    def _pipe_receiver(self, p: Pipe):  # type: ignore[no-untyped-def]
        """pipe_read of one message under the i_mutex; an emptied page is released (do_wakeup);
        an empty pipe means pipe_wait (waking writers first if a page was freed). After the
        mutex, wake_up_interruptible_sync if a page was freed, then fsnotify_access."""
        cfg, m = self.cfg, self.m
        env = m.env
        sc = cfg.scaled
        n = cfg.fds * cfg.loops
        entry = CpuWork(m.costs.syscall + sc(cfg.recv_entry), user=False)
        dq_ns, copy_ns, dn_ns, exit_ns, wq_ns = (
            sc(cfg.dequeue),
            sc(cfg.copy_out),
            sc(cfg.dnotify),
            sc(cfg.recv_exit),
            sc(cfg.wait_queue),
        )
        got = [False]
        freed = [False]

        def read(cpu: CPU, t: Task) -> int:
            if not p.bufs:
                got[0] = False
                return 0
            self.latency_hist.add(env._now - p.msgs.pop(0))
            p.bufs[0] -= 1
            if not p.bufs[0]:  # anon_pipe_buf_release: the page goes back (tmp_page)
                p.bufs.pop(0)
                freed[0] = True
            self.delivered += 1
            got[0] = True
            return dq_ns + copy_ns

        prepare, finish = p.wait.steps(wq_ns)

        def wake(cpu: CPU, t: Task) -> int:
            freed[0] = False
            return wq_ns + p.wait.wake_all(cpu)

        lock_read, retry = Lock(p.mutex, read), Call(read)
        mu_l, mu_u = Lock(p.mutex), Unlock(p.mutex)
        wq_prep, wq_fin, wq_wake, wq_u = (
            Lock(p.wq_lock, prepare),
            Lock(p.wq_lock, finish),
            Lock(p.wq_lock, wake),
            Unlock(p.wq_lock),
        )
        sleep = Call(lambda cpu, t: p.wait.sleep(t))
        d_l, d_u = Lock(p.d_lock, dn_ns), Unlock(p.d_lock, exit_ns)

        def script(task: Task) -> Script:
            p.receiver = task
            yield Call(self._wait_start)
            for _ in range(n):
                yield entry
                yield lock_read
                while not got[0]:  # empty: pipe_wait
                    if freed[0]:
                        yield wq_wake
                        yield wq_u
                    yield wq_prep
                    yield wq_u
                    yield mu_u
                    yield sleep
                    yield wq_fin
                    yield wq_u
                    yield mu_l
                    yield retry
                yield mu_u
                if freed[0]:
                    yield wq_wake
                    yield wq_u
                yield d_l
                yield d_u

        return script

    # -- results
    def progress(self) -> float:
        return self.delivered / self.total if self.total else 1.0

    def metrics(self) -> dict[str, float]:
        t = (self.end_ns - self.start_ns) if self.end_ns >= 0 else float("nan")
        n = self.delivered
        sw = sum(k.nvcsw + k.nivcsw for k in self.children)
        vol = sum(k.nvcsw for k in self.children)
        lk = self.locks.metrics()
        full = self.cfg.groups * self.cfg.fds * self.cfg.fds * DEFAULT_LOOPS
        per = (t / n) if n else float("nan")
        return {
            "time_s": t / S,
            "messages": float(n),
            "messages_per_s": n / (t / S) if n and t == t else float("nan"),
            "us_per_message": per / 1000,
            "time_s_at_100_loops": per * full / S,
            "busy_cpus": (self.busy1 - self.busy0) / t if t and t == t else float("nan"),
            "cpu_us_per_message": (self.busy1 - self.busy0) / n / 1000 if n else float("nan"),
            "switches_per_message": sw / n if n else float("nan"),
            "voluntary_switches_per_message": vol / n if n else float("nan"),
            "lock_sleeps_per_message": lk["sleeps"] / n if n else float("nan"),
            "lock_handoffs_per_message": lk["handoffs"] / n if n else float("nan"),
            "lock_steals_per_message": lk["steals"] / n if n else float("nan"),
            "lock_spins_per_message": lk["spins"] / n if n else float("nan"),
            "slab_refills_per_message": sum(c.refills for c in self.caches) / n if n else float("nan"),
            "slab_flushes_per_message": sum(c.flushes for c in self.caches) / n if n else float("nan"),
        }

    def latency(self) -> dict[str, LogHistogram]:
        return {"message_latency_ns": self.latency_hist}


def build(m: Machine, cfg: HackbenchConfig) -> Hackbench:
    locks = getattr(m, "models", {}).get("locks")
    if locks is None:
        raise ConfigError("kernel.locks", "hackbench needs the lock models", "install the [kernel.locks] mechanism")
    return Hackbench(m, cfg, locks)


__all__ = ["HackbenchConfig", "Hackbench", "UnixPair", "build"]
