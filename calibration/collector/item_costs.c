/*
 * Items that isolate single kernel costs for the calibration's direct mappings:
 *
 * pipe_costs: per-call write() and read() of a 100-byte message on a pipe that
 *   never blocks (one thread), and a write() that wakes a reader blocked on
 *   another, idle CPU (what try_to_wake_up costs the waker).
 * irq_cost: a thread spinning in user mode on a CPU reads CLOCK_MONOTONIC in a
 *   tight loop; every interruption shows as a gap between two reads.  Gaps are
 *   recorded while only the tick interrupts it ("tick"), while another thread of
 *   the process sends it membarrier(PRIVATE_EXPEDITED) IPIs ("ipi"; the sender's
 *   call latency is "ipi_round_trip"), and when a timerfd hrtimer it armed
 *   itself expires with no waiter ("hrtimer": the gap that contains the expiry).
 *   "other_gaps" are the lone spinner's gaps away from the tick: interruptions
 *   that are neither the tick nor anything the process did (on a virtual
 *   machine mostly the host's).
 *   "tick_busy" spins on every CPU at once and keeps, jiffy by jiffy, the tick's
 *   gap on each CPU: the ticks of one jiffy start together and are not independent.
 *   A gap is the time the CPU spent away from the task: entry, handler, exit,
 *   and on a virtual machine the hypervisor's share.
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define PIPE_MSG 100

/* ------------------------------------------------------------ pipe_costs */
struct waker_test {
	int cpu_reader;
	int idle_policy; /* SCHED_IDLE reader: its wakeup never preempts the writer */
	int to_reader[2], to_writer[2];
	int err;
};

static void *blocked_reader(void *arg)
{
	struct waker_test *w = arg;
	char buf[PIPE_MSG];
	if (pin_self_to_cpu(w->cpu_reader) < 0) {
		w->err = EINVAL;
		close(w->to_writer[1]);
		return NULL;
	}
	if (w->idle_policy) {
		struct sched_param sp = {.sched_priority = 0};
		if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0) {
			w->err = EPERM;
			close(w->to_writer[1]);
			return NULL;
		}
	}
	for (;;) {
		ssize_t r = read(w->to_reader[0], buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (write(w->to_writer[1], "a", 1) != 1) {
			w->err = errno;
			break;
		}
	}
	return NULL;
}

