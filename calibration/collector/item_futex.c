/*
 * futex_handoff and pi_futex_handoff: N threads (pinned round-robin to the
 * allowed CPUs, as perf bench futex does) contend one lock and run a short
 * critical section back to back for a fixed time.
 *
 * plain: the three-state futex mutex of Drepper's "Futexes Are Tricky"
 *   (0 free, 1 locked, 2 locked with waiters; FUTEX_WAIT / FUTEX_WAKE).
 *   A released lock can be taken by any running thread (lock stealing).
 * pi: the futex word holds the owner's TID; contention goes through
 *   FUTEX_LOCK_PI / FUTEX_UNLOCK_PI, i.e. the kernel rt-mutex
 *   (kernel/futex/pi.c, kernel/locking/rtmutex.c), which hands the lock to the
 *   top waiter on unlock.
 *
 * Handoff latency: for an acquisition by a thread other than the previous
 * owner that waited in the kernel (slept in FUTEX_WAIT and was woken, or took
 * the lock through FUTEX_LOCK_PI), the time from the previous owner's release
 * timestamp to the acquisition timestamp.
 */
#include "collector.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CS_ITERS 100
#define MAX_LAT_PER_THREAD 200000

struct lock_test;

struct worker {
	pthread_t thread;
	struct lock_test *t;
	int index, cpu, started;
	long ops, waited;
	long nvcsw, nivcsw; /* context switches of this thread during the run (getrusage) */
	double *lat;
	long nlat;
	int err;
};

struct lock_test {
	int pi;
	int nthreads;
	_Alignas(64) atomic_int word;
	_Alignas(64) atomic_int stop;
	_Alignas(64) volatile long long last_release_ns; /* written only by the lock holder */
	volatile int last_owner;
	volatile long shared_counter;
	_Alignas(64) atomic_int go;
	struct worker *w;
};

/* Returns 1 when the caller slept in FUTEX_WAIT and was woken, else 0. */
static int plain_lock(atomic_int *f)
{
	int c = 0;
	if (atomic_compare_exchange_strong(f, &c, 1))
		return 0;
	int waited = 0;
	if (c != 2)
		c = atomic_exchange(f, 2);
	while (c != 0) {
		/* 0: we slept and were woken; EAGAIN: the word changed before we slept */
		if (sys_futex(f, FUTEX_WAIT_PRIVATE, 2) == 0)
			waited = 1;
		c = atomic_exchange(f, 2);
	}
	return waited;
}

static void plain_unlock(atomic_int *f)
{
	if (atomic_fetch_sub(f, 1) != 1) {
		atomic_store(f, 0);
		sys_futex(f, FUTEX_WAKE_PRIVATE, 1);
	}
}

/* Returns 1 when the lock was taken through FUTEX_LOCK_PI, 0 on the fast path, -errno on error. */
static int pi_lock(atomic_int *f, int tid)
{
	int z = 0;
	if (atomic_compare_exchange_strong(f, &z, tid))
		return 0;
	while (sys_futex(f, FUTEX_LOCK_PI_PRIVATE, 0) != 0) {
		if (errno != EINTR && errno != EAGAIN)
			return -errno;
	}
	return 1;
}

static int pi_unlock(atomic_int *f, int tid)
{
	int t = tid;
	if (atomic_compare_exchange_strong(f, &t, 0))
		return 0;
	return sys_futex(f, FUTEX_UNLOCK_PI_PRIVATE, 0) == 0 ? 0 : -errno;
}

