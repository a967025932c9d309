/*
 * Items built on two threads exchanging messages over a pipe pair or an
 * AF_UNIX stream socketpair: context_switch, cross_cpu_wakeup, pipe_message,
 * unix_socket_message.  Both threads are pinned (thread A to cpu_a, B to cpu_b).
 * context_switch_process runs B in a forked child instead (a process of its own:
 * every switch between A and B changes the address space, switch_mm).
 *
 * ping-pong: A writes a message, B reads it and writes one back, A reads it;
 *   a batch of round trips is timed by A and reported as round trip / 2.
 * stream: A writes messages as fast as it can, B reads them; B times batches
 *   of messages and reports the mean inter-message time (cost per message).
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum chan_kind { CHAN_PIPE, CHAN_UNIX };
enum pp_mode { PP_PINGPONG, PP_STREAM };

struct pp {
	enum chan_kind kind;
	enum pp_mode mode;
	int cpu_a, cpu_b;
	size_t msg;
	int proc; /* B is a forked child process, not a thread (ping-pong over pipes only) */
	long per_batch, batches, warm;
	int a_rd, a_wr, b_rd, b_wr;
	sampleset *out;
	int err_a, err_b; /* errno values */
};

static int read_full(int fd, char *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? 0 : -errno;
		got += (size_t)r;
	}
	return 1;
}

static int write_full(int fd, const char *buf, size_t n)
{
	size_t put = 0;
	while (put < n) {
		ssize_t w = write(fd, buf + put, n - put);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		put += (size_t)w;
	}
	return 1;
}

static void *thread_b(void *arg)
{
	struct pp *p = arg;
	char buf[4096];
	if (pin_self_to_cpu(p->cpu_b) < 0) {
		p->err_b = EINVAL;
		return NULL;
	}
	if (p->mode == PP_PINGPONG) {
		for (;;) {
			int r = read_full(p->b_rd, buf, p->msg);
			if (r <= 0) {
				p->err_b = r < 0 ? -r : 0;
				return NULL;
			}
			r = write_full(p->b_wr, buf, p->msg);
			if (r < 0) {
				p->err_b = -r;
				return NULL;
			}
		}
	}
	/* stream: receiver side does the timing */
	long i = 0;
	int64_t t0 = 0;
	for (;;) {
		int r = read_full(p->b_rd, buf, p->msg);
		if (r <= 0) {
			p->err_b = r < 0 ? -r : 0;
			return NULL;
		}
		i++;
		if (i == p->warm)
			t0 = now_ns();
		else if (i > p->warm && (i - p->warm) % p->per_batch == 0) {
			int64_t t1 = now_ns();
			ss_add(p->out, (double)(t1 - t0) / (double)p->per_batch);
			t0 = t1;
		}
	}
}

static void *thread_a(void *arg)
{
	struct pp *p = arg;
	char buf[4096];
	memset(buf, 'x', sizeof(buf));
	if (pin_self_to_cpu(p->cpu_a) < 0) {
		p->err_a = EINVAL;
		goto out;
	}
	if (p->mode == PP_PINGPONG) {
		for (long b = -1; b < p->batches; b++) { /* batch -1 warms up */
			long rounds = b < 0 ? p->warm : p->per_batch;
			int64_t t0 = now_ns();
			for (long i = 0; i < rounds; i++) {
				int r = write_full(p->a_wr, buf, p->msg);
				if (r > 0)
					r = read_full(p->a_rd, buf, p->msg);
				if (r <= 0) {
					p->err_a = r < 0 ? -r : EPIPE;
					goto out;
				}
			}
			int64_t t1 = now_ns();
			if (b >= 0)
				ss_add(p->out, (double)(t1 - t0) / (double)rounds / 2.0);
		}
	} else {
		long total = p->warm + p->per_batch * p->batches;
		for (long i = 0; i < total; i++) {
			int r = write_full(p->a_wr, buf, p->msg);
			if (r < 0) {
				p->err_a = -r;
				goto out;
			}
		}
	}
out:
	/* end of stream for B */
	if (p->kind == CHAN_UNIX)
		shutdown(p->a_wr, SHUT_WR);
	else
		close(p->a_wr);
	return NULL;
}

/* B in a forked child (tracked: killed and reaped on SIGINT/SIGTERM), A in a thread of the
 * collector as in the thread case; the child exits at end of stream with 0 or its errno.
 * Closes the four pipe fds.  Returns 0 or an errno value. */
