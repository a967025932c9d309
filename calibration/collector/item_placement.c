/*
 * wake_placement: on which CPU the scheduler runs a woken task that may run anywhere.
 *
 * Thread A is pinned to the first allowed CPU; thread B may run on every allowed CPU and
 * sleeps in read() on a pipe.  Every 1 ms (so that the other CPUs are idle, as around an
 * isolated system call) A writes a byte; B wakes, notes sched_getcpu() and writes a byte
 * back; A reads it.  Mainline select_task_rq_fair() (kernel/sched/fair.c: wake_affine_idle,
 * select_idle_sibling) sends such a wakee to an idle CPU that shares the waker's cache when
 * the waker's CPU is busy; some guest kernels instead keep it on the waker's CPU, which
 * saves the wakeup of an idle virtual CPU.  Series 'waker_cpu_shared' repeats the run with a
 * user-mode spinner pinned to A's CPU, so that A is not alone there.  Series 'fork' asks the
 * same of a new task: mainline wake_up_new_task() -> select_task_rq_fair(SD_BALANCE_FORK)
 * (sched_balance_find_dst_cpu) starts the child on the idlest CPU, i.e. an idle one, not on
 * its running parent's.
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct placement {
	int rd_b, wr_b, rd_a, wr_a; /* B reads rd_b and answers on wr_a; A the reverse */
	long rounds;
	int *cpu_of_b; /* per round */
	int err;
};

static void *placement_b(void *arg)
{
	struct placement *p = arg;
	char c;
	for (long i = 0; i < p->rounds; i++) {
		ssize_t r;
		do
			r = read(p->rd_b, &c, 1);
		while (r < 0 && errno == EINTR);
		if (r != 1) {
			p->err = r < 0 ? errno : EPIPE;
			return NULL;
		}
		p->cpu_of_b[i] = sched_getcpu();
		if (write(p->wr_a, &c, 1) != 1) {
			p->err = errno;
			return NULL;
		}
	}
	return NULL;
}

/* Let the calling thread run on every CPU the collector may use (threads it creates inherit
 * that); 0 or an errno value. */
static int allow_every_cpu(const struct options *opt)
{
	cpu_set_t all;
	CPU_ZERO(&all);
	for (int i = 0; i < opt->ncpus; i++)
		CPU_SET(opt->cpus[i], &all);
	return pin_self_to_set(&all);
}

/* One run; returns 0 or an errno value.  Round-trip times go to s, B's CPUs to cpu_of_b. */
static int placement_run(const struct options *opt, long rounds, int *cpu_of_b, sampleset *s)
{
	int a[2], b[2];
	if (pipe2(b, O_CLOEXEC) != 0)
		return errno;
	if (pipe2(a, O_CLOEXEC) != 0) {
		int e = errno;
		close(b[0]);
		close(b[1]);
		return e;
	}
	struct placement p = {.rd_b = b[0], .wr_b = b[1], .rd_a = a[0], .wr_a = a[1], .rounds = rounds, .cpu_of_b = cpu_of_b};
	cpu_set_t saved;
	int have_saved = get_self_affinity(&saved) == 0;
	int rc = allow_every_cpu(opt); /* B inherits every allowed CPU */
	pthread_t tb;
	if (rc == 0)
		rc = spawn_thread(placement_b, &p, &tb);
	if (rc == 0) {
		pin_self_to_cpu(opt->cpus[0]);
		char c = 'x';
		for (long i = 0; i < rounds && !p.err; i++) {
			sleep_ns(NS_PER_MS);
			int64_t t0 = now_ns();
			if (write(p.wr_b, &c, 1) != 1 || read(p.rd_a, &c, 1) != 1) {
				rc = errno ? errno : EPIPE;
				break;
			}
			ss_add(s, (double)(now_ns() - t0));
		}
		close(p.wr_b); /* end of input for B if it still waits */
		p.wr_b = -1;
		pthread_join(tb, NULL);
	}
	if (have_saved)
		pin_self_to_set(&saved);
	close(b[0]);
	if (p.wr_b >= 0)
		close(p.wr_b);
	close(a[0]);
	close(a[1]);
	return rc ? rc : p.err;
}

/* Series 'fork': the collector thread, allowed on every CPU, sleeps 1 ms (so the other CPUs are
 * idle), notes its CPU, forks a child that exits at once with sched_getcpu() as its status,
 * and reaps it; sample = fork() to reaped.  Child CPUs go to cpu_of_child, the parent's CPU
 * before each fork to cpu_of_parent and after the reap to parent_after. */
