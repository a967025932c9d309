/*
 * netns_script (root only): a held-back composite benchmark, the "fake router"
 * script of the netns-2014 seed story, run with the real tools:
 *
 *   ip netns add NAME
 *   ip netns exec NAME ip link set lo up
 *   ip netns exec NAME sysctl -w net.ipv4.ip_forward=1
 *   ip link add O1 type veth peer name I1 netns NAME
 *   ip link add O2 type veth peer name I2 netns NAME
 *
 * per router, every command fork()ed and exec()ed from this process, routers
 * one after another (the seed's uuidgen/cut helpers are left out).  A sample
 * is the time of one router; series give each step; `routers_per_s` gives the
 * rate overall and per block of routers, as the seed reports it.
 *
 * Cleanup: every name is recorded before the command that creates it runs.
 * cleanup_routers() deletes the host ends of the veth pairs through a netlink
 * RTM_DELLINK (which deletes the pair), detaches and removes the
 * /var/run/netns/NAME bind mounts (the namespace then dies with its last
 * reference) and, when this item created /var/run/netns or made it a mount
 * point, undoes that.  It uses only async-signal-safe system calls on static
 * arrays, and runs on the normal path and from the collector's signal handler
 * and atexit (safety_add_cleanup), after the running `ip` child is killed.
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NETNS_DIR "/var/run/netns"
#define MAX_ROUTERS 1024
#define STEPS 5

struct router {
	char ns[48];
	char link[2][16]; /* host ends; deleting one deletes its peer */
	volatile sig_atomic_t ns_pending, links_pending;
};

static struct router routers[MAX_ROUTERS];
static volatile sig_atomic_t nrouters;
static volatile sig_atomic_t dir_created, dir_was_mountpoint = 1;

static const char *step_names[STEPS] = {"netns_add", "exec_lo_up", "exec_sysctl", "veth_add_1", "veth_add_2"};

/* async-signal-safe: delete a link by name with one RTM_DELLINK request */
static void netlink_del_link(int fd, const char *name)
{
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
		char attrs[64];
	} req;
	char ack[512];
	size_t len = strlen(name) + 1;
	memset(&req, 0, sizeof(req));
	struct rtattr *rta = (struct rtattr *)req.attrs;
	rta->rta_type = IFLA_IFNAME;
	rta->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(rta), name, len);
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifinfomsg)) + RTA_ALIGN(rta->rta_len);
	req.nh.nlmsg_type = RTM_DELLINK;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	req.ifi.ifi_family = AF_UNSPEC;
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return;
	while (recv(fd, ack, sizeof(ack), 0) < 0 && errno == EINTR)
		;
}

static void dir_entry(char *buf, size_t size, const char *name)
{
	/* snprintf is not async-signal-safe: build NETNS_DIR "/" name by hand */
	size_t n = 0;
	for (const char *p = NETNS_DIR "/"; *p && n + 1 < size; p++)
		buf[n++] = *p;
	for (const char *p = name; *p && n + 1 < size; p++)
		buf[n++] = *p;
	buf[n] = 0;
}

/* async-signal-safe (no opendir): does the directory hold anything but . and ..? */
static int dir_has_entries(void)
{
	int fd = open(NETNS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4096];
	int found = 0;
	long n;
	while (!found && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct linux_dirent64 {
				unsigned long long d_ino;
				long long d_off;
				unsigned short d_reclen;
				unsigned char d_type;
				char d_name[];
			} *d = (void *)(buf + off);
			if (strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0)
				found = 1;
			off += d->d_reclen;
		}
	}
	close(fd);
	return found;
}

static void cleanup_routers(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	for (int i = nrouters - 1; i >= 0; i--) {
		struct router *r = &routers[i];
		if (r->links_pending && fd >= 0) {
			netlink_del_link(fd, r->link[0]);
			netlink_del_link(fd, r->link[1]);
		}
		r->links_pending = 0;
		if (r->ns_pending) {
			char path[128];
			dir_entry(path, sizeof(path), r->ns);
			umount2(path, MNT_DETACH);
			unlink(path);
		}
		r->ns_pending = 0;
	}
	if (fd >= 0)
		close(fd);
	nrouters = 0;
	/* undo what `ip netns add` did to the directory, unless someone else uses it now */
	if (!dir_was_mountpoint && !dir_has_entries() && umount2(NETNS_DIR, MNT_DETACH) == 0)
		dir_was_mountpoint = 1;
	if (dir_created && !dir_has_entries() && rmdir(NETNS_DIR) == 0)
		dir_created = 0;
}

static int is_mountpoint(const char *path)
{
	char *mi = read_file("/proc/self/mountinfo", NULL);
	char real[4096];
	if (!mi || !realpath(path, real)) {
		free(mi);
		return 0;
	}
	int found = 0;
	size_t rl = strlen(real);
	for (char *line = mi; line && *line && !found;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		/* fields: id parent major:minor root mountpoint ... */
		char *p = line;
		for (int f = 0; f < 4 && p; f++) {
			p = strchr(p, ' ');
			if (p)
				p++;
		}
		if (p && strncmp(p, real, rl) == 0 && (p[rl] == ' '))
			found = 1;
		line = nl ? nl + 1 : NULL;
	}
	free(mi);
	return found;
}

