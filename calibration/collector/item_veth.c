/*
 * veth_link (root only): a component of the netns_script composite measured on
 * its own: the kernel work of the rtnetlink requests behind `ip link add O type
 * veth peer name I netns NAME` and `ip netns exec NAME ip link set lo up`,
 * issued over a raw NETLINK_ROUTE socket (no tool start-up), each request timed
 * from sendto() to its acknowledgement.
 *
 * Everything happens in network namespaces of child processes, never in the
 * collector's: a "host" child unshares a fresh namespace A and issues the
 * requests; a "router" child holds a fresh namespace B; the host child also
 * opens a second netlink socket inside B (setns there and back). Every device
 * lives in A or B and dies with them when the children exit (or are killed:
 * tracked_fork, PR_SET_PDEATHSIG), so nothing can leak into the root
 * namespace and there is nothing to restore. Samples go back through a shared
 * anonymous mapping.
 *
 * Kernel paths (6.x): rtnl_newlink (net/core/rtnetlink.c) -> veth_newlink
 * (drivers/net/veth.c): register_netdevice(peer) in the peer's namespace,
 * rtnl_configure_link, register_netdevice(dev), then veth_init_queues() on
 * both: a veth gets num_possible_cpus() TX and RX queues unless the request
 * gives IFLA_NUM_TX_QUEUES / IFLA_NUM_RX_QUEUES, and trims them to one, and
 * netif_set_real_num_tx_queues() (net/core/dev.c) waits in synchronize_net()
 * (synchronize_rcu_expedited() under the RTNL) when it disables queues.
 * Series create_one_queue asks for one queue of each kind on both ends, which
 * skips that trim and its waits; create_one_tx_queue asks for one TX queue
 * only, which keeps the RX trim (sysfs queue kobjects removed, no wait). Moving a device (IFLA_NET_NS_FD on an
 * existing link: __dev_change_net_namespace) and deleting a pair
 * (unregister_netdevice_many, netdev_run_todo) wait for grace periods too.
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { S_PEER, S_ONEQ, S_ONETX, S_SAME, S_MOVE, S_DEL, S_BASE, S_LO, NSERIES };
static const char *series_names[NSERIES] = {"create_peer_netns", "create_one_queue", "create_one_tx_queue", "create_same_netns",
					     "move_netns",        "delete",           "request_baseline",
					     "lo_up"};
#define MAX_ROUNDS 1000

struct shared {
	int err;             /* errno of the first failure in the host child */
	char what[128];      /* which request failed */
	long n[NSERIES];     /* samples per series */
	double v[NSERIES][MAX_ROUNDS * 2];
};

struct nlreq {
	struct nlmsghdr nh;
	struct ifinfomsg ifi;
	char attrs[512];
};

static struct rtattr *add_attr(struct nlmsghdr *nh, int type, const void *data, size_t len)
{
	struct rtattr *rta = (struct rtattr *)((char *)nh + NLMSG_ALIGN(nh->nlmsg_len));
	rta->rta_type = (unsigned short)type;
	rta->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(rta), data, len);
	nh->nlmsg_len = NLMSG_ALIGN(nh->nlmsg_len) + RTA_ALIGN(rta->rta_len);
	return rta;
}

static void add_u32(struct nlmsghdr *nh, int type, unsigned v) { add_attr(nh, type, &v, sizeof(v)); }
static void add_str(struct nlmsghdr *nh, int type, const char *s) { add_attr(nh, type, s, strlen(s) + 1); }
static struct rtattr *nest_start(struct nlmsghdr *nh, int type) { return add_attr(nh, type, NULL, 0); }
static void nest_end(struct nlmsghdr *nh, struct rtattr *rta)
{
	rta->rta_len = (unsigned short)((char *)nh + nh->nlmsg_len - (char *)rta);
}

static void req_init(struct nlreq *r, int type, int flags)
{
	memset(r, 0, sizeof(*r));
	r->nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg));
	r->nh.nlmsg_type = (unsigned short)type;
	r->nh.nlmsg_flags = (unsigned short)(NLM_F_REQUEST | NLM_F_ACK | flags);
	r->ifi.ifi_family = AF_UNSPEC;
}

/* Send one request and wait for its acknowledgement: 0, or the negative errno the kernel returned. */
static int nl_talk(int fd, struct nlreq *r, int64_t *ns)
{
	static unsigned seq;
	char buf[4096];
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	r->nh.nlmsg_seq = ++seq;
	int64_t t0 = now_ns();
	if (sendto(fd, r, r->nh.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != r->nh.nlmsg_seq || h->nlmsg_type != NLMSG_ERROR)
				continue;
			if (ns)
				*ns = now_ns() - t0;
			return ((struct nlmsgerr *)NLMSG_DATA(h))->error;
		}
	}
}