static void critical_section(struct lock_test *t)
{
	for (int i = 0; i < CS_ITERS; i++)
		t->shared_counter++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct lock_test *t = w->t;
	int tid = (int)syscall(SYS_gettid);
	pin_self_to_cpu(w->cpu);
	while (!atomic_load(&t->go))
		sched_yield();
	struct rusage r0, r1;
	int have_ru = getrusage(RUSAGE_THREAD, &r0) == 0;
	while (!atomic_load_explicit(&t->stop, memory_order_relaxed)) {
		int waited = t->pi ? pi_lock(&t->word, tid) : plain_lock(&t->word);
		if (waited < 0) {
			w->err = -waited;
			atomic_store(&t->stop, 1);
			break;
		}
		if (waited) {
			int64_t acq = now_ns();
			w->waited++;
			if (t->last_owner != w->index && t->last_release_ns && w->nlat < MAX_LAT_PER_THREAD)
				w->lat[w->nlat++] = (double)(acq - t->last_release_ns);
		}
		critical_section(t);
		t->last_owner = w->index;
		t->last_release_ns = now_ns();
		if (t->pi) {
			int rc = pi_unlock(&t->word, tid);
			if (rc < 0) {
				w->err = -rc;
				atomic_store(&t->stop, 1);
				break;
			}
		} else {
			plain_unlock(&t->word);
		}
		w->ops++;
	}
	if (have_ru && getrusage(RUSAGE_THREAD, &r1) == 0) {
		w->nvcsw = r1.ru_nvcsw - r0.ru_nvcsw;
		w->nivcsw = r1.ru_nivcsw - r0.ru_nivcsw;
	} else {
		w->nvcsw = w->nivcsw = -1;
	}
	return NULL;
}

/* Measure the uncontended cost of one critical section including its clock read. */
static double critical_section_ns(void)
{
	struct lock_test t;
	memset(&t, 0, sizeof(t));
	long n = 20000;
	int64_t t0 = now_ns();
	for (long i = 0; i < n; i++) {
		critical_section(&t);
		t.last_release_ns = now_ns();
	}
	return (double)(now_ns() - t0) / (double)n;
}

static int thread_counts(int ncpus, int *out, int max)
{
	int n = 0, hi = 2 * ncpus;
	if (hi < 2)
		hi = 2;
	if (hi - 1 <= 8) {
		for (int k = 2; k <= hi && n < max; k++)
			out[n++] = k;
		return n;
	}
	for (int k = 2; k < hi && n < max; k *= 2)
		out[n++] = k;
	if (n < max && ncpus > 2 && (ncpus & (ncpus - 1)))
		out[n++] = ncpus;
	for (int i = 0; i < n; i++) /* keep ascending */
		for (int j = i + 1; j < n; j++)
			if (out[j] < out[i]) {
				int x = out[i];
				out[i] = out[j];
				out[j] = x;
			}
	if (n < max)
		out[n++] = hi;
	return n;
}

/* What one thread count gathers over its runs. */
struct count_acc {
	int n;
	sampleset lat;
	long ops, waited, nvcsw, nivcsw; /* nvcsw/nivcsw -1 once a thread could not read them */
	int64_t elapsed;
	long *per_thread_ops;
	double *run_tput;
	int nruns;
};

/* One run of n threads for `duration`: spawn, start together, stop, join; adds to acc.
 * Returns 0 or an errno. */
