/*
 * netns_create (root only): network namespace creation and destruction.
 *
 * Each namespace is created by unshare(CLONE_NEWNET) in a forked child that
 * then holds it by staying alive (blocked reading a pipe); the child times
 * its own unshare() call and reports it through another pipe.  No bind mount
 * or fd outlives the holders, so every namespace dies with its process
 * (PR_SET_PDEATHSIG covers the collector being killed).  Destruction in the
 * kernel is asynchronous (cleanup_net on a workqueue, net/core/net_namespace.c),
 * so "destroy_sync" is only the synchronous part: SIGKILL of the holder to its
 * reaping.  "create_destroy_pair" is the `unshare -n /bin/false` pattern
 * (fork, unshare, exit, waitpid) and "fork_exit_baseline" the same without
 * unshare, so that the namespace part can be separated.
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct report {
	int err;
	long long ns;
};

static int read_exact(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* Fork a child running unshare(CLONE_NEWNET); hold != 0 keeps it alive until hold_rd hits EOF. */
static pid_t spawn_ns_child(int hold, int hold_rd, int hold_wr, int rep_rd, int rep_wr)
{
	pid_t pid = tracked_fork();
	if (pid != 0)
		return pid;
	if (hold_wr >= 0)
		close(hold_wr);
	if (rep_rd >= 0)
		close(rep_rd);
	struct report r = {0, 0};
	int64_t t0 = now_ns();
	if (unshare(CLONE_NEWNET) != 0)
		r.err = errno;
	r.ns = now_ns() - t0;
	if (rep_wr >= 0 && write(rep_wr, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(2);
	if (hold && !r.err) {
		char c;
		while (read(hold_rd, &c, 1) < 0 && errno == EINTR)
			;
	}
	_exit(r.err ? 1 : 0);
}

/* Time fork..waitpid of a child that does (with_ns) or does not unshare. */
static int time_pair(int with_ns, double *ns_out)
{
	int64_t t0 = now_ns();
	pid_t pid = tracked_fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		if (with_ns && unshare(CLONE_NEWNET) != 0)
			_exit(1);
		_exit(0);
	}
	int status;
	tracked_wait(pid, &status);
	*ns_out = (double)(now_ns() - t0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return EPERM;
	return 0;
}

void item_netns_create(item_ctx *ctx)
{
	long want = plan(ctx, 32, 256), pairs = plan(ctx, 50, 500);
	ctx->unit = "ns";
	item_method(ctx, "Creates namespaces one after another, each by unshare(CLONE_NEWNET) in a forked "
			 "child that holds it by staying alive; samples[i] is the unshare() time measured in "
			 "the child with i namespaces already alive; series give the synchronous destroy "
			 "(SIGKILL to reap of a holder), fork+unshare+exit+waitpid pairs, and a fork+exit baseline.");
	jv_set(ctx->params, "namespaces_alive_max", jv_int(want));
	jv_set(ctx->params, "pairs", jv_int(pairs));
	if (!ctx->opt->is_root) {
		item_skip(ctx, "needs root: unshare(CLONE_NEWNET) requires CAP_SYS_ADMIN (effective uid is %d)",
			  (int)geteuid());
		return;
	}
	if (access("/proc/self/ns/net", F_OK) != 0) {
		item_skip(ctx, "kernel has no network namespaces (/proc/self/ns/net missing)");
		return;
	}
	char *limit_s = read_file_trim("/proc/sys/user/max_net_namespaces");
	if (limit_s) {
		long limit = atol(limit_s);
		jv_set(ctx->params, "max_net_namespaces", jv_int(limit));
		if (limit >= 0 && want > limit / 2)
			want = limit / 2;
		free(limit_s);
	}
	/* probe */
	double probe_ns;
	int e = time_pair(1, &probe_ns);
	if (e) {
		item_skip(ctx, "unshare(CLONE_NEWNET) fails in a child (for example inside a container "
			       "without CAP_SYS_ADMIN in the initial user namespace)");
		return;
	}

	int hold[2], rep[2];
	if (pipe2(hold, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
		item_fail(ctx, "pipe: %s", strerror(errno));
		return;
	}
	pid_t *pids = calloc((size_t)want + 1, sizeof(*pids));
	long alive = 0;
	const char *stop_reason = NULL;
	char stop_buf[256];
	jv *cva = jv_set(ctx->extra, "create_cost_vs_alive", jv_arr());
	for (long i = 0; pids && i < want; i++) {
		pid_t pid = spawn_ns_child(1, hold[0], hold[1], rep[0], rep[1]);
		if (pid < 0) {
			snprintf(stop_buf, sizeof(stop_buf), "fork: %s", strerror(errno));
			stop_reason = stop_buf;
			break;
		}
		struct report r;
		if (read_exact(rep[0], &r, sizeof(r)) != 0) {
			kill(pid, SIGKILL);
			tracked_wait(pid, NULL);
			stop_reason = "holder died before reporting";
			break;
		}
		if (r.err) {
			tracked_wait(pid, NULL);
			snprintf(stop_buf, sizeof(stop_buf), "unshare: %s", strerror(r.err));
			stop_reason = stop_buf;
			break;
		}
		pids[alive++] = pid;
		ss_add(&ctx->samples, (double)r.ns);
		jv *pt = jv_push(cva, jv_arr());
		jv_push(pt, jv_int(i));
		jv_push(pt, jv_int(r.ns));
	}
	jv_set(ctx->params, "namespaces_created", jv_int(alive));
	if (stop_reason)
		jv_set(ctx->params, "stopped_early", jv_str(stop_reason));

	sampleset destroy;
	ss_init(&destroy);
	for (long i = alive - 1; i >= 0; i--) {
		int64_t t0 = now_ns();
		kill(pids[i], SIGKILL);
		tracked_wait(pids[i], NULL);
		ss_add(&destroy, (double)(now_ns() - t0));
	}
	close(hold[0]);
	close(hold[1]);
	close(rep[0]);
	close(rep[1]);
	free(pids);

	sampleset pair, base;
	ss_init(&pair);
	ss_init(&base);
	for (long i = 0; i < pairs && !e; i++) {
		double ns;
		e = time_pair(0, &ns);
		if (!e)
			ss_add(&base, ns);
		if (!e)
			e = time_pair(1, &ns);
		if (!e)
			ss_add(&pair, ns);
	}
	/* let the asynchronous cleanup_net work drain before the next item */
	int64_t settle = plan(ctx, 500, 2000) * NS_PER_MS;
	sleep_ns(settle);
	jv_set(ctx->params, "settle_ns", jv_int(settle));

	jv *entry = item_series_add(ctx, "create_with_alive", &ctx->samples, "ns");
	jv_set(jv_get(entry, "params"), "held_by", jv_str("child processes"));
	item_series_add(ctx, "destroy_sync", &destroy, "ns");
	item_series_add(ctx, "create_destroy_pair", &pair, "ns");
	item_series_add(ctx, "fork_exit_baseline", &base, "ns");
	ss_free(&destroy);
	ss_free(&pair);
	ss_free(&base);
	if (e)
		item_fail(ctx, "create/destroy pairs failed: %s", strerror(e));
	else if (alive == 0)
		item_fail(ctx, "no namespace could be created: %s", stop_reason ? stop_reason : "unknown");
}