static int fork_placement_run(const struct options *opt, long rounds, int *cpu_of_child, int *cpu_of_parent,
			      int *parent_after, sampleset *s)
{
	cpu_set_t saved;
	int have_saved = get_self_affinity(&saved) == 0;
	int rc = allow_every_cpu(opt);
	for (long i = 0; i < rounds && rc == 0; i++) {
		sleep_ns(NS_PER_MS);
		cpu_of_parent[i] = sched_getcpu();
		int64_t t0 = now_ns();
		pid_t pid = tracked_fork();
		if (pid == 0)
			_exit(sched_getcpu() & 0xff);
		if (pid < 0) {
			rc = errno;
			break;
		}
		int status = 0;
		if (tracked_wait(pid, &status) != pid || !WIFEXITED(status)) {
			rc = ECHILD;
			break;
		}
		ss_add(s, (double)(now_ns() - t0));
		parent_after[i] = sched_getcpu();
		cpu_of_child[i] = WEXITSTATUS(status);
	}
	if (have_saved)
		pin_self_to_set(&saved);
	return rc;
}

static double share_same(const int *a, const int *b, long n)
{
	long k = 0;
	for (long i = 0; i < n; i++)
		k += a[i] == b[i];
	return n ? (double)k / (double)n : 0.0;
}

static double share_on(const int *cpu_of_b, long n, int cpu)
{
	long k = 0;
	for (long i = 0; i < n; i++)
		k += cpu_of_b[i] == cpu;
	return n ? (double)k / (double)n : 0.0;
}

void item_wake_placement(item_ctx *ctx)
{
	ctx->unit = "ns";
	long rounds = plan(ctx, 200, 1000);
	item_method(ctx, "Thread A pinned to the first allowed CPU wakes thread B (allowed on every CPU, asleep in "
			 "read() on a pipe) by writing a byte every 1 ms, so the other CPUs are idle; B notes "
			 "sched_getcpu() and answers; sample = A's round trip (write to answer). on_waker_cpu_share "
			 "= share of wakeups B ran on A's CPU. Series 'idle_others' (top level) with nothing else "
			 "running, 'waker_cpu_shared' with a user-mode spinner pinned to A's CPU. Series 'fork': a "
			 "thread allowed on every CPU sleeps 1 ms, forks a child that exits at once with its "
			 "sched_getcpu() as status, and reaps it; sample = fork() to reaped; "
			 "on_parent_cpu_share = share of children that started on the parent's CPU, parent_moved_share "
			 "= share of rounds after which the parent ran on another CPU than before the fork.");
	jv_set(ctx->params, "rounds", jv_int(rounds));
	jv_set(ctx->params, "waker_cpu", jv_int(ctx->opt->cpus[0]));
	if (ctx->opt->ncpus < 2) {
		item_skip(ctx, "only one CPU is online or allowed: a wakeup has no other CPU to go to");
		return;
	}
	int *cpus = calloc((size_t)rounds, sizeof(int));
	int *parents = calloc((size_t)rounds, sizeof(int));
	int *after = calloc((size_t)rounds, sizeof(int));
	if (!cpus || !parents || !after) {
		free(cpus);
		free(parents);
		free(after);
		item_fail(ctx, "out of memory");
		return;
	}
	sampleset shared, forks;
	ss_init(&shared);
	ss_init(&forks);
	int e = placement_run(ctx->opt, rounds, cpus, &ctx->samples);
	double idle_share = share_on(cpus, rounds, ctx->opt->cpus[0]);
	double shared_share = 0.0;
	if (!e) {
		struct spinners *sp = spinners_start(ctx->opt->cpus, 1);
		e = placement_run(ctx->opt, rounds, cpus, &shared);
		spinners_stop(sp);
		shared_share = share_on(cpus, rounds, ctx->opt->cpus[0]);
	}
	double fork_share = 0.0, moved_share = 0.0;
	int fe = e ? 0 : fork_placement_run(ctx->opt, rounds, cpus, parents, after, &forks);
	if (!e && !fe) {
		fork_share = share_same(cpus, parents, rounds);
		moved_share = 1.0 - share_same(after, parents, rounds);
	}
	if (e || fe) {
		item_fail(ctx, "%s: %s", e ? "pipe ping-pong" : "fork", strerror(e ? e : fe));
	} else {
		jv *entry = item_series_add(ctx, "idle_others", &ctx->samples, "ns");
		jv_set(entry, "on_waker_cpu_share", jv_num(idle_share));
		entry = item_series_add(ctx, "waker_cpu_shared", &shared, "ns");
		jv_set(entry, "on_waker_cpu_share", jv_num(shared_share));
		entry = item_series_add(ctx, "fork", &forks, "ns");
		jv_set(entry, "on_parent_cpu_share", jv_num(fork_share));
		jv_set(entry, "parent_moved_share", jv_num(moved_share));
		jv_set(ctx->params, "on_waker_cpu_share", jv_num(idle_share));
	}
	ss_free(&shared);
	ss_free(&forks);
	free(cpus);
	free(parents);
	free(after);
}