/* RTM_NEWLINK of a veth pair: `name` here, `peer` in the namespace peer_ns_fd (-1: here). */
/* one_queue: 0 default queues, 1 one TX and one RX queue, 2 one TX queue (RX default) */
static void veth_req(struct nlreq *r, const char *name, const char *peer, int peer_ns_fd, int one_queue)
{
	req_init(r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	add_str(&r->nh, IFLA_IFNAME, name);
	if (one_queue)
		add_u32(&r->nh, IFLA_NUM_TX_QUEUES, 1);
	if (one_queue == 1)
		add_u32(&r->nh, IFLA_NUM_RX_QUEUES, 1);
	struct rtattr *info = nest_start(&r->nh, IFLA_LINKINFO);
	add_str(&r->nh, IFLA_INFO_KIND, "veth");
	struct rtattr *data = nest_start(&r->nh, IFLA_INFO_DATA);
	struct rtattr *p = nest_start(&r->nh, VETH_INFO_PEER);
	struct ifinfomsg pifi = {.ifi_family = AF_UNSPEC};
	/* the peer's ifinfomsg is the payload head of VETH_INFO_PEER */
	memcpy((char *)&r->nh + r->nh.nlmsg_len, &pifi, sizeof(pifi));
	r->nh.nlmsg_len += NLMSG_ALIGN(sizeof(pifi));
	add_str(&r->nh, IFLA_IFNAME, peer);
	if (peer_ns_fd >= 0)
		add_u32(&r->nh, IFLA_NET_NS_FD, (unsigned)peer_ns_fd);
	if (one_queue)
		add_u32(&r->nh, IFLA_NUM_TX_QUEUES, 1);
	if (one_queue == 1)
		add_u32(&r->nh, IFLA_NUM_RX_QUEUES, 1);
	nest_end(&r->nh, p);
	nest_end(&r->nh, data);
	nest_end(&r->nh, info);
}

static void name_req(struct nlreq *r, int type, const char *name)
{
	req_init(r, type, 0);
	add_str(&r->nh, IFLA_IFNAME, name);
}

static int open_rtnl(void) { return socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE); }

static int fail(struct shared *sh, int err, const char *what)
{
	sh->err = err < 0 ? -err : err;
	snprintf(sh->what, sizeof(sh->what), "%s", what);
	return 1;
}

static void add_sample(struct shared *sh, int s, int64_t ns)
{
	if (sh->n[s] < (long)ARRAY_LEN(sh->v[s]))
		sh->v[s][sh->n[s]++] = (double)ns;
}