void item_pipe_costs(item_ctx *ctx)
{
	long batches = plan(ctx, 100, 1000), per = 100, wakes = plan(ctx, 200, 2000);
	ctx->unit = "ns";
	item_method(ctx, "One thread pinned to cpu A times single calls (CLOCK_MONOTONIC read before and after): "
			 "batches of 100 write()s of 100 bytes into a pipe with room, then 100 read()s of them "
			 "(never blocking); clock_read is two reads back to back (the overhead inside every sample); "
			 "write_wakes_remote_reader times a write() that wakes a reader blocked in read() on cpu B, "
			 "with cpu B idle (the writer sleeps 200 us first); write_wakes_local_reader the same with a "
			 "SCHED_IDLE reader on cpu A (its wakeup does not preempt the writer); write_after_sleep is their "
			 "baseline: the same write() after the same sleep with no reader waiting. Top level = write.");
	jv_set(ctx->params, "message_bytes", jv_int(PIPE_MSG));
	jv_set(ctx->params, "cpu_a", jv_int(ctx->opt->cpus[0]));
	jv_set(ctx->params, "batch_calls", jv_int(per));
	jv_set(ctx->params, "batches", jv_int(batches));
	cpu_set_t saved;
	get_self_affinity(&saved);
	if (pin_self_to_cpu(ctx->opt->cpus[0]) < 0) {
		item_fail(ctx, "cannot pin to cpu %d", ctx->opt->cpus[0]);
		return;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		pin_self_to_set(&saved);
		item_fail(ctx, "pipe: %s", strerror(errno));
		return;
	}
	char buf[PIPE_MSG];
	memset(buf, 'p', sizeof(buf));
	sampleset wr, rd, clk, wake, wake_local, after_sleep;
	ss_init(&wake_local);
	ss_init(&after_sleep);
	ss_init(&wr);
	ss_init(&rd);
	ss_init(&clk);
	ss_init(&wake);
	const char *fail = NULL;
	for (long b = -5; b < batches && !fail; b++) { /* 5 warm-up batches */
		for (long i = 0; i < per; i++) {
			int64_t t0 = now_ns();
			ssize_t w = write(p[1], buf, sizeof(buf));
			int64_t t1 = now_ns();
			if (w != (ssize_t)sizeof(buf)) {
				fail = "write";
				break;
			}
			if (b >= 0)
				ss_add(&wr, (double)(t1 - t0));
		}
		for (long i = 0; i < per && !fail; i++) {
			int64_t t0 = now_ns();
			ssize_t r = read(p[0], buf, sizeof(buf));
			int64_t t1 = now_ns();
			if (r != (ssize_t)sizeof(buf)) {
				fail = "read";
				break;
			}
			if (b >= 0)
				ss_add(&rd, (double)(t1 - t0));
		}
		for (long i = 0; i < per && b >= 0; i++) {
			int64_t t0 = now_ns();
			int64_t t1 = now_ns();
			ss_add(&clk, (double)(t1 - t0));
		}
	}
	close(p[0]);
	close(p[1]);
	/* the baseline of the wakeup series: the same write() after the same sleep, with no waiter */
	if (!fail) {
		int q[2];
		if (pipe2(q, O_CLOEXEC) != 0) {
			fail = "pipe";
		} else {
			for (long i = -20; i < wakes && !fail; i++) {
				sleep_ns(200 * NS_PER_US);
				int64_t t0 = now_ns();
				ssize_t n = write(q[1], buf, sizeof(buf));
				int64_t t1 = now_ns();
				if (n != (ssize_t)sizeof(buf) || read(q[0], buf, sizeof(buf)) != (ssize_t)sizeof(buf))
					fail = "write after sleep";
				else if (i >= 0)
					ss_add(&after_sleep, (double)(t1 - t0));
			}
			close(q[0]);
			close(q[1]);
		}
	}
	/* 0: reader on cpu B (remote, idle CPU); 1: SCHED_IDLE reader on cpu A (local) */
	for (int local = 0; local <= 1 && !fail; local++) {
		if (!local && ctx->opt->ncpus < 2)
			continue;
		struct waker_test w = {.cpu_reader = local ? ctx->opt->cpus[0] : ctx->opt->cpus[1], .idle_policy = local,
				       .to_reader = {-1, -1}, .to_writer = {-1, -1}};
		sampleset *out = local ? &wake_local : &wake;
		pthread_t th;
		if (pipe2(w.to_reader, O_CLOEXEC) != 0 || pipe2(w.to_writer, O_CLOEXEC) != 0) {
			fail = "pipe";
		} else if (spawn_thread(blocked_reader, &w, &th) != 0) {
			fail = "pthread_create";
		} else {
			for (long i = -20; i < wakes; i++) {
				sleep_ns(200 * NS_PER_US);
				int64_t t0 = now_ns();
				ssize_t n = write(w.to_reader[1], buf, sizeof(buf));
				int64_t t1 = now_ns();
				char a;
				if (n != (ssize_t)sizeof(buf) || read(w.to_writer[0], &a, 1) != 1) {
					fail = "wakeup ping";
					break;
				}
				if (i >= 0)
					ss_add(out, (double)(t1 - t0));
			}
			close(w.to_reader[1]);
			w.to_reader[1] = -1;
			pthread_join(th, NULL);
			if (!fail && w.err)
				fail = "reader thread";
		}
		for (int i = 0; i < 2; i++) {
			if (w.to_reader[i] >= 0)
				close(w.to_reader[i]);
			if (w.to_writer[i] >= 0)
				close(w.to_writer[i]);
		}
	}
	if (ctx->opt->ncpus >= 2)
		jv_set(ctx->params, "cpu_b", jv_int(ctx->opt->cpus[1]));
	jv_set(ctx->params, "wakeups", jv_int(wakes));
	pin_self_to_set(&saved);
	if (fail) {
		item_fail(ctx, "%s failed: %s", fail, strerror(errno));
	} else {
		for (size_t i = 0; i < wr.n; i++)
			ss_add(&ctx->samples, wr.v[i]);
		item_series_add(ctx, "write", &wr, "ns");
		item_series_add(ctx, "read", &rd, "ns");
		item_series_add(ctx, "clock_read", &clk, "ns");
		if (wake.n)
			item_series_add(ctx, "write_wakes_remote_reader", &wake, "ns");
		item_series_add(ctx, "write_wakes_local_reader", &wake_local, "ns");
		item_series_add(ctx, "write_after_sleep", &after_sleep, "ns");
	}
	ss_free(&wr);
	ss_free(&rd);
	ss_free(&clk);
	ss_free(&wake);
	ss_free(&wake_local);
	ss_free(&after_sleep);
}

