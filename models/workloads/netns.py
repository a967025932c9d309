"""The "fake router" script of the netns-2014 seed, as processes running kernel primitives.

The seed's loop, per router: ``j=`uuidgen```, ``ip netns add bar-$j``, ``ip netns exec bar-$j
ip link set lo up``, ``ip netns exec bar-$j sysctl -w net.ipv4.ip_forward=1``,
``k=`echo $j | cut -b -11```, and two ``ip link add ... type veth peer name ... netns bar-$j``;
every 250 routers it prints the time, and the rate is 250 over the interval. ``steps`` selects
the variants the seed measured: ``add`` (only ``ip netns add``), ``add+exec`` (plus one
``ip netns exec``) or ``full``.

What each command does in the kernel comes from reading v3.13 (docs/kernel/rcu-nocb-netns.md
§5, with file citations): which exits wait for a grace period and how the work grows with the
number N of namespaces already created (each adds a bind mount under /var/run/netns):

* ``ip netns add``: ``mount(/var/run/netns, MS_SHARED|MS_REC)`` walks the N+1 mounts below it;
  ``unshare(CLONE_NEWNET)`` runs ``setup_net`` (collector item netns_create); the bind mount;
  at exit ``exit_task_namespaces`` frees the private nsproxy after ``synchronize_rcu()``
  (kernel/nsproxy.c, until 3.15 removed the wait: 728dba3a39c6). The walk allocates nothing
  (the mounts are shared already), so it costs ``mount_walk_cost`` per mount, not
  ``mount_cost``.
* ``ip netns exec``: ``setns`` then ``unshare(CLONE_NEWNS)``, which copies all M = M0 + N + 1
  mounts (fs/namespace.c ``copy_tree``) and drops the setns nsproxy after ``synchronize_rcu()``;
  ``mount("/", MS_SLAVE|MS_REC)`` walks the M mounts; ``umount2("/sys", MNT_DETACH)`` goes
  through ``namespace_unlock()``, which waits for a GP (3.13+) and frees each of the S sysfs
  mounts by ``call_rcu``; then the command runs and exits: nsproxy wait (until 3.15), the last
  reference to the mount namespace unmounts all M mounts (``namespace_unlock``: one more GP wait,
  3.13+) and queues one ``delayed_free`` callback per mount. Before 3.13 (paths ``v3.8``) no
  unmount waits and every mount is freed inline by the unmounting task (v3.9 fs/namespace.c:
  ``release_mounts`` -> ``mntput_no_expire`` -> ``mntfree``).
* Exit order: 3.8/3.9 ``do_exit`` runs ``exit_task_work`` (the deferred file puts, whose
  frees are ``call_rcu``) before ``exit_notify`` -> ``exit_task_namespaces``; 3.10+ drops the
  namespaces first (kernel/exit.c).
* ``ip link add``: under rtnl, two ``register_netdevice`` calls whose uevents walk one netlink
  socket per namespace (lib/kobject_uevent.c): cost grows with N; no RCU wait. On 6.x (paths
  ``v6``) a net device's uevents go only to its own namespace's socket
  (``kobject_uevent_net_broadcast`` -> ``uevent_net_broadcast_tagged``, since 4.18), so nothing
  grows with N, and a veth gets ``num_possible_cpus()`` TX and RX queues
  (drivers/net/veth.c ``veth_get_num_queues``) that ``veth_newlink`` trims to one on each end
  after registering both (``veth_init_queues``): ``netif_set_real_num_tx_queues`` removes the
  queues' sysfs objects and, because it disables queues, waits in ``synchronize_net()``, which
  under the RTNL is ``synchronize_rcu_expedited()`` (net/core/dev.c): two expedited grace
  periods per ``ip link add`` when the machine has more than one CPU.
* ``ip link set lo up`` (inside the first ``ip netns exec``): ``dev_open`` and the NETDEV_UP
  notifiers (127.0.0.1 and ::1 with their routes), ``lo_up``; no RCU wait.
* Every process queues the callbacks of its life: a file free as it starts (the loader's
  unmapped ``/etc/ld.so.cache``), file frees at exit, and at reaping ``delayed_put_task_struct``, ``delayed_put_pid`` and the credentials'
  (kernel/exit.c, kernel/cred.c, fs/file_table.c).

``paths`` picks the kernel era of these paths: ``v3.8`` (nsproxy waits only, the 3.8/3.9 exit
order), ``v3.10`` (3.10-3.12: nsproxy waits only, namespaces dropped before the file puts at
exit), ``v3.13`` (nsproxy and namespace_unlock waits, 9 per full router), ``v3.15`` (only the
namespace_unlock waits) or ``v6`` (namespace_unlock's wait expedited, 6.x veth); :data:`PATHS`
has the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from models.rcu.ops import CallRcu, SynchronizeRcu, SynchronizeRcuExpedited
from sim.config import knob
from sim.machine import CPU, Machine
from sim.ops import Call, CpuWork, Spawn, Syscall
from sim.task import Task
from sim.units import US, S


@dataclass(frozen=True)
class Paths:
    """What one kernel era's namespace paths do, for the ``paths`` knob (see :data:`PATHS`)."""

    wait_nsproxy: bool
    """switch_task_namespaces() drops an nsproxy after synchronize_rcu() (kernel/nsproxy.c;
    task_lock instead from 3.15, 728dba3a39c6)"""
    wait_unlock: bool
    """namespace_unlock() waits for a grace period before it frees unmounted mounts
    (fs/namespace.c, 3.13+)"""
    rcu_mount_free: bool
    """vfsmounts are freed by call_rcu (delayed_free) after that wait (3.13+); before, inline
    in mntput_no_expire -> mntfree -> free_vfsmnt, and release_mounts() waits for nothing"""
    files_before_ns: bool
    """do_exit runs exit_task_work (the deferred fputs, whose file frees are call_rcu) before
    exit_notify -> exit_task_namespaces (3.8/3.9); 3.10+ drops the namespaces first
    (kernel/exit.c)"""
    unlock_expedited: bool
    """namespace_unlock()'s wait is synchronize_rcu_expedited() (6.x fs/namespace.c)"""
    veth_v6: bool
    """6.x veth: per-namespace uevents, num_possible_cpus() queues trimmed to one with
    synchronize_net() under the RTNL (drivers/net/veth.c, net/core/dev.c)"""