/* The host child: namespace A, requests into A and B. Returns the exit status. */
static int host_child(struct shared *sh, pid_t router, long rounds, long deletes, long warm)
{
	if (unshare(CLONE_NEWNET) != 0)
		return fail(sh, errno, "unshare(CLONE_NEWNET)");
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)router);
	int ns_b = open(path, O_RDONLY | O_CLOEXEC), ns_a = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (ns_a < 0 || ns_b < 0)
		return fail(sh, errno, "open the namespace files");
	int sock_a = open_rtnl();
	if (sock_a < 0 || setns(ns_b, CLONE_NEWNET) != 0)
		return fail(sh, errno, "netlink socket or setns into the router namespace");
	int sock_b = open_rtnl();
	if (sock_b < 0 || setns(ns_a, CLONE_NEWNET) != 0)
		return fail(sh, errno, "netlink socket in the router namespace or setns back");
	struct nlreq r;
	int64_t ns;
	int rc;
	char a[IFNAMSIZ], b[IFNAMSIZ];
	for (long i = -warm; i < rounds; i++) {
		int rec = i >= 0;
		long k = i + warm;
		/* the script's request: host end here, peer in the router namespace, default queues */
		snprintf(a, sizeof(a), "vp%ld", k), snprintf(b, sizeof(b), "vq%ld", k);
		veth_req(&r, a, b, ns_b, 0);
		if ((rc = nl_talk(sock_a, &r, &ns)) != 0)
			return fail(sh, rc, "RTM_NEWLINK veth, peer in another namespace");
		if (rec)
			add_sample(sh, S_PEER, ns);
		/* the same with one TX and one RX queue requested: no trim, no synchronize_net */
		snprintf(a, sizeof(a), "vo%ld", k), snprintf(b, sizeof(b), "vr%ld", k);
		veth_req(&r, a, b, ns_b, 1);
		if ((rc = nl_talk(sock_a, &r, &ns)) != 0)
			return fail(sh, rc, "RTM_NEWLINK veth with one queue");
		if (rec)
			add_sample(sh, S_ONEQ, ns);
		/* one TX queue requested, RX default: the RX trim (kobject removal) without the TX trim's wait */
		snprintf(a, sizeof(a), "vx%ld", k), snprintf(b, sizeof(b), "vy%ld", k);
		veth_req(&r, a, b, ns_b, 2);
		if ((rc = nl_talk(sock_a, &r, &ns)) != 0)
			return fail(sh, rc, "RTM_NEWLINK veth with one TX queue");
		if (rec)
			add_sample(sh, S_ONETX, ns);
		/* both ends here */
		snprintf(a, sizeof(a), "vs%ld", k), snprintf(b, sizeof(b), "vt%ld", k);
		veth_req(&r, a, b, -1, 0);
		if ((rc = nl_talk(sock_a, &r, &ns)) != 0)
			return fail(sh, rc, "RTM_NEWLINK veth, both ends in one namespace");
		if (rec)
			add_sample(sh, S_SAME, ns);
		/* move one end of that pair to B, then back from B to A */
		name_req(&r, RTM_NEWLINK, b);
		add_u32(&r.nh, IFLA_NET_NS_FD, (unsigned)ns_b);
		if ((rc = nl_talk(sock_a, &r, &ns)) != 0)
			return fail(sh, rc, "RTM_NEWLINK IFLA_NET_NS_FD (move to the router namespace)");
		if (rec)
			add_sample(sh, S_MOVE, ns);
		name_req(&r, RTM_NEWLINK, b);
		add_u32(&r.nh, IFLA_NET_NS_FD, (unsigned)ns_a);
		if ((rc = nl_talk(sock_b, &r, &ns)) != 0)
			return fail(sh, rc, "RTM_NEWLINK IFLA_NET_NS_FD (move back)");
		if (rec)
			add_sample(sh, S_MOVE, ns);
		/* a request the RTNL handler refuses at once: the round trip around the work */
		name_req(&r, RTM_DELLINK, "rcusim-none");
		if ((rc = nl_talk(sock_a, &r, &ns)) != -ENODEV)
			return fail(sh, rc ? rc : EEXIST, "RTM_DELLINK of a missing link (expected ENODEV)");
		if (rec)
			add_sample(sh, S_BASE, ns);
		/* delete the first pairs one by one; the rest dies with the namespaces */
		if (k < deletes + warm) {
			name_req(&r, RTM_DELLINK, a);
			if ((rc = nl_talk(sock_a, &r, &ns)) != 0)
				return fail(sh, rc, "RTM_DELLINK of a veth pair");
			if (rec)
				add_sample(sh, S_DEL, ns);
		}
	}
	return 0;
}

/* A lo_up child: fresh namespace, time `lo up` there, report, stay alive until hold_rd closes. */
static void lo_child(struct shared *sh, long idx, int hold_rd, int hold_wr, int ready_wr)
{
	close(hold_wr);
	int rc = -EPERM;
	int64_t ns = 0;
	if (unshare(CLONE_NEWNET) == 0) {
		int fd = open_rtnl();
		struct nlreq r;
		req_init(&r, RTM_NEWLINK, 0);
		r.ifi.ifi_index = 1; /* loopback_net_init: lo is always ifindex 1 in a new namespace */
		r.ifi.ifi_flags = IFF_UP;
		r.ifi.ifi_change = IFF_UP;
		rc = fd < 0 ? -errno : nl_talk(fd, &r, &ns);
	} else {
		rc = -errno;
	}
	if (rc == 0 && idx >= 0)
		sh->v[S_LO][idx] = (double)ns;
	char c = rc == 0 ? 'k' : 'e';
	(void)!write(ready_wr, &c, 1);
	if (rc == 0)
		while (read(hold_rd, &c, 1) < 0 && errno == EINTR)
			;
	_exit(rc == 0 ? 0 : 1);
}