/* ------------------------------------------------------------ irq_cost */
struct gap {
	int64_t start, len;
};

struct gaplog {
	struct gap *v;
	size_t n, cap;
};

struct spin_gaps {
	int cpu;
	int64_t threshold;
	int64_t duration;
	struct gaplog *log;
	atomic_int *stop; /* optional: stop early */
	int err;
};

/* Spin reading the clock; log every gap above the threshold (start time and length). */
static void spin_record(int64_t until, int64_t threshold, struct gaplog *log, atomic_int *stop)
{
	int64_t prev = now_ns();
	while (prev < until) {
		int64_t t = now_ns();
		if (t - prev > threshold && log->n < log->cap)
			log->v[log->n++] = (struct gap){prev, t - prev};
		prev = t;
		if (stop && atomic_load_explicit(stop, memory_order_relaxed))
			break;
	}
}

static void *gap_spinner(void *arg)
{
	struct spin_gaps *g = arg;
	if (pin_self_to_cpu(g->cpu) < 0) {
		g->err = EINVAL;
		return NULL;
	}
	spin_record(now_ns() + g->duration, g->threshold, g->log, g->stop);
	return NULL;
}

static int run_spinner(int cpu, int64_t threshold, int64_t duration, struct gaplog *log)
{
	struct spin_gaps g = {.cpu = cpu, .threshold = threshold, .duration = duration, .log = log};
	pthread_t th;
	if (spawn_thread(gap_spinner, &g, &th) != 0)
		return errno ? errno : EAGAIN;
	pthread_join(th, NULL);
	return g.err;
}

/* Median difference of back-to-back clock reads (the loop's own step). */
static int64_t clock_step(void)
{
	sampleset s;
	ss_init(&s);
	for (int i = 0; i < 20000; i++) {
		int64_t a = now_ns();
		int64_t b = now_ns();
		ss_add(&s, (double)(b - a));
	}
	jv *st = ss_stats_json(&s);
	jv *med = jv_get(st, "median");
	int64_t step = med && med->type == JV_NUM ? (int64_t)med->number : 50;
	jv_free(st);
	ss_free(&s);
	return step;
}

/* Ticks come once per period at a fixed phase of the jiffy grid: keep the gaps whose start
 * falls in the phase bin holding the most gap time (and its two neighbours).  Weighting by
 * length keeps frequent short gaps of other origins from choosing the bin.  A gap longer than
 * 1/20 of the period is the spinner being preempted by another task (often at a tick), not an
 * interrupt: it is left out of both. */
#define PHASE_BINS 50
static int modal_phase_bin(const struct gaplog *log, int64_t period)
{
	int64_t bins[PHASE_BINS] = {0}, longest = period / 20;
	for (size_t i = 0; i < log->n; i++)
		if (log->v[i].len <= longest)
			bins[(log->v[i].start % period) * PHASE_BINS / period] += log->v[i].len;
	int best = 0;
	for (int b = 1; b < PHASE_BINS; b++)
		if (bins[b] > bins[best])
			best = b;
	return best;
}

static int at_tick(const struct gap *g, int64_t period, int best)
{
	int b = (int)((g->start % period) * PHASE_BINS / period);
	int d = abs(b - best);
	return g->len <= period / 20 && (d <= 1 || d >= PHASE_BINS - 1);
}