# fmt: off
PATHS: dict[str, Paths] = {
    # era      wait_nsproxy wait_unlock rcu_mount_free files_before_ns unlock_expedited veth_v6
    "v3.8":  Paths(True,        False,      False,         True,           False,           False),
    "v3.10": Paths(True,        False,      False,         False,          False,           False),
    "v3.13": Paths(True,        True,       True,          False,          False,           False),
    "v3.15": Paths(False,       True,       True,          False,          False,           False),
    "v6":    Paths(False,       True,       True,          False,          True,            True),
}
# fmt: on
"""The ``paths`` eras (docs/kernel/rcu-nocb-netns.md §5.2), one row each."""


@dataclass(frozen=True)
class NetnsConfig:
    routers: int = knob(4000, doc="fake routers to create", min=1, max=1_000_000, source="seed 000: 4000")
    report_every: int = knob(
        250, doc="routers per rate report (the script prints the time every 250)", min=1, max=1_000_000, source="seed 000"
    )
    steps: Literal["add", "add+exec", "full"] = knob(
        "full",
        doc="which lines of the script run per router: 'add' (ip netns add only), 'add+exec' (plus one ip netns exec), 'full'",
        source="seed 000",
    )
    paths: Literal["v3.8", "v3.10", "v3.13", "v3.15", "v6"] = knob(
        "v3.13",
        doc="kernel era of the namespace paths (which exits wait for a grace period): 'v3.8' (3.8/3.9: nsproxy waits, "
        "file puts before the namespaces at exit), 'v3.10' (3.10-3.12: nsproxy waits, namespaces first), 'v3.13' "
        "(nsproxy and namespace_unlock() waits), 'v3.15' (namespace_unlock() waits only), 'v6' (no nsproxy wait, "
        "namespace_unlock() waits with synchronize_rcu_expedited())",
        source="docs/kernel/rcu-nocb-netns.md §5.2; fs/namespace.c namespace_unlock (6.x: synchronize_rcu_expedited; "
        "whether 6.18 defers the MNT_DETACH case to queue_rcu_work is unverified)",
    )
    helpers: bool = knob(
        True,
        doc="run the seed's helpers per router in the 'full' steps: uuidgen and the `cut` subshell (the collector's "
        "netns_script item leaves them out)",
        source="seed 000 script; calibration/collector/item_netns_script.c",
    )
    base_mounts: int = knob(
        30,
        doc="M0: mounts of the initial mount namespace before any netns",
        min=1,
        max=100_000,
        source="estimate for an Ubuntu 14.04 host (/proc/self/mountinfo)",
    )
    sysfs_mounts: int = knob(
        6,
        doc="S: sysfs and the mounts below /sys (cgroup hierarchies, debugfs, securityfs, fusectl, pstore)",
        min=1,
        max=1000,
        source="estimate for an Ubuntu 14.04 host",
    )
    mount_cost: int = knob(
        2 * US,
        doc="kernel time per mount per allocating or freeing pass (copy_tree's clone_mnt, umount_tree, the free with its percpu map scan)",
        unit="ns",
        min=0,
        source="fitted: calibration/fits/netns-2014.toml (anchor: 4-CPU nocbno add+exec rate)",
    )
    mount_walk_cost: int = knob(
        100,
        doc="kernel time per mount of a propagation-type walk (do_change_type: next_mnt, invent_group_ids, change_mnt_propagation)",
        unit="ns",
        min=0,
        source="estimate: a list walk touching one or two cache lines per mount; 100 ns x 500 mounts is 1% of an ip netns add",
    )
    setup_net: int = knob(
        170 * US,
        doc="unshare(CLONE_NEWNET): setup_net and every pernet init",
        unit="ns",
        min=0,
        source="dev-machine profile: netns_create minus fork_exit_baseline; the netns-2014 story fits it for the 2014 box "
        "at 500 namespaces (calibration/fits/netns-2014.toml, anchor: 4-CPU nocbno ip netns add rate)",
    )
    uevent_per_netns: int = knob(
        50,
        doc="one uevent's broadcast, per namespace's uevent socket",
        unit="ns",
        min=0,
        source="estimate (a netlink filter check per socket)",
    )
    uevents_per_link: int = knob(
        4,
        doc="uevents per 'ip link add' (two devices, add and queue events)",
        min=0,
        max=100,
        source="docs/kernel/rcu-nocb-netns.md §5.1 [U]",
    )
    register_netdev: int = knob(
        60 * US,
        doc="one register_netdevice with its notifiers (sysfs, sysctl, proc, IPv4/IPv6 setup), its share of the "
        "RTM_NEWLINK request",
        unit="ns",
        min=0,
        source="estimate for the netns-2014 story's 2014 machine (its fit assumes it); on a profiled machine rcusim "
        "calibrate measures it from the collector's veth_link item: (create_one_queue - request_baseline) / 2, an "
        "RTM_NEWLINK of a veth pair that asks for one queue per end, so no trim and no grace period is inside "
        "(calibration/fit.py WORKLOAD_DIRECT)",
    )
    lo_up: int = knob(
        0,
        doc="'ip link set lo up' in a fresh namespace: dev_open and the NETDEV_UP notifiers (loopback addresses and "
        "routes), paid in the first 'ip netns exec'",
        unit="ns",
        min=0,
        source="0 (not priced) for the netns-2014 story, whose fit (calibration/fits/netns-2014.toml) was made without "
        "it; on a profiled machine measured from veth_link: lo_up - request_baseline",
    )
    tool_work: int = knob(
        50 * US,
        doc="what one small tool run (ip, sysctl, cut, uuidgen) costs beyond fork + exec + exit of a minimal program: "
        "loading its libraries, start-up, parsing, tearing down its larger address space",
        unit="ns",
        min=0,
        source="estimate for the netns-2014 story's 2014 machine (its fit, calibration/fits/netns-2014.toml, assumes it); "
        "on a profiled machine rcusim calibrate measures it from the collector's tool_exec item (ip -V and sysctl -n "
        "against /bin/true, calibration/fit.py WORKLOAD_DIRECT) into the params' [workload.netns]",
    )
    callbacks_at_exec: int = knob(
        1,
        doc="call_rcu when a program starts (the dynamic loader unmaps /etc/ld.so.cache, the last reference to that "
        "file: file_free_rcu)",
        min=0,
        max=1000,
        source="glibc elf/rtld.c _dl_unload_cache -> munmap; v3.9 fs/file_table.c fput -> __fput -> file_free -> call_rcu. "
        "Not commit_creds: the credentials an exec replaces stay referenced by the f_cred of the binary it opened "
        "(fs/exec.c do_execve_common opens it before install_exec_creds; get_empty_filp takes current_cred()), so "
        "their put_cred_rcu comes from that file's own callback at exit (docs/kernel/rcu-3.9rc-era.md §7)",
    )
    callbacks_at_exit: int = knob(
        2, doc="call_rcu per process exit (files it opened: file_free_rcu)", min=0, max=1000, source="fs/file_table.c (3.13)"
    )
    callbacks_at_reap: int = knob(
        4,
        doc="call_rcu when the parent reaps a child (task_struct, pid, two credential puts)",
        min=0,
        max=1000,
        source="kernel/exit.c release_task, kernel/pid.c, kernel/cred.c",
    )