void item_veth_link(item_ctx *ctx)
{
	long rounds = plan(ctx, 40, 200), deletes = plan(ctx, 20, 50), warm = 3, los = plan(ctx, 30, 100);
	ctx->unit = "ns";
	item_method(ctx, "A component of netns_script, not the composite: rtnetlink requests over a raw NETLINK_ROUTE "
			 "socket, each timed from sendto() to its acknowledgement, in fresh network namespaces of child "
			 "processes (A, where the requests are issued, and B): RTM_NEWLINK of a veth pair with the peer "
			 "in B (create_peer_netns, top level: the kernel work of ip link add ... type veth peer name ... "
			 "netns ...), the same with one TX and RX queue requested (create_one_queue) or one TX queue only "
			 "(create_one_tx_queue), both ends in A "
			 "(create_same_netns), moving one end to B and back (move_netns), deleting a pair (delete), a "
			 "refused RTM_DELLINK (request_baseline) and setting lo up in a fresh namespace (lo_up).");
	jv_set(ctx->params, "rounds", jv_int(rounds));
	jv_set(ctx->params, "warmup_rounds", jv_int(warm));
	jv_set(ctx->params, "deletes", jv_int(deletes));
	jv_set(ctx->params, "lo_namespaces", jv_int(los));
	if (!ctx->opt->is_root) {
		item_skip(ctx, "needs root: creating namespaces and links requires CAP_SYS_ADMIN and CAP_NET_ADMIN "
			       "(effective uid is %d)", (int)geteuid());
		return;
	}
	if (access("/proc/self/ns/net", F_OK) != 0) {
		item_skip(ctx, "kernel has no network namespaces (/proc/self/ns/net missing)");
		return;
	}
	char *possible = read_file_trim("/sys/devices/system/cpu/possible");
	jv_set(ctx->params, "cpus_possible", jv_str(possible));
	free(possible);
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		item_fail(ctx, "mmap: %s", strerror(errno));
		return;
	}
	memset(sh, 0, sizeof(*sh));
	int hold[2], ready[2];
	if (pipe2(hold, O_CLOEXEC) != 0 || pipe2(ready, O_CLOEXEC) != 0) {
		item_fail(ctx, "pipe: %s", strerror(errno));
		munmap(sh, sizeof(*sh));
		return;
	}
	const char *failure = NULL;
	char fail_buf[256];
	/* the router namespace B, held by a child until hold[] closes */
	pid_t router = tracked_fork();
	if (router == 0)
		lo_child(sh, -1, hold[0], hold[1], ready[1]); /* its lo up is not recorded */
	char c = 'e';
	if (router < 0 || read(ready[0], &c, 1) != 1 || c != 'k') {
		if (router > 0) {
			kill(router, SIGKILL);
			tracked_wait(router, NULL);
		}
		close(hold[0]), close(hold[1]), close(ready[0]), close(ready[1]);
		munmap(sh, sizeof(*sh));
		item_skip(ctx, "unshare(CLONE_NEWNET) or setting lo up fails in a child (for example inside a container "
			       "without CAP_SYS_ADMIN and CAP_NET_ADMIN in the initial user namespace)");
		return;
	}
	/* lo up, each in a fresh namespace held until the item ends, measured first: no namespace
	 * dies before the end, so no cleanup_net (which takes the RTNL) runs during the item */
	pid_t *holders = calloc((size_t)los, sizeof(*holders));
	long alive = 0;
	for (long i = 0; !failure && holders && i < los; i++) {
		pid_t pid = tracked_fork();
		if (pid == 0)
			lo_child(sh, i, hold[0], hold[1], ready[1]);
		if (pid < 0 || read(ready[0], &c, 1) != 1 || c != 'k') {
			if (pid > 0) {
				kill(pid, SIGKILL);
				tracked_wait(pid, NULL);
			}
			failure = "lo up in a fresh namespace failed";
			break;
		}
		holders[alive++] = pid;
	}
	sh->n[S_LO] = alive;
	pid_t host = failure ? 0 : tracked_fork();
	if (!failure && host == 0) {
		close(hold[1]);
		_exit(host_child(sh, router, rounds, deletes, warm));
	}
	int status = 0;
	if (failure) {
		/* lo up failed: no veth rounds */
	} else if (host < 0) {
		snprintf(fail_buf, sizeof(fail_buf), "fork: %s", strerror(errno));
		failure = fail_buf;
	} else {
		tracked_wait(host, &status);
		if (sh->err) {
			snprintf(fail_buf, sizeof(fail_buf), "%s: %s", sh->what, strerror(sh->err));
			failure = fail_buf;
		} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			snprintf(fail_buf, sizeof(fail_buf), "the requesting child died (wait status %d)", status);
			failure = fail_buf;
		}
	}
	close(hold[1]); /* the holders see EOF and exit; their namespaces go to cleanup_net */
	for (long i = 0; i < alive; i++)
		tracked_wait(holders[i], NULL);
	free(holders);
	if (router > 0)
		tracked_wait(router, NULL);
	close(hold[0]), close(ready[0]), close(ready[1]);
	/* let the asynchronous cleanup_net work drain before the next item */
	int64_t settle = plan(ctx, 500, 2000) * NS_PER_MS;
	sleep_ns(settle);
	jv_set(ctx->params, "settle_ns", jv_int(settle));

	for (int s = 0; s < NSERIES; s++) {
		sampleset set;
		ss_init(&set);
		for (long i = 0; i < sh->n[s]; i++)
			ss_add(&set, sh->v[s][i]);
		if (s == S_PEER)
			for (long i = 0; i < sh->n[s]; i++)
				ss_add(&ctx->samples, sh->v[s][i]);
		jv *entry = item_series_add(ctx, series_names[s], &set, "ns");
		if (s == S_MOVE)
			jv_set(jv_get(entry, "params"), "directions", jv_str("A to B, then B to A, alternating"));
		ss_free(&set);
	}
	munmap(sh, sizeof(*sh));
	if (failure)
		item_fail(ctx, "%s", failure);
}