void item_netns_script(item_ctx *ctx)
{
	long want = plan(ctx, 20, 300), block = plan(ctx, 10, 50);
	ctx->unit = "ns";
	item_method(ctx, "The netns-2014 fake-router script with the real tools, one router after another: "
			 "ip netns add, ip netns exec ... ip link set lo up, ip netns exec ... sysctl -w "
			 "net.ipv4.ip_forward=1, and two ip link add ... type veth peer name ... netns ..., each "
			 "fork()ed and exec()ed; a sample is one router's time; series give each step; every "
			 "namespace and veth pair is removed afterwards, also on interruption.");
	jv_set(ctx->params, "routers", jv_int(want));
	jv_set(ctx->params, "block", jv_int(block));
	jv_set(ctx->params, "held_back", jv_bool(1));
	if (!ctx->opt->is_root) {
		item_skip(ctx, "needs root: ip netns add and veth creation require CAP_SYS_ADMIN and CAP_NET_ADMIN "
			       "(effective uid is %d)", (int)geteuid());
		return;
	}
	char ip_buf[256], sysctl_buf[256];
	const char *ip = find_tool("ip", ip_buf, sizeof(ip_buf));
	const char *sysctl = find_tool("sysctl", sysctl_buf, sizeof(sysctl_buf));
	if (!ip || !sysctl) {
		item_skip(ctx, "%s not found (install iproute2 and procps: apt-get install iproute2 procps)",
			  !ip ? "ip" : "sysctl");
		return;
	}
	jv_set(ctx->params, "ip", jv_str(ip));
	jv_set(ctx->params, "sysctl", jv_str(sysctl));
	if (access("/proc/self/ns/net", F_OK) != 0) {
		item_skip(ctx, "kernel has no network namespaces (/proc/self/ns/net missing)");
		return;
	}
	struct stat st;
	dir_created = stat(NETNS_DIR, &st) != 0;
	dir_was_mountpoint = dir_created ? 0 : is_mountpoint(NETNS_DIR);
	nrouters = 0;
	if (safety_add_cleanup(cleanup_routers) != 0) {
		item_fail(ctx, "no room for a cleanup handler");
		return;
	}
	if (want > MAX_ROUTERS)
		want = MAX_ROUTERS;

	sampleset steps[STEPS];
	for (int k = 0; k < STEPS; k++)
		ss_init(&steps[k]);
	jv *blocks = jv_arr();
	int pid = (int)getpid();
	int64_t t_start = now_ns(), t_block = t_start;
	long done = 0;
	const char *failure = NULL;
	char fail_buf[256];
	for (long i = 0; i < want; i++) {
		struct router *r = &routers[i];
		snprintf(r->ns, sizeof(r->ns), "rcusim-%d-%ld", pid, i);
		snprintf(r->link[0], sizeof(r->link[0]), "rs%do%ld", pid % 10000000, i);
		snprintf(r->link[1], sizeof(r->link[1]), "rs%dg%ld", pid % 10000000, i);
		char in0[16], in1[16];
		snprintf(in0, sizeof(in0), "rs%di%ld", pid % 10000000, i);
		snprintf(in1, sizeof(in1), "rs%dh%ld", pid % 10000000, i);
		/* recorded before the commands that create them run */
		r->ns_pending = 1;
		r->links_pending = 1;
		nrouters = (sig_atomic_t)(i + 1);
		char *cmds[STEPS][16] = {
			{(char *)ip, "netns", "add", r->ns, NULL},
			{(char *)ip, "netns", "exec", r->ns, (char *)ip, "link", "set", "lo", "up", NULL},
			{(char *)ip, "netns", "exec", r->ns, (char *)sysctl, "-w", "net.ipv4.ip_forward=1", NULL},
			{(char *)ip, "link", "add", r->link[0], "type", "veth", "peer", "name", in0, "netns", r->ns, NULL},
			{(char *)ip, "link", "add", r->link[1], "type", "veth", "peer", "name", in1, "netns", r->ns, NULL},
		};
		int64_t router_ns = 0;
		for (int k = 0; k < STEPS; k++) {
			int64_t ns = 0;
			int rc = run_cmd(cmds[k], &ns);
			if (rc != 0) {
				snprintf(fail_buf, sizeof(fail_buf), "router %ld: '%s %s %s' failed (status %d)", i,
					 cmds[k][0], cmds[k][1], cmds[k][2], rc);
				failure = fail_buf;
				break;
			}
			ss_add(&steps[k], (double)ns);
			router_ns += ns;
		}
		if (failure)
			break;
		ss_add(&ctx->samples, (double)router_ns);
		done++;
		if (done % block == 0) {
			int64_t now = now_ns();
			jv *b = jv_push(blocks, jv_obj());
			jv_set(b, "routers_before", jv_int(done - block));
			jv_set(b, "routers", jv_int(block));
			jv_set(b, "routers_per_s", jv_num((double)block * 1e9 / (double)(now - t_block)));
			t_block = now;
		}
	}
	int64_t elapsed = now_ns() - t_start;
	int64_t c0 = now_ns();
	cleanup_routers();
	safety_remove_cleanup(cleanup_routers);
	int64_t cleanup_ns = now_ns() - c0;
	/* let the asynchronous cleanup_net work drain before the next item */
	int64_t settle = plan(ctx, 500, 2000) * NS_PER_MS;
	sleep_ns(settle);

	jv_set(ctx->params, "routers_created", jv_int(done));
	jv_set(ctx->params, "cleanup_ns", jv_int(cleanup_ns));
	jv_set(ctx->params, "settle_ns", jv_int(settle));
	jv_set(ctx->params, "elapsed_ns", jv_int(elapsed));
	jv *rate = jv_set(ctx->extra, "routers_per_s", jv_obj());
	jv_set(rate, "overall", jv_num(done ? (double)done * 1e9 / (double)elapsed : 0.0));
	jv_set(rate, "blocks", blocks);
	for (int k = 0; k < STEPS; k++) {
		item_series_add(ctx, step_names[k], &steps[k], "ns");
		ss_free(&steps[k]);
	}
	if (failure)
		item_fail(ctx, "%s", failure);
}
