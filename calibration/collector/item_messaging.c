/*
 * messaging: a held-back composite benchmark, `perf bench sched messaging -p`
 * (hackbench) style (tools/perf/bench/sched-messaging.c).
 *
 * G groups; in each, F receivers each owning one pipe and F senders that each
 * write L messages of 100 bytes to every receiver of their group, so a
 * receiver reads F * L messages.  Every child is a forked process.  Children
 * report ready on a pipe, then poll() a shared wakeup pipe; the parent waits
 * for all of them, takes the start time, writes one byte that wakes every
 * poller, reaps every child and takes the end time.  A sample is that time.
 *
 * rcusim never fits a parameter to this item: it is predicted from the
 * microbenchmark fit and compared by `rcusim validate --profile`.
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define MSG_BYTES 100

struct msg_config {
	const char *label;
	int groups, fds;
	long loops;
};

static int write_all(int fd, const char *buf, size_t n)
{
	size_t put = 0;
	while (put < n) {
		ssize_t w = write(fd, buf + put, n - put);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		put += (size_t)w;
	}
	return 0;
}

/* ready(): tell the parent we exist, then wait for the start signal (as perf does). */
static void child_ready(int ready_wr, int wake_rd)
{
	char c = 'r';
	if (write_all(ready_wr, &c, 1) != 0)
		_exit(3);
	struct pollfd p = {.fd = wake_rd, .events = POLLIN};
	while (poll(&p, 1, -1) < 0)
		if (errno != EINTR)
			_exit(3);
}

static void receiver(int in_fd, long packets, int ready_wr, int wake_rd)
{
	child_ready(ready_wr, wake_rd);
	char data[MSG_BYTES];
	for (long i = 0; i < packets; i++) {
		size_t done = 0;
		while (done < MSG_BYTES) {
			ssize_t r = read(in_fd, data + done, MSG_BYTES - done);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				_exit(4);
			done += (size_t)r;
		}
	}
	_exit(0);
}

static void sender(const int *out_fds, int nfds, long loops, int ready_wr, int wake_rd)
{
	char data[MSG_BYTES];
	memset(data, 'm', sizeof(data));
	child_ready(ready_wr, wake_rd);
	for (long i = 0; i < loops; i++)
		for (int j = 0; j < nfds; j++)
			if (write_all(out_fds[j], data, MSG_BYTES) != 0)
				_exit(5);
	_exit(0);
}

/* One run; returns 0 and the time in *ns, or an errno-style code with a reason. */
static int run_once(const struct msg_config *c, double *ns, char *err, size_t errlen)
{
	int ready[2] = {-1, -1}, wake[2] = {-1, -1};
	int64_t t0 = 0;
	int nchildren = c->groups * c->fds * 2, forked = 0, rc = 0;
	pid_t *pids = calloc((size_t)nchildren, sizeof(*pids));
	int *out_fds = calloc((size_t)c->fds, sizeof(*out_fds));
	if (!pids || !out_fds) {
		snprintf(err, errlen, "out of memory");
		rc = ENOMEM;
		goto out;
	}
	if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(wake, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		rc = errno;
		goto out;
	}
	for (int g = 0; g < c->groups && !rc; g++) {
		for (int r = 0; r < c->fds; r++)
			out_fds[r] = -1;
		for (int r = 0; r < c->fds && !rc; r++) {
			int fds[2];
			if (pipe2(fds, O_CLOEXEC) != 0) {
				snprintf(err, errlen, "pipe: %s", strerror(errno));
				rc = errno;
				break;
			}
			pid_t pid = tracked_fork();
			if (pid == 0)
				receiver(fds[0], (long)c->fds * c->loops, ready[1], wake[0]);
			close(fds[0]);
			out_fds[r] = fds[1];
			if (pid < 0) {
				snprintf(err, errlen, "fork: %s", strerror(errno));
				rc = errno;
				break;
			}
			pids[forked++] = pid;
		}
		for (int s = 0; s < c->fds && !rc; s++) {
			pid_t pid = tracked_fork();
			if (pid == 0)
				sender(out_fds, c->fds, c->loops, ready[1], wake[0]);
			if (pid < 0) {
				snprintf(err, errlen, "fork: %s", strerror(errno));
				rc = errno;
				break;
			}
			pids[forked++] = pid;
		}
		for (int r = 0; r < c->fds; r++)
			if (out_fds[r] >= 0)
				close(out_fds[r]);
	}
	if (rc) {
		for (int i = 0; i < forked; i++)
			kill(pids[i], SIGKILL);
		goto reap;
	}
	/* wait until every child is ready */
	for (int got = 0; got < nchildren;) {
		char buf[256];
		size_t want = (size_t)(nchildren - got) < sizeof(buf) ? (size_t)(nchildren - got) : sizeof(buf);
		ssize_t r = read(ready[0], buf, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(err, errlen, "a child died before it was ready");
			rc = EPIPE;
			for (int i = 0; i < forked; i++)
				kill(pids[i], SIGKILL);
			goto reap;
		}
		got += (int)r;
	}
	t0 = now_ns();
	if (write_all(wake[1], "w", 1) != 0) {
		snprintf(err, errlen, "write to the wakeup pipe: %s", strerror(errno));
		rc = errno;
		for (int i = 0; i < forked; i++)
			kill(pids[i], SIGKILL);
		goto reap;
	}
reap:
	for (int i = 0; i < forked; i++) {
		int status = 0;
		tracked_wait(pids[i], &status);
		if (!rc && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
			snprintf(err, errlen, "a child failed (status 0x%x)", status);
			rc = ECHILD;
		}
	}
	if (!rc)
		*ns = (double)(now_ns() - t0);
out:
	for (int i = 0; i < 2; i++) {
		if (ready[i] >= 0)
			close(ready[i]);
		if (wake[i] >= 0)
			close(wake[i]);
	}
	free(pids);
	free(out_fds);
	return rc;
}