class FakeRouters:
    """One run of the fake-router loop, driven by a shell task."""

    def __init__(self, m: Machine, cfg: NetnsConfig) -> None:
        self.m = m
        self.cfg = cfg
        self.created = 0
        self.marks: list[tuple[int, int]] = []  # (routers created, time ns)
        self.start_ns = 0
        self.end_ns = -1
        self.syncs_by_step: dict[str, int] = {}
        era = PATHS[cfg.paths]
        self.wait_nsproxy = era.wait_nsproxy
        self.wait_unlock = era.wait_unlock
        self.rcu_mount_free = era.rcu_mount_free
        self.files_before_ns = era.files_before_ns
        self.sync = SynchronizeRcu()
        self.unlock_sync = SynchronizeRcuExpedited() if era.unlock_expedited else self.sync
        self.veth_v6 = era.veth_v6
        self.expedited = SynchronizeRcuExpedited()
        self.cb_exec = CallRcu(count=cfg.callbacks_at_exec) if cfg.callbacks_at_exec else None
        self.cb_exit = CallRcu(count=cfg.callbacks_at_exit) if cfg.callbacks_at_exit else None
        self.cb_reap = CallRcu(count=cfg.callbacks_at_reap) if cfg.callbacks_at_reap else None
        self.tool = CpuWork(cfg.tool_work) if cfg.tool_work else None
        m.spawn(self._shell, "bash")

    # ------------------------------------------------------------------ helpers
    @property
    def mounts(self) -> int:
        """M: mounts in the initial mount namespace (one bind mount per netns)."""
        return self.cfg.base_mounts + self.created

    def _run(self, body: Any, name: str):  # type: ignore[no-untyped-def]
        """fork+exec+wait a program, then reap it (release_task's callbacks)."""
        yield Spawn(body, name, wait=True)
        if self.cb_reap is not None:
            yield self.cb_reap

    def _program(self, body: Any, at_exit: Any = None):  # type: ignore[no-untyped-def]
        """A program: exec's callbacks, its work, then its exit: the file frees' callbacks and
        ``at_exit`` (dropping its private namespaces), in the era's do_exit order."""

        def script(task: Task):  # type: ignore[no-untyped-def]
            if self.cb_exec is not None:
                yield self.cb_exec
            if self.tool is not None:
                yield self.tool
            yield from body(task)
            if self.files_before_ns and self.cb_exit is not None:
                yield self.cb_exit
            if at_exit is not None:
                yield from at_exit(task)
            if not self.files_before_ns and self.cb_exit is not None:
                yield self.cb_exit

        return script

    def _nothing(self, task: Task):  # type: ignore[no-untyped-def]
        return
        yield

    # ------------------------------------------------------------------ the commands
    def _ip_netns_add(self, task: Task):  # type: ignore[no-untyped-def]
        cfg = self.cfg
        # mount("", /var/run/netns, MS_SHARED|MS_REC): do_change_type walks the N+1 mounts
        # below it; they are shared already, so invent_group_ids allocates nothing and
        # change_mnt_propagation only sets a flag (fs/namespace.c, fs/pnode.c)
        yield Syscall(cfg.mount_walk_cost * (self.created + 1))
        # unshare(CLONE_NEWNET): setup_net under net_mutex
        yield Syscall(cfg.setup_net)
        # bind mount of /proc/self/ns/net: attach and propagate one mount
        yield Syscall(cfg.mount_cost)
        self.created += 1

    def _exit_add(self, task: Task):  # type: ignore[no-untyped-def]
        # exit_task_namespaces: the private nsproxy dies after synchronize_rcu()
        if self.wait_nsproxy:
            yield self.sync

    def _ip_netns_exec_lo_up(self, task: Task):  # type: ignore[no-untyped-def]
        yield from self._ip_netns_exec(task)
        # the command itself: ip link set lo up (dev_open, NETDEV_UP notifiers)
        if self.cfg.lo_up:
            yield Syscall(self.cfg.lo_up)

    def _ip_netns_exec(self, task: Task):  # type: ignore[no-untyped-def]
        cfg = self.cfg
        m_count = self.mounts
        # setns(CLONE_NEWNET); unshare(CLONE_NEWNS): copy_tree of every mount
        yield Syscall(cfg.mount_cost * m_count)
        if self.wait_nsproxy:
            yield self.sync  # the setns nsproxy dies (switch_task_namespaces)
        # mount("/", MS_SLAVE|MS_REC): do_change_type over every mount (do_make_slave: a
        # peer-list walk, nothing allocated or freed)
        yield Syscall(cfg.mount_walk_cost * m_count)
        # umount2("/sys", MNT_DETACH): umount_tree, then the S mounts are freed:
        # namespace_unlock -> GP wait -> S call_rcu (3.13+), or inline (release_mounts, 3.8)
        yield Syscall(cfg.mount_cost * cfg.sysfs_mounts)
        yield from self._free_mounts(cfg.sysfs_mounts)
        # mount sysfs, then execvp the command (a second exec) which does its small job
        yield Syscall(cfg.mount_cost)
        yield CpuWork(self.m.costs.exec, user=False)
        if self.cb_exec is not None:
            yield self.cb_exec
        if self.tool is not None:
            yield self.tool

    def _exit_exec(self, task: Task):  # type: ignore[no-untyped-def]
        # exit: the nsproxy dies, the last mount-namespace reference unmounts all M mounts
        # (put_mnt_ns -> umount_tree), which are then freed
        if self.wait_nsproxy:
            yield self.sync
        m_count = self.mounts
        yield Syscall(self.cfg.mount_cost * m_count)
        yield from self._free_mounts(m_count)

    def _free_mounts(self, n: int):  # type: ignore[no-untyped-def]
        """Free ``n`` unmounted mounts: after namespace_unlock()'s synchronize_rcu() by one
        call_rcu(delayed_free) each (3.13+), or inline in the caller (3.8/3.9)."""
        cost = self.cfg.mount_cost
        if self.wait_unlock:
            yield self.unlock_sync
        if self.rcu_mount_free:
            yield CallRcu(cost=cost, count=n)
        else:
            yield Syscall(cost * n)

    def _ip_link_add(self, task: Task):  # type: ignore[no-untyped-def]
        cfg = self.cfg
        if not self.veth_v6:
            # rtnl: two register_netdevice, each uevent walking every namespace's uevent socket
            yield Syscall(2 * cfg.register_netdev + cfg.uevents_per_link * cfg.uevent_per_netns * (self.created + 1))
            return
        # 6.x veth_newlink: register the peer (in the router's namespace) and the host end; each
        # uevent goes to its own namespace's socket only
        yield Syscall(2 * cfg.register_netdev)
        if len(self.m.cpus) > 1:
            # veth_init_queues on each end: netif_set_real_num_tx_queues(dev, 1) disables queues
            # and waits in synchronize_net() -> synchronize_rcu_expedited() (the RTNL is held)
            # (the trims' sysfs queue-object removals are below the collector's resolution:
            # veth_link's create_one_tx_queue, which keeps the RX trims, is within noise of
            # create_one_queue; they are not priced)
            for _end in range(2):
                yield self.expedited

    def _subshell_cut(self, task: Task):  # type: ignore[no-untyped-def]
        # k=`echo $j | cut -b -11`: a subshell forks cut
        yield from self._run(self._program(self._nothing), "cut")

    # ------------------------------------------------------------------ the loop
    def _mark(self, cpu: CPU, t: Task) -> int:
        self.marks.append((self.created, self.m.now))
        return 0

    def _shell(self, task: Task):  # type: ignore[no-untyped-def]
        cfg = self.cfg
        add = self._program(self._ip_netns_add, self._exit_add)
        exe = self._program(self._ip_netns_exec, self._exit_exec)
        exe_lo = self._program(self._ip_netns_exec_lo_up, self._exit_exec)
        link = self._program(self._ip_link_add)
        uuid = self._program(self._nothing)
        cut_sub = self._subshell_cut
        mark = Call(self._mark)
        self.start_ns = self.m.now
        yield mark
        for i in range(1, cfg.routers + 1):
            if cfg.steps == "full" and cfg.helpers:
                yield from self._run(uuid, "uuidgen")
            yield from self._run(add, "ip")
            if cfg.steps in ("add+exec", "full"):
                yield from self._run(exe_lo, "ip")
            if cfg.steps == "full":
                yield from self._run(exe, "ip")
                if cfg.helpers:
                    yield from self._run(cut_sub, "bash")
                yield from self._run(link, "ip")
                yield from self._run(link, "ip")
            if i % cfg.report_every == 0:
                yield mark
        self.end_ns = self.m.now
        self.m.done.succeed()

    # ------------------------------------------------------------------ results
    def progress(self) -> float:
        return self.created / self.cfg.routers

    def rates(self) -> list[tuple[int, float]]:
        """(routers created at the mark, routers/s over the interval that ended there)."""
        out = []
        for (n0, t0), (n1, t1) in zip(self.marks, self.marks[1:], strict=False):
            if t1 > t0:
                out.append((n1, (n1 - n0) / ((t1 - t0) / S)))
        return out

    def rate_at(self, mark: int) -> float:
        for n, r in self.rates():
            if n == mark:
                return r
        return float("nan")

    def metrics(self) -> dict[str, float]:
        t = (self.end_ns - self.start_ns) / S if self.end_ns >= 0 else float("nan")
        out = {
            "routers": float(self.created),
            "time_s": t,
            "routers_per_s": self.created / t if t and t == t else float("nan"),
        }
        for n, r in self.rates()[:4]:
            out[f"rate_at_{n}"] = r
        return out

    def series(self) -> dict[str, Any]:
        return {"rate": [{"routers": n, "per_s": r} for n, r in self.rates()]}


def build(m: Machine, cfg: NetnsConfig) -> FakeRouters:
    if "rcu" not in getattr(m, "models", {}):
        from sim.errors import ScenarioError

        raise ScenarioError("the netns workload needs the RCU mechanism ([kernel.rcu])")
    return FakeRouters(m, cfg)