static void tick_gaps(const struct gaplog *log, int64_t period, sampleset *out, int *modal_share_pct)
{
	int best = modal_phase_bin(log, period);
	long kept = 0;
	for (size_t i = 0; i < log->n; i++) {
		if (at_tick(&log->v[i], period, best)) {
			ss_add(out, (double)log->v[i].len);
			kept++;
		}
	}
	*modal_share_pct = log->n ? (int)(100 * kept / (long)log->n) : 0;
}

/* tick_busy: a spinner on every allowed CPU (at most TB_MAX_CPUS) at once. Each CPU's gaps in its
 * own modal tick window are summed per jiffy (the window's centre is the tick; a jiffy's index is
 * its gap start rounded to the nearest tick), and every jiffy in which all CPUs have such a gap
 * gives one row of the series: the CPUs' values in CPU order, rows one after another. At most
 * max_samples / CPUs rows are kept (the first ones), so the stored samples are the whole series
 * and the rows stay intact. */
#define TB_MAX_CPUS 16
static void tick_busy_series(item_ctx *ctx, int64_t threshold, int64_t dur, int64_t period)
{
	const struct options *o = ctx->opt;
	int k = o->ncpus < TB_MAX_CPUS ? o->ncpus : TB_MAX_CPUS;
	if (k < 2)
		return; /* one CPU: the same as "tick" */
	struct gaplog logs[TB_MAX_CPUS];
	struct spin_gaps g[TB_MAX_CPUS];
	pthread_t th[TB_MAX_CPUS];
	int started[TB_MAX_CPUS] = {0}, ok = 1;
	for (int c = 0; c < k; c++) {
		logs[c] = (struct gaplog){.cap = 200000};
		logs[c].v = calloc(logs[c].cap, sizeof(*logs[c].v));
		ok = ok && logs[c].v;
	}
	for (int c = 0; ok && c < k; c++) {
		g[c] = (struct spin_gaps){.cpu = o->cpus[c], .threshold = threshold, .duration = dur, .log = &logs[c]};
		started[c] = spawn_thread(gap_spinner, &g[c], &th[c]) == 0;
		ok = started[c];
	}
	for (int c = 0; c < k; c++)
		if (started[c])
			pthread_join(th[c], NULL);
	long rows = 0, jiffies = 0, maxrows = (long)(o->max_samples / (size_t)k);
	sampleset flat;
	ss_init(&flat);
	if (ok) {
		int64_t first = INT64_MAX, last = 0;
		int best[TB_MAX_CPUS];
		for (int c = 0; c < k; c++) {
			best[c] = modal_phase_bin(&logs[c], period);
			if (logs[c].n && logs[c].v[0].start < first)
				first = logs[c].v[0].start;
			if (logs[c].n && logs[c].v[logs[c].n - 1].start > last)
				last = logs[c].v[logs[c].n - 1].start;
		}
		jiffies = first < last ? (long)((last - first) / period) + 3 : 0;
		int64_t *sum = calloc((size_t)jiffies * (size_t)k + 1, sizeof(*sum));
		for (int c = 0; sum && c < k; c++) {
			int64_t centre = (2 * best[c] + 1) * period / (2 * PHASE_BINS);
			for (size_t i = 0; i < logs[c].n; i++) {
				const struct gap *q = &logs[c].v[i];
				if (!at_tick(q, period, best[c]))
					continue;
				long j = (long)((q->start - first - centre + period + period / 2) / period);
				if (j >= 0 && j < jiffies)
					sum[j * k + c] += q->len;
			}
		}
		for (long j = 0; sum && j < jiffies && rows < maxrows; j++) {
			int all = 1;
			for (int c = 0; c < k; c++)
				all = all && sum[j * k + c] > 0;
			if (!all)
				continue;
			for (int c = 0; c < k; c++)
				ss_add(&flat, (double)sum[j * k + c]);
			rows++;
		}
		free(sum);
	}
	jv *ent = item_series_add(ctx, "tick_busy", &flat, "ns");
	jv *prm = jv_get(ent, "params");
	jv_set(prm, "cpus", jv_int(k));
	jv *cl = jv_set(prm, "cpu_list", jv_arr());
	for (int c = 0; c < k; c++)
		jv_push(cl, jv_int(o->cpus[c]));
	jv_set(prm, "rows", jv_int(rows));
	jv_set(prm, "jiffies", jv_int(jiffies));
	jv_set(prm, "layout", jv_str("rows of one value per CPU (cpu_list order), one row per jiffy"));
	ss_free(&flat);
	for (int c = 0; c < k; c++)
		free(logs[c].v);
}