static int handoff_run(const struct options *o, int pi, int64_t duration, struct count_acc *acc)
{
	int n = acc->n;
	struct lock_test *t = aligned_alloc(64, (sizeof(*t) + 63) / 64 * 64);
	struct worker *w = calloc((size_t)n, sizeof(*w));
	if (!t || !w) {
		free(t);
		free(w);
		return ENOMEM;
	}
	memset(t, 0, sizeof(*t));
	t->pi = pi;
	t->nthreads = n;
	t->last_owner = -1;
	t->w = w;
	int err = 0;
	for (int i = 0; i < n; i++) {
		w[i].t = t;
		w[i].index = i;
		w[i].cpu = o->cpus[i % o->ncpus];
		w[i].lat = malloc(MAX_LAT_PER_THREAD * sizeof(double));
		if (!w[i].lat) {
			err = ENOMEM;
			break;
		}
	}
	for (int i = 0; i < n && !err; i++) {
		err = spawn_thread(worker_main, &w[i], &w[i].thread);
		if (!err)
			w[i].started = 1;
	}
	int64_t t0 = 0, t1 = 0;
	if (err) {
		/* let the threads already started leave at once */
		atomic_store(&t->stop, 1);
		atomic_store(&t->go, 1);
	} else {
		sleep_ns(10 * NS_PER_MS); /* let every thread reach its CPU */
		t0 = now_ns();
		atomic_store(&t->go, 1);
		sleep_ns(duration);
		atomic_store(&t->stop, 1);
	}
	for (int i = 0; i < n; i++)
		if (w[i].started)
			pthread_join(w[i].thread, NULL);
	t1 = now_ns();
	long ops = 0;
	for (int i = 0; i < n; i++) {
		if (w[i].err && !err)
			err = w[i].err;
		ops += w[i].ops;
		acc->per_thread_ops[i] += w[i].ops;
		acc->waited += w[i].waited;
		if (acc->nvcsw >= 0)
			acc->nvcsw = w[i].nvcsw < 0 ? -1 : acc->nvcsw + w[i].nvcsw;
		if (acc->nivcsw >= 0)
			acc->nivcsw = w[i].nivcsw < 0 ? -1 : acc->nivcsw + w[i].nivcsw;
		for (long k = 0; k < w[i].nlat; k++)
			ss_add(&acc->lat, w[i].lat[k]);
		free(w[i].lat);
	}
	if (!err) {
		acc->ops += ops;
		acc->elapsed += t1 - t0;
		acc->run_tput[acc->nruns++] = t1 > t0 ? (double)ops * 1e9 / (double)(t1 - t0) : 0;
	}
	free(w);
	free(t);
	return err;
}