struct msg_job_out {
	int rc;
	double ns;
	double nvcsw, nivcsw, user_s, sys_s; /* of the run's children (getrusage RUSAGE_CHILDREN) */
	char err[256];
};

/* spawner job: one run of the configuration given as input, with the children it reaped */
static void msg_job(const void *in, size_t inlen, void *out, size_t outlen)
{
	const struct msg_config *c = in;
	struct msg_job_out *o = out;
	(void)inlen;
	(void)outlen;
	struct rusage r0, r1;
	getrusage(RUSAGE_CHILDREN, &r0);
	o->rc = run_once(c, &o->ns, o->err, sizeof(o->err));
	getrusage(RUSAGE_CHILDREN, &r1);
	o->nvcsw = (double)(r1.ru_nvcsw - r0.ru_nvcsw);
	o->nivcsw = (double)(r1.ru_nivcsw - r0.ru_nivcsw);
	o->user_s = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
		    (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6;
	o->sys_s = (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
		   (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
}

void item_messaging(item_ctx *ctx)
{
	/* 200,000 messages each: a fraction of a second per run on 2 CPUs, and cheap to simulate */
	const struct msg_config configs[] = {
		{"groups_1", 1, 20, 500},
		{"groups_2", 2, 20, 250},
		{"groups_4", 4, 20, 125},
	};
	/* The configurations alternate run by run (g1, g2, g4, g1, ...), so that a slow drift of the
	 * machine (a guest's host) spreads over all three instead of shifting one against the others;
	 * 21 runs each, as the medians of 7 moved by 20-35 % between two collections minutes apart. */
	enum { NCONF = ARRAY_LEN(configs) };
	long reps = plan(ctx, 2, 21), warm = 1;
	ctx->unit = "ns";
	item_method(ctx, "perf bench sched messaging -p style (hackbench): G groups of F receivers (one pipe "
			 "each) and F senders (processes) writing L 100-byte messages to every receiver of their "
			 "group; time from the start signal (one byte on a pipe every child polls) to the reaping "
			 "of the last child; the children are forked by the spawner, a small process forked at the "
			 "collector's start. One sample per run; the configurations alternate run by run; series "
			 "per configuration; top level = groups_2.");
	jv_set(ctx->params, "message_bytes", jv_int(MSG_BYTES));
	jv_set(ctx->params, "transport", jv_str("pipe"));
	jv_set(ctx->params, "mode", jv_str("process"));
	jv_set(ctx->params, "runs_per_config", jv_int(reps));
	jv_set(ctx->params, "order", jv_str("interleaved"));
	jv_set(ctx->params, "primary_series", jv_str("groups_2"));
	jv_set(ctx->params, "held_back", jv_bool(1));
	sampleset s[NCONF];
	/* what the children did over the measured runs: context switches and CPU time */
	double nvcsw[NCONF] = {0}, nivcsw[NCONF] = {0}, user_s[NCONF] = {0}, sys_s[NCONF] = {0};
	for (size_t k = 0; k < NCONF; k++)
		ss_init(&s[k]);
	for (long i = 0; i < reps + warm; i++) {
		for (size_t k = 0; k < NCONF; k++) {
			const struct msg_config *c = &configs[k];
			struct msg_job_out o;
			/* forked by the spawner (see util_safety.c), not by the grown collector */
			int rc = spawner_call(msg_job, c, sizeof(*c), &o, sizeof(o));
			if (rc < 0)
				snprintf(o.err, sizeof(o.err), "the spawner process failed: %s", strerror(-rc));
			else
				rc = o.rc;
			if (rc) {
				item_fail(ctx, "%s: %s", c->label, o.err);
				for (size_t j = 0; j < NCONF; j++)
					ss_free(&s[j]);
				return;
			}
			if (i < warm)
				continue;
			ss_add(&s[k], o.ns);
			nvcsw[k] += o.nvcsw;
			nivcsw[k] += o.nivcsw;
			user_s[k] += o.user_s;
			sys_s[k] += o.sys_s;
		}
	}
	for (size_t k = 0; k < NCONF; k++) {
		const struct msg_config *c = &configs[k];
		jv *e = item_series_add(ctx, c->label, &s[k], "ns");
		jv *p = jv_get(e, "params");
		double runs = (double)reps;
		jv_set(p, "voluntary_switches_per_run", jv_num(nvcsw[k] / runs));
		jv_set(p, "involuntary_switches_per_run", jv_num(nivcsw[k] / runs));
		jv_set(p, "user_s_per_run", jv_num(user_s[k] / runs));
		jv_set(p, "system_s_per_run", jv_num(sys_s[k] / runs));
		jv_set(p, "groups", jv_int(c->groups));
		jv_set(p, "senders", jv_int(c->fds));
		jv_set(p, "receivers", jv_int(c->fds));
		jv_set(p, "loops", jv_int(c->loops));
		jv_set(p, "messages", jv_int((long long)c->groups * c->fds * c->fds * c->loops));
		if (!strcmp(c->label, "groups_2"))
			for (size_t i = 0; i < s[k].n; i++)
				ss_add(&ctx->samples, s[k].v[i]);
		ss_free(&s[k]);
	}
}