static int run_pp_process(struct pp *p)
{
	int rc = 0;
	pid_t pid = tracked_fork();
	if (pid == 0) {
		close(p->a_wr);
		close(p->a_rd);
		thread_b(p);
		_exit(p->err_b & 0xff);
	}
	if (pid < 0)
		rc = errno;
	close(p->b_rd);
	close(p->b_wr);
	if (rc == 0) {
		pthread_t ta;
		rc = spawn_thread(thread_a, p, &ta);
		if (rc == 0)
			pthread_join(ta, NULL); /* thread_a closes a_wr: end of stream for B */
		else
			close(p->a_wr);
		int status = 0;
		tracked_wait(pid, &status);
		if (rc == 0 && !p->err_a && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
			p->err_b = WIFEXITED(status) ? WEXITSTATUS(status) : ECHILD;
	} else {
		close(p->a_wr);
	}
	close(p->a_rd);
	if (rc)
		return rc;
	return p->err_a ? p->err_a : p->err_b;
}

/* Returns 0 or an errno value. */
static int run_pp(struct pp *p)
{
	int fds[4] = {-1, -1, -1, -1};
	if (p->kind == CHAN_PIPE) {
		if (pipe2(fds, O_CLOEXEC) != 0 || pipe2(fds + 2, O_CLOEXEC) != 0) {
			int e = errno;
			for (int i = 0; i < 4; i++)
				if (fds[i] >= 0)
					close(fds[i]);
			return e;
		}
		p->b_rd = fds[0];
		p->a_wr = fds[1];
		p->a_rd = fds[2];
		p->b_wr = fds[3];
	} else {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
			return errno;
		p->a_rd = p->a_wr = fds[0];
		p->b_rd = p->b_wr = fds[1];
	}
	p->err_a = p->err_b = 0;
	if (p->proc)
		return run_pp_process(p);
	pthread_t ta, tb;
	int rc = spawn_thread(thread_b, p, &tb);
	if (rc == 0) {
		rc = spawn_thread(thread_a, p, &ta);
		if (rc == 0)
			pthread_join(ta, NULL);
		else if (p->kind == CHAN_UNIX)
			shutdown(p->a_wr, SHUT_WR);
		else
			close(p->a_wr);
		pthread_join(tb, NULL);
	}
	for (int i = 0; i < 4; i++)
		if (fds[i] >= 0 && !(p->kind == CHAN_PIPE && fds[i] == p->a_wr))
			close(fds[i]);
	if (rc)
		return rc;
	return p->err_a ? p->err_a : p->err_b;
}

static void pingpong_params(item_ctx *ctx, const struct pp *p)
{
	jv_set(ctx->params, "cpu_a", jv_int(p->cpu_a));
	jv_set(ctx->params, "cpu_b", jv_int(p->cpu_b));
	jv_set(ctx->params, "message_bytes", jv_int((long long)p->msg));
	jv_set(ctx->params, "round_trips_per_batch", jv_int(p->per_batch));
	jv_set(ctx->params, "batches", jv_int(p->batches));
	jv_set(ctx->params, "execution_context", jv_str(p->proc ? "processes" : "threads"));
}

void item_context_switch(item_ctx *ctx)
{
	struct pp p = {.kind = CHAN_PIPE, .mode = PP_PINGPONG, .msg = 1, .per_batch = 100,
		       .batches = plan(ctx, 100, 1000), .warm = 1000, .out = &ctx->samples};
	p.cpu_a = p.cpu_b = ctx->opt->cpus[0];
	ctx->unit = "ns";
	item_method(ctx, "Two threads pinned to the same CPU ping-pong a 1-byte message over two pipes; "
			 "a batch of round trips is timed and divided by 2 (one switch per one-way trip), "
			 "so each figure includes one pipe write and one pipe read.");
	pingpong_params(ctx, &p);
	int e = run_pp(&p);
	if (e)
		item_fail(ctx, "pipe ping-pong: %s", strerror(e));
}

/* A ring of RING_N tasks pinned to one CPU: member i reads a byte from pipe i and writes it to
 * pipe (i+1) % n; member 0 (a collector thread) times batches of laps, a sample is ns per hop
 * (one switch each).  RING_N exceeds the kernel's per-CPU PCID slots (arch/x86: 6
 * TLB_NR_DYN_ASIDS, given out round robin by choose_new_asid), so with processes every switch
 * finds no ASID of its mm and flushes; with threads the mm never changes. */
#define RING_N 8

struct ring {
	int n, cpu, proc;
	long laps, batches, warm;
	int rd[RING_N], wr[RING_N]; /* pipe i: wr[i] -> rd[i] */
	sampleset *out;
	int err; /* member 0's errno */
};

struct ring_member {
	struct ring *r;
	int i;
};

static void ring_forward(struct ring *r, int i)
{
	char c;
	while (read_full(r->rd[i], &c, 1) > 0 && write_full(r->wr[(i + 1) % r->n], &c, 1) > 0)
		;
}

static void *ring_thread(void *arg)
{
	struct ring_member *m = arg;
	struct ring *r = m->r;
	if (pin_self_to_cpu(r->cpu) == 0)
		ring_forward(r, m->i);
	close(r->wr[(m->i + 1) % r->n]); /* end of stream for the next member */
	return NULL;
}

static void *ring_timer(void *arg)
{
	struct ring *r = arg;
	char c = 'x';
	if (pin_self_to_cpu(r->cpu) < 0) {
		r->err = EINVAL;
		goto out;
	}
	for (long b = -1; b < r->batches; b++) {
		long laps = b < 0 ? r->warm : r->laps;
		int64_t t0 = now_ns();
		for (long l = 0; l < laps; l++) {
			int e = write_full(r->wr[1], &c, 1);
			if (e > 0)
				e = read_full(r->rd[0], &c, 1);
			if (e <= 0) {
				r->err = e < 0 ? -e : EPIPE;
				goto out;
			}
		}
		if (b >= 0)
			ss_add(r->out, (double)(now_ns() - t0) / (double)laps / (double)r->n);
	}
out:
	close(r->wr[1]);
	return NULL;
}

/* Returns 0 or an errno value; closes every pipe. */
static int run_ring(struct ring *r)
{
	int rc = 0, made = 0;
	for (; made < r->n; made++) {
		int fds[2];
		if (pipe2(fds, O_CLOEXEC) != 0) {
			rc = errno;
			break;
		}
		r->rd[made] = fds[0];
		r->wr[made] = fds[1];
	}
	if (rc) {
		for (int i = 0; i < made; i++) {
			close(r->rd[i]);
			close(r->wr[i]);
		}
		return rc;
	}
	r->err = 0;
	pid_t pids[RING_N] = {0};
	pthread_t tids[RING_N];
	struct ring_member mem[RING_N];
	int started = 1; /* members 1..started-1 run */
	for (; started < r->n && !rc; started++) {
		int i = started;
		if (r->proc) {
			pid_t pid = tracked_fork();
			if (pid == 0) {
				for (int k = 0; k < r->n; k++) {
					if (k != i)
						close(r->rd[k]);
					if (k != (i + 1) % r->n)
						close(r->wr[k]);
				}
				if (pin_self_to_cpu(r->cpu) == 0)
					ring_forward(r, i);
				_exit(0);
			}
			if (pid < 0) {
				rc = errno;
				break;
			}
			pids[i] = pid;
		} else {
			mem[i] = (struct ring_member){r, i};
			rc = spawn_thread(ring_thread, &mem[i], &tids[i]);
			if (rc)
				break;
		}
	}
	pthread_t timer;
	if (rc == 0) {
		rc = spawn_thread(ring_timer, r, &timer);
		if (rc == 0)
			pthread_join(timer, NULL);
		else
			close(r->wr[1]);
	} else {
		close(r->wr[1]); /* the members started see end of stream in turn */
		if (!r->proc) /* the out ends of the members that never started */
			for (int k = started + 1; k <= r->n; k++)
				close(r->wr[k % r->n]);
	}
	if (r->proc) {
		/* the parent's copies of the members' ends: closed so that end of stream travels on */
		for (int i = 2; i < r->n; i++)
			close(r->wr[i]);
		close(r->wr[0]);
		for (int i = 1; i < r->n; i++) {
			if (pids[i] > 0) {
				int status = 0;
				kill(pids[i], SIGKILL); /* a member stuck for any reason; normally gone already */
				tracked_wait(pids[i], &status);
			}
		}
	} else {
		for (int i = 1; i < started; i++)
			pthread_join(tids[i], NULL);
	}
	for (int i = 0; i < r->n; i++)
		close(r->rd[i]);
	return rc ? rc : r->err;
}

void item_context_switch_process(item_ctx *ctx)
{
	/* Interleaved rounds of the same ping-pong between two threads (series "threads") and
	 * between two processes (the item's samples), so that machine noise that comes and goes
	 * (other work, frequency) touches both alike and the difference of the medians is the
	 * cost of changing address space. */
	const long rounds = 10, per_round = plan(ctx, 10, 100);
	struct pp p = {.kind = CHAN_PIPE, .mode = PP_PINGPONG, .msg = 1, .proc = 1, .per_batch = 100,
		       .batches = rounds * per_round, .warm = 1000, .out = &ctx->samples};
	p.cpu_a = p.cpu_b = ctx->opt->cpus[0];
	ctx->unit = "ns";
	item_method(ctx, "As context_switch, but B is a forked child process: two processes (two address "
			 "spaces) pinned to the same CPU ping-pong a 1-byte message over two pipes; a batch of "
			 "round trips is timed and divided by 2 (one switch between address spaces per one-way "
			 "trip, including one pipe write and one pipe read). Series threads: the same between two "
			 "threads, in %ld rounds alternating with the processes' (a fresh pair and warm-up each "
			 "round). Processes minus threads (medians) is the cost of switch_mm and the TLB and "
			 "cache refill after it, with the two mms keeping their PCIDs. Series ring%d_threads and "
			 "ring%d_processes (same rounds): %d members on the same CPU pass one byte round a ring of "
			 "pipes, a sample is a batch of laps / (laps x %d), ns per hop (one switch each); %d "
			 "address spaces are more than x86's 6 per-CPU PCIDs (TLB_NR_DYN_ASIDS), so with processes "
			 "every switch takes a new ASID and flushes the TLB.", rounds, RING_N, RING_N, RING_N, RING_N, RING_N);
	pingpong_params(ctx, &p);
	jv_set(ctx->params, "rounds", jv_int(rounds));
	sampleset thr, ring_thr, ring_proc;
	ss_init(&thr);
	ss_init(&ring_thr);
	ss_init(&ring_proc);
	const long ring_batches = plan(ctx, 3, 20), ring_laps = 100;
	int e = 0;
	for (long r = 0; r < rounds && !e; r++) {
		struct pp t = p;
		t.proc = 0;
		t.batches = per_round;
		t.out = &thr;
		e = run_pp(&t);
		if (e) {
			item_fail(ctx, "pipe ping-pong between threads: %s", strerror(e));
			break;
		}
		struct pp q = p;
		q.batches = per_round;
		e = run_pp(&q);
		if (e) {
			item_fail(ctx, "pipe ping-pong between processes: %s", strerror(e));
			break;
		}
		for (int proc = 0; proc < 2 && !e; proc++) {
			struct ring rg = {.n = RING_N, .cpu = p.cpu_a, .proc = proc, .laps = ring_laps,
					  .batches = ring_batches, .warm = 100, .out = proc ? &ring_proc : &ring_thr};
			e = run_ring(&rg);
			if (e)
				item_fail(ctx, "ring of %d %s: %s", RING_N, proc ? "processes" : "threads", strerror(e));
		}
	}
	if (!e) {
		jv *entry = item_series_add(ctx, "threads", &thr, "ns");
		jv *prm = jv_get(entry, "params");
		jv_set(prm, "execution_context", jv_str("threads"));
		jv_set(prm, "round_trips_per_batch", jv_int(p.per_batch));
		jv_set(prm, "batches", jv_int(rounds * per_round));
		for (int proc = 0; proc < 2; proc++) {
			char label[32];
			snprintf(label, sizeof(label), "ring%d_%s", RING_N, proc ? "processes" : "threads");
			entry = item_series_add(ctx, label, proc ? &ring_proc : &ring_thr, "ns");
			prm = jv_get(entry, "params");
			jv_set(prm, "execution_context", jv_str(proc ? "processes" : "threads"));
			jv_set(prm, "ring_members", jv_int(RING_N));
			jv_set(prm, "laps_per_batch", jv_int(ring_laps));
			jv_set(prm, "batches", jv_int(rounds * ring_batches));
		}
	}
	ss_free(&thr);
	ss_free(&ring_thr);
	ss_free(&ring_proc);
}

void item_cross_cpu_wakeup(item_ctx *ctx)
{
	ctx->unit = "ns";
	item_method(ctx, "Two threads pinned to two different CPUs ping-pong a 1-byte message over two pipes; "
			 "a batch of round trips is timed and divided by 2 (one remote wakeup per one-way trip, "
			 "including pipe write and read and any idle-exit latency of the woken CPU).");
	if (ctx->opt->ncpus < 2) {
		item_skip(ctx, "only one CPU is online or allowed, no cross-CPU pair exists");
		return;
	}
	struct pp p = {.kind = CHAN_PIPE, .mode = PP_PINGPONG, .msg = 1, .per_batch = 100,
		       .batches = plan(ctx, 100, 1000), .warm = 1000, .out = &ctx->samples};
	p.cpu_a = ctx->opt->cpus[0];
	p.cpu_b = ctx->opt->cpus[1];
	pingpong_params(ctx, &p);
	int e = run_pp(&p);
	if (e)
		item_fail(ctx, "pipe ping-pong: %s", strerror(e));
}

static void message_item(item_ctx *ctx, enum chan_kind kind)
{
	const char *what = kind == CHAN_PIPE ? "a pair of pipes" : "an AF_UNIX SOCK_STREAM socketpair";
	ctx->unit = "ns";
	item_method(ctx, "100-byte messages between two pinned threads over %s: ping-pong series report "
			 "round trip / 2 (one-way latency), stream series report the receiver's mean time per "
			 "message while the sender writes back to back; top-level samples are the cross-CPU "
			 "ping-pong (same-CPU when only one CPU is available).", what);
	int two = ctx->opt->ncpus >= 2;
	jv_set(ctx->params, "message_bytes", jv_int(100));
	jv_set(ctx->params, "channel", jv_str(kind == CHAN_PIPE ? "pipe" : "unix_stream"));
	jv_set(ctx->params, "primary_series", jv_str(two ? "cross_cpu_pingpong" : "same_cpu_pingpong"));
	struct {
		const char *label;
		enum pp_mode mode;
		int cross;
	} cases[] = {
		{"same_cpu_pingpong", PP_PINGPONG, 0},
		{"cross_cpu_pingpong", PP_PINGPONG, 1},
		{"same_cpu_stream", PP_STREAM, 0},
		{"cross_cpu_stream", PP_STREAM, 1},
	};
	for (size_t c = 0; c < ARRAY_LEN(cases); c++) {
		if (cases[c].cross && !two)
			continue;
		sampleset s;
		ss_init(&s);
		struct pp p = {.kind = kind, .mode = cases[c].mode, .msg = 100,
			       .cpu_a = ctx->opt->cpus[0],
			       .cpu_b = cases[c].cross ? ctx->opt->cpus[1] : ctx->opt->cpus[0],
			       .out = &s};
		if (p.mode == PP_PINGPONG) {
			p.per_batch = 100;
			p.batches = plan(ctx, 50, 500);
			p.warm = 500;
		} else {
			p.per_batch = 1000;
			p.batches = plan(ctx, 30, 300);
			p.warm = 2000;
		}
		int e = run_pp(&p);
		if (e) {
			item_fail(ctx, "%s: %s", cases[c].label, strerror(e));
			ss_free(&s);
			return;
		}
		jv *entry = item_series_add(ctx, cases[c].label, &s, "ns");
		jv *prm = jv_get(entry, "params");
		jv_set(prm, "mode", jv_str(p.mode == PP_PINGPONG ? "pingpong" : "stream"));
		jv_set(prm, "cpu_a", jv_int(p.cpu_a));
		jv_set(prm, "cpu_b", jv_int(p.cpu_b));
		jv_set(prm, p.mode == PP_PINGPONG ? "round_trips_per_batch" : "messages_per_batch",
		       jv_int(p.per_batch));
		jv_set(prm, "batches", jv_int(p.batches));
		if (p.mode == PP_PINGPONG && cases[c].cross == two)
			for (size_t i = 0; i < s.n; i++)
				ss_add(&ctx->samples, s.v[i]);
		ss_free(&s);
	}
}

void item_pipe_message(item_ctx *ctx) { message_item(ctx, CHAN_PIPE); }
void item_unix_socket_message(item_ctx *ctx) { message_item(ctx, CHAN_UNIX); }
