/*
 * wake_by_sleep_age: how long a cross-CPU wakeup takes as a function of how long
 * ago the wakee went to sleep.
 *
 * A sleeper thread pinned to cpu B stores the time and calls FUTEX_WAIT; a waker
 * pinned to cpu A spins until that time plus a delay d, then stores 1 in the word
 * and calls FUTEX_WAKE; the sleeper reads the clock as soon as FUTEX_WAIT returns.
 * A sample is that time minus the waker's time just before its FUTEX_WAKE. One
 * series per d. Between trials both threads spin for a while, so cpu B's previous
 * idle period does not overlap the next trial.
 *
 * Why: a wakeup does not cost the same at every stage of going to sleep. The
 * wakee may not have slept yet (FUTEX_WAIT finds the word changed and returns
 * EAGAIN: counted apart, not a sample), may be in the middle of switching out,
 * may be in the idle loop before it halts (a polling idle loop notices without an
 * interrupt; with interrupts off until the halt, the IPI waits for the end of the
 * idle entry), or may be halted (the IPI and the exit from the halt; on a virtual
 * machine the host's wakeup of the vCPU). The model wakes an idle CPU the same
 * way at every stage; rcusim calibrate checks it against this item.
 */
#include "collector.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { PH_IDLE, PH_GO, PH_DONE, PH_QUIT };

struct wake_age {
	int cpu_sleeper;
	atomic_int word;       /* the futex word */
	atomic_int phase;      /* PH_* handshake */
	atomic_llong t_sleep;  /* sleeper: just before FUTEX_WAIT */
	atomic_llong t_woke;   /* sleeper: just after it returns */
	atomic_int eagain;     /* sleeper: FUTEX_WAIT found the word changed */
	atomic_int err;        /* errno of a failed pin or FUTEX_WAIT */
};

static void spin_for(int64_t ns)
{
	int64_t end = now_ns() + ns;
	while (now_ns() < end)
		;
}

static void *sleeper(void *arg)
{
	struct wake_age *w = arg;
	if (pin_self_to_cpu(w->cpu_sleeper) < 0) {
		atomic_store(&w->err, EINVAL);
		atomic_store(&w->phase, PH_QUIT);
		return NULL;
	}
	for (;;) {
		int ph;
		while ((ph = atomic_load(&w->phase)) != PH_GO)
			if (ph == PH_QUIT)
				return NULL;
		atomic_store(&w->word, 0);
		atomic_store(&w->eagain, 0);
		atomic_store(&w->t_sleep, now_ns());
		long r;
		do
			r = sys_futex(&w->word, FUTEX_WAIT_PRIVATE, 0);
		while (r < 0 && errno == EINTR && atomic_load(&w->word) == 0);
		int64_t t = now_ns();
		if (r < 0 && errno == EAGAIN)
			atomic_store(&w->eagain, 1);
		else if (r < 0)
			atomic_store(&w->err, errno);
		atomic_store(&w->t_woke, t);
		atomic_store(&w->phase, PH_DONE);
	}
}

/* delays after the sleeper's clock read, ns: fine where the stages follow each other within
 * microseconds, coarse once the CPU has halted */
static const int64_t DELAYS[] = {0,    250,  500,  750,  1000, 1250,  1500,  1750,  2000,  2250,  2500, 2750,
				 3000, 3500, 4000, 5000, 6000, 8000, 10000, 15000, 20000, 40000, 100000};

void item_wake_by_sleep_age(item_ctx *ctx)
{
	ctx->unit = "ns";
	item_method(ctx, "A sleeper thread pinned to cpu_sleeper reads CLOCK_MONOTONIC and calls FUTEX_WAIT; a "
			 "waker pinned to cpu_waker spins until that time + delay_ns, stores 1 in the word and calls "
			 "FUTEX_WAKE. Sample: the sleeper's clock read after FUTEX_WAIT returns minus the waker's read "
			 "before FUTEX_WAKE. One series per delay; trials whose FUTEX_WAIT returned EAGAIN (the "
			 "sleeper had not slept yet) are counted in params.not_asleep, not sampled. Both threads spin "
			 "50 us between trials. Top level = the longest delay (a halted CPU).");
	if (ctx->opt->ncpus < 2) {
		item_skip(ctx, "only one CPU is online or allowed, no cross-CPU pair exists");
		return;
	}
	struct wake_age w = {.cpu_sleeper = ctx->opt->cpus[1]};
	atomic_init(&w.word, 0);
	atomic_init(&w.phase, PH_IDLE);
	atomic_init(&w.t_sleep, 0);
	atomic_init(&w.t_woke, 0);
	atomic_init(&w.eagain, 0);
	atomic_init(&w.err, 0);
	int cpu_waker = ctx->opt->cpus[0];
	jv_set(ctx->params, "cpu_waker", jv_int(cpu_waker));
	jv_set(ctx->params, "cpu_sleeper", jv_int(w.cpu_sleeper));
	long trials = plan(ctx, 60, 400);
	jv_set(ctx->params, "trials_per_delay", jv_int(trials));
	jv_set(ctx->params, "pause_ns", jv_int(50 * NS_PER_US));
	if (pin_self_to_cpu(cpu_waker) < 0) {
		item_fail(ctx, "cannot pin the waker to cpu %d", cpu_waker);
		return;
	}
	pthread_t th;
	int e = spawn_thread(sleeper, &w, &th);
	if (e) {
		item_fail(ctx, "cannot start the sleeper thread: %s", strerror(e));
		return;
	}
	size_t nd = ARRAY_LEN(DELAYS);
	for (size_t k = 0; k < nd && !atomic_load(&w.err); k++) {
		sampleset s;
		ss_init(&s);
		long not_asleep = 0;
		for (long i = 0; i < trials && !atomic_load(&w.err); i++) {
			atomic_store(&w.t_sleep, 0);
			atomic_store(&w.phase, PH_GO);
			int64_t ts;
			/* a sleeper that failed to pin itself has quit, even if PH_GO overwrote its PH_QUIT */
			while ((ts = atomic_load(&w.t_sleep)) == 0 && atomic_load(&w.phase) == PH_GO && !atomic_load(&w.err))
				;
			if (ts == 0)
				break;
			while (now_ns() < ts + DELAYS[k])
				;
			int64_t tw = now_ns();
			atomic_store(&w.word, 1);
			sys_futex(&w.word, FUTEX_WAKE_PRIVATE, 1);
			while (atomic_load(&w.phase) != PH_DONE)
				;
			if (atomic_load(&w.eagain))
				not_asleep++;
			else
				ss_add(&s, (double)(atomic_load(&w.t_woke) - tw));
			atomic_store(&w.phase, PH_IDLE);
			spin_for(50 * NS_PER_US);
		}
		char label[32];
		snprintf(label, sizeof label, "d_%lldns", (long long)DELAYS[k]);
		jv *ent = item_series_add(ctx, label, &s, "ns");
		jv *prm = jv_get(ent, "params");
		jv_set(prm, "delay_ns", jv_int(DELAYS[k]));
		jv_set(prm, "not_asleep", jv_int(not_asleep));
		jv_set(prm, "trials", jv_int(trials));
		if (k + 1 == nd)
			for (size_t j = 0; j < s.n; j++)
				ss_add(&ctx->samples, s.v[j]);
		ss_free(&s);
	}
	atomic_store(&w.phase, PH_QUIT);
	pthread_join(th, NULL);
	int err = atomic_load(&w.err);
	if (err)
		item_fail(ctx, "sleeper: %s", strerror(err));
}