static void handoff_item(item_ctx *ctx, int pi)
{
	const struct options *o = ctx->opt;
	/* Several runs per thread count, alternating between the counts (0.9.0; before, one run
	 * each). A run falls into one regime (a convoy of sleepers, or lock passes between running
	 * threads) for most of its length: runs of 100 ms gave 0.04 to 4 M ops/s at N = 2, and the
	 * single 2 s runs of five collections 0.26 to 0.40 M ops/s. The rate is all runs' operations
	 * over their total time, which a mix of regimes moves less than it moves a median. Runs stay
	 * 2 s long: short ones measure the start of a run, before the convoy forms. */
	int64_t run_duration = plan(ctx, 300, 2000) * NS_PER_MS;
	int runs = (int)plan(ctx, 1, 3);
	int64_t duration = run_duration * runs;
	int counts[64];
	int ncounts = thread_counts(o->ncpus, counts, 64);
	ctx->unit = "ns";
	item_method(ctx, "N threads pinned round-robin to the allowed CPUs loop lock / critical section "
			 "(%d shared increments and a clock read) / unlock on a %s, in %d runs of %lld ms per N, "
			 "the thread counts alternating run by run (fresh threads each run); "
			 "throughput is all runs' operations over their total time (series "
			 "run_throughputs_ops_per_s lists each run's), samples are handoff latencies over all runs (previous owner's "
			 "release to acquisition by a different thread that waited in the kernel: woken from FUTEX_WAIT, or through FUTEX_LOCK_PI); "
			 "top-level samples are N=2.",
		    CS_ITERS,
		    pi ? "PI futex (FUTEX_LOCK_PI / FUTEX_UNLOCK_PI, the kernel rt-mutex)"
		       : "three-state futex mutex (FUTEX_WAIT / FUTEX_WAKE, private)",
		    runs, (long long)(run_duration / NS_PER_MS));
	jv_set(ctx->params, "lock", jv_str(pi ? "pi_futex" : "futex_mutex"));
	jv_set(ctx->params, "duration_ns", jv_int(duration));
	jv_set(ctx->params, "runs", jv_int(runs));
	jv_set(ctx->params, "run_duration_ns", jv_int(run_duration));
	jv_set(ctx->params, "critical_section_ns", jv_num(critical_section_ns()));
	jv_set(ctx->params, "critical_section_increments", jv_int(CS_ITERS));
	jv *tl = jv_set(ctx->params, "threads_list", jv_arr());
	for (int i = 0; i < ncounts; i++)
		jv_push(tl, jv_int(counts[i]));
	jv_set(ctx->params, "threads", jv_int(2));
	jv *tput = jv_set(ctx->extra, "throughput_ops_per_s", jv_obj());

	struct count_acc *acc = calloc((size_t)ncounts, sizeof(*acc));
	if (!acc) {
		item_fail(ctx, "out of memory");
		return;
	}
	int err = 0, err_n = 0;
	for (int c = 0; c < ncounts && !err; c++) {
		acc[c].n = counts[c];
		ss_init(&acc[c].lat);
		acc[c].per_thread_ops = calloc((size_t)counts[c], sizeof(long));
		acc[c].run_tput = calloc((size_t)runs, sizeof(double));
		if (!acc[c].per_thread_ops || !acc[c].run_tput)
			err = ENOMEM;
	}
	for (int r = 0; r < runs && !err; r++)
		for (int c = 0; c < ncounts && !err; c++)
			if ((err = handoff_run(o, pi, run_duration, &acc[c])) != 0)
				err_n = counts[c];

	for (int c = 0; c < ncounts && !err; c++) {
		struct count_acc *a = &acc[c];
		int n = a->n;
		double rate = a->elapsed > 0 ? (double)a->ops * 1e9 / (double)a->elapsed : 0;
		jv *e = item_series_add(ctx, NULL, &a->lat, "ns");
		jv_set(e, "label", jv_strf("threads_%d", n));
		jv *prm = jv_get(e, "params");
		jv_set(prm, "threads", jv_int(n));
		jv *pcpu = jv_set(prm, "cpus", jv_arr());
		for (int i = 0; i < n; i++)
			jv_push(pcpu, jv_int(o->cpus[i % o->ncpus]));
		jv_set(e, "ops", jv_int(a->ops));
		jv_set(e, "elapsed_ns", jv_int(a->elapsed));
		jv_set(e, "throughput_ops_per_s", jv_num(rate));
		jv *rt = jv_set(e, "run_throughputs_ops_per_s", jv_arr());
		for (int k = 0; k < a->nruns; k++)
			jv_push(rt, jv_num(a->run_tput[k]));
		jv_set(e, "kernel_waits", jv_int(a->waited));
		jv_set(e, "handoffs", jv_int((long long)a->lat.n));
		if (a->nvcsw >= 0 && a->nivcsw >= 0) {
			/* a waiter that sleeps switches out voluntarily; one that spins does not */
			jv_set(e, "voluntary_switches", jv_int(a->nvcsw));
			jv_set(e, "involuntary_switches", jv_int(a->nivcsw));
		}
		jv *pto = jv_set(e, "per_thread_ops", jv_arr());
		for (int i = 0; i < n; i++)
			jv_push(pto, jv_int(a->per_thread_ops[i]));
		jv_set(tput, jv_get(e, "label")->string, jv_num(rate));
		if (n == 2)
			for (size_t i = 0; i < a->lat.n; i++)
				ss_add(&ctx->samples, a->lat.v[i]);
	}
	for (int c = 0; c < ncounts; c++) {
		ss_free(&acc[c].lat);
		free(acc[c].per_thread_ops);
		free(acc[c].run_tput);
	}
	free(acc);
	if (err)
		item_fail(ctx, "%s with %d threads: %s", pi ? "FUTEX_LOCK_PI" : "futex", err_n, strerror(err));
}

void item_futex_handoff(item_ctx *ctx) { handoff_item(ctx, 0); }
void item_pi_futex_handoff(item_ctx *ctx) { handoff_item(ctx, 1); }