void item_irq_cost(item_ctx *ctx)
{
	const struct options *o = ctx->opt;
	int64_t dur = plan(ctx, 300, 2000) * NS_PER_MS;
	long windows = plan(ctx, 2000, 10000);
	int64_t step = clock_step();
	int64_t threshold = step * 10 > 300 ? step * 10 : 300;
	int cpu_b = o->ncpus >= 2 ? o->cpus[1] : o->cpus[0];
	struct timespec res;
	int64_t period = clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 ? res.tv_sec * NS_PER_SEC + res.tv_nsec : 0;
	ctx->unit = "ns";
	item_method(ctx, "A thread pinned to cpu B reads CLOCK_MONOTONIC in a tight user-mode loop and logs every "
			 "gap between two reads above a threshold. tick: the spinner alone; gaps at the modal phase of "
			 "the tick period (clock_getres of CLOCK_MONOTONIC_COARSE). ipi: a thread on cpu A calls "
			 "membarrier(PRIVATE_EXPEDITED) every 50 us; gaps that overlap a call (the call's latency is "
			 "ipi_round_trip, only calls that interrupted cpu B). hrtimer: the spinner arms a timerfd 20 us "
			 "ahead with no reader; the first gap ending after the expiry. other_gaps: the tick run's gaps "
			 "outside the tick's window (not longer than 1/20 of the period), params.per_s their rate. tick_busy: a spinner on every "
			 "allowed CPU at once (at most 16); per jiffy, each CPU's gaps in its modal tick window summed; "
			 "rows of one value per CPU for the jiffies in which every CPU had one. Top level = tick.");
	jv_set(ctx->params, "cpu_b", jv_int(cpu_b));
	jv_set(ctx->params, "clock_step_ns", jv_int(step));
	jv_set(ctx->params, "gap_threshold_ns", jv_int(threshold));
	jv_set(ctx->params, "phase_ns", jv_int(dur));
	jv_set(ctx->params, "tick_period_ns", jv_int(period));
	cpu_set_t saved;
	get_self_affinity(&saved);
	struct gaplog log = {.cap = 1000000};
	log.v = calloc(log.cap, sizeof(*log.v));
	if (!log.v || period <= 0) {
		item_fail(ctx, !log.v ? "out of memory" : "clock_getres(CLOCK_MONOTONIC_COARSE) failed");
		free(log.v);
		return;
	}

	/* tick: the spinner alone */
	int e = run_spinner(cpu_b, threshold, dur, &log);
	if (e) {
		item_fail(ctx, "spinner on cpu %d: %s", cpu_b, strerror(e));
		free(log.v);
		return;
	}
	sampleset tick;
	ss_init(&tick);
	int share = 0;
	tick_gaps(&log, period, &tick, &share);
	for (size_t i = 0; i < tick.n; i++)
		ss_add(&ctx->samples, tick.v[i]);
	jv *ent = item_series_add(ctx, "tick", &tick, "ns");
	jv *prm = jv_get(ent, "params");
	jv_set(prm, "gaps_total", jv_int((long long)log.n));
	jv_set(prm, "gaps_per_s", jv_num((double)log.n * 1e9 / (double)dur));
	jv_set(prm, "ticks_per_s", jv_num((double)tick.n * 1e9 / (double)dur));
	jv_set(prm, "modal_phase_share_pct", jv_int(share));
	ss_free(&tick);

	/* other_gaps: the same run's gaps away from the tick's window (and not preemptions) */
	sampleset other;
	ss_init(&other);
	int best = modal_phase_bin(&log, period);
	for (size_t i = 0; i < log.n; i++)
		if (log.v[i].len <= period / 20 && !at_tick(&log.v[i], period, best))
			ss_add(&other, (double)log.v[i].len);
	ent = item_series_add(ctx, "other_gaps", &other, "ns");
	prm = jv_get(ent, "params");
	jv_set(prm, "per_s", jv_num((double)other.n * 1e9 / (double)dur));
	jv_set(prm, "duration_ns", jv_int(dur));
	ss_free(&other);

	/* tick_busy: every CPU spins at once */
	tick_busy_series(ctx, threshold, dur, period);

	/* ipi: membarrier from cpu A to the spinner on cpu B */
	if (o->ncpus >= 2 && membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0) {
		long maxcalls = (long)(dur / (50 * NS_PER_US)) + 16, ncalls = 0;
		struct gap *calls = calloc((size_t)maxcalls, sizeof(*calls));
		atomic_int stop;
		atomic_init(&stop, 0);
		log.n = 0;
		struct spin_gaps gi = {.cpu = cpu_b, .threshold = threshold, .duration = dur + 200 * NS_PER_MS,
				       .log = &log, .stop = &stop};
		pthread_t th;
		pin_self_to_cpu(o->cpus[0]);
		if (calls && spawn_thread(gap_spinner, &gi, &th) == 0) {
			sleep_ns(20 * NS_PER_MS); /* the spinner reaches cpu B */
			int64_t end = now_ns() + dur;
			while (now_ns() < end && ncalls < maxcalls) {
				int64_t t0 = now_ns();
				membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0);
				int64_t t1 = now_ns();
				calls[ncalls++] = (struct gap){t0, t1 - t0};
				while (now_ns() - t1 < 50 * NS_PER_US)
					;
			}
			atomic_store(&stop, 1);
			pthread_join(th, NULL);
			sampleset gaps, rtt;
			ss_init(&gaps);
			ss_init(&rtt);
			size_t j = 0;
			for (long c = 0; c < ncalls; c++) {
				int64_t c0 = calls[c].start, c1 = c0 + calls[c].len;
				while (j < log.n && log.v[j].start + log.v[j].len < c0)
					j++;
				if (j < log.n && log.v[j].start <= c1) {
					ss_add(&gaps, (double)log.v[j].len);
					ss_add(&rtt, (double)calls[c].len);
					j++;
				}
			}
			ent = item_series_add(ctx, "ipi", &gaps, "ns");
			jv_set(jv_get(ent, "params"), "calls", jv_int(ncalls));
			ent = item_series_add(ctx, "ipi_round_trip", &rtt, "ns");
			jv_set(jv_get(ent, "params"), "calls", jv_int(ncalls));
			ss_free(&gaps);
			ss_free(&rtt);
		}
		free(calls);
		pin_self_to_set(&saved);
	}
	free(log.v);

	/* hrtimer: the spinner's own timerfd expires with no reader */
	sampleset hr;
	ss_init(&hr);
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (fd >= 0 && pin_self_to_cpu(cpu_b) == 0) {
		struct itimerspec arm = {.it_value = {.tv_nsec = 20 * NS_PER_US}};
		for (long w = 0; w < windows; w++) {
			int64_t t_arm = now_ns();
			if (timerfd_settime(fd, 0, &arm, NULL) != 0)
				break;
			int64_t expiry = t_arm + 20 * NS_PER_US;
			int64_t prev = now_ns(), until = t_arm + 80 * NS_PER_US, best = -1;
			while (prev < until) {
				int64_t t = now_ns();
				/* the first gap ending after the expiry (the timer cannot fire before it) */
				if (t - prev > threshold && t >= expiry && best < 0)
					best = t - prev;
				prev = t;
			}
			if (best > 0)
				ss_add(&hr, (double)best);
			uint64_t ticks;
			while (read(fd, &ticks, sizeof(ticks)) < 0 && errno == EINTR)
				;
		}
	}
	if (fd >= 0)
		close(fd);
	pin_self_to_set(&saved);
	ent = item_series_add(ctx, "hrtimer", &hr, "ns");
	jv_set(jv_get(ent, "params"), "windows", jv_int(windows));
	jv_set(jv_get(ent, "params"), "timeout_ns", jv_int(20 * NS_PER_US));
	ss_free(&hr);
}
