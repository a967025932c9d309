/*
 * idle_wakeups: how often an idle CPU wakes up for timers of its own.
 *
 * A CPU's local timer interrupts (the "LOC" row of /proc/interrupts, x86) are
 * counted over windows in which the collector runs nothing on that CPU while a
 * user-mode spinner keeps every other allowed CPU busy.  With NO_HZ an idle
 * CPU's tick is stopped, so each of these interrupts is a wakeup for a timer
 * event of the rest of the system: its pinned timers and hrtimers (with timer
 * migration, kernel/time/timer_migration.c, its other timers expire on a busy
 * CPU).  Such a wakeup runs the tick, and a tick from idle is where an idle
 * CPU reports an RCU quiescent state by itself: it is what makes some grace
 * periods on a busy machine short (rcusim: Costs.idle_timers_per_s).
 *
 * A sample is one window's length divided by its interrupt count, in ns: the
 * mean time between wakeups (the window's length when there was none).  Series
 * "cpuN" hold each measured CPU's windows; "timer_softirq" and "sched_softirq"
 * the same windows' TIMER softirqs (timer-wheel expiries: the wakeups that run a
 * tick) and SCHED softirqs (on an idle CPU the kicks a busy CPU's tick sends it:
 * nohz balance, blocked-load updates, kernel/sched/fair.c nohz_balancer_kick);
 * series "context_switches" the context switches on the measured CPU in the
 * same windows (the runs of other tasks there: a daemon's poll loop, kworkers),
 * which decide which CPU of an idle machine goes idle last and so takes the
 * timer-migration hierarchy's events (rcusim: Costs.idle_task_wakeups_per_s);
 * series "all_idle" counts the CPUs other than the collector's own with no
 * spinner at all.
 */
#include "collector.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_MEASURED_CPUS 4 /* bounds the run time on large machines */

/* The counts of the row `label` ("LOC:", "TIMER:") of a per-CPU table (/proc/interrupts,
 * /proc/softirqs: a header of "CPUn" columns) into counts[cpu id] (ids < max). Returns the
 * number of columns read, or -1 when the file or the row is missing. */
static int read_row(const char *path, const char *label, long long *counts, int max)
{
	char *text = read_file(path, NULL);
	if (!text)
		return -1;
	int ids[1024];
	int ncols = 0;
	size_t llen = strlen(label);
	char *save = NULL;
	char *line = strtok_r(text, "\n", &save);
	if (line) {
		for (char *p = line; (p = strstr(p, "CPU")) != NULL && ncols < (int)ARRAY_LEN(ids); p += 3)
			ids[ncols++] = atoi(p + 3);
	}
	int found = -1;
	while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
		char *p = line;
		while (*p == ' ')
			p++;
		if (strncmp(p, label, llen) != 0)
			continue;
		p += llen;
		found = 0;
		for (int k = 0; k < ncols; k++) {
			char *end;
			long long v = strtoll(p, &end, 10);
			if (end == p)
				break;
			if (ids[k] >= 0 && ids[k] < max)
				counts[ids[k]] = v;
			found++;
			p = end;
		}
		break;
	}
	free(text);
	return found;
}

/* What a window counts: local timer interrupts, TIMER softirqs (timer-wheel expiries) and
 * SCHED softirqs (on an idle CPU: the nohz balance and blocked-load kicks of a busy one). */
static const struct {
	const char *path, *label;
} COUNTERS[] = {
	{"/proc/interrupts", "LOC:"},
	{"/proc/softirqs", "TIMER:"},
	{"/proc/softirqs", "SCHED:"},
};
#define NCOUNTERS ((int)ARRAY_LEN(COUNTERS))

static int read_counters(long long counts[][4096])
{
	for (int k = 0; k < NCOUNTERS; k++)
		if (read_row(COUNTERS[k].path, COUNTERS[k].label, counts[k], 4096) <= 0)
			return -1;
	return 0;
}

/* A counter of the context switches on `cpu`, whatever task runs (a cpu-wide software perf
 * event), or -1: counting a whole CPU needs root (or kernel.perf_event_paranoid <= 0). */
static int open_switch_counter(int cpu)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
	return (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static long long read_switches(int fd)
{
	long long v;
	return fd >= 0 && read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v) ? v : -1;
}

/* One window of `window` ns: for each of the n CPUs and each counter, the events counted into
 * cnt[counter][i]; the window's length into *elapsed; the context switches on each CPU into
 * sw[i] when fds[i] is a counter (-1 otherwise). 0, or -1 when a table could not be read. */
static int count_window(const int *cpus, int n, int64_t window, long long cnt[][MAX_MEASURED_CPUS], int64_t *elapsed,
			const int *fds, long long *sw)
{
	static long long before[NCOUNTERS][4096], after[NCOUNTERS][4096];
	long long s0[MAX_MEASURED_CPUS];
	if (read_counters(before) < 0)
		return -1;
	for (int i = 0; i < n; i++)
		s0[i] = read_switches(fds[i]);
	int64_t t0 = now_ns();
	sleep_ns(window);
	int64_t t1 = now_ns();
	for (int i = 0; i < n; i++) {
		long long s1 = read_switches(fds[i]);
		sw[i] = s0[i] >= 0 && s1 >= s0[i] ? s1 - s0[i] : -1;
	}
	if (read_counters(after) < 0)
		return -1;
	for (int k = 0; k < NCOUNTERS; k++)
		for (int i = 0; i < n; i++)
			cnt[k][i] = cpus[i] < 4096 ? after[k][cpus[i]] - before[k][cpus[i]] : 0;
	*elapsed = t1 - t0;
	return 0;
}

/* The pids of the RCU grace-period kthreads (comm rcu_preempt or rcu_sched), at most max; their
 * count. */
static int find_gp_kthreads(int *pids, int max)
{
	DIR *d = opendir("/proc");
	int n = 0;
	if (!d)
		return 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < max) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s/comm", de->d_name);
		char *comm = read_file_trim(path);
		if (comm && (strcmp(comm, "rcu_preempt") == 0 || strcmp(comm, "rcu_sched") == 0))
			pids[n++] = atoi(de->d_name);
		free(comm);
	}
	closedir(d);
	return n;
}

/* The summed voluntary context switches of the tasks pids (their sleeps), or -1. */
static long long gp_kthread_switches(const int *pids, int n)
{
	long long total = 0;
	for (int i = 0; i < n; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/status", pids[i]);
		char *text = read_file(path, NULL);
		char *p = text ? strstr(text, "\nvoluntary_ctxt_switches:") : NULL;
		if (!p) {
			free(text);
			return -1;
		}
		total += strtoll(p + 26, NULL, 10);
		free(text);
	}
	return total;
}

/* The mean gap between n events in a window of `elapsed` ns (the window's length for none). */
static double gap_of(long long n, int64_t elapsed) { return n > 0 ? (double)elapsed / (double)n : (double)elapsed; }

struct pinned {
	cpu_set_t saved;
	int ok;
};

void item_idle_wakeups(item_ctx *ctx)
{
	const struct options *o = ctx->opt;
	ctx->unit = "ns";
	long windows = plan(ctx, 3, 10);
	int64_t window = plan(ctx, 200, 500) * NS_PER_MS;
	int measured = o->ncpus < MAX_MEASURED_CPUS ? o->ncpus : MAX_MEASURED_CPUS;
	item_method(ctx, "Counts a CPU's local timer interrupts (the LOC row of /proc/interrupts) over %ld windows of "
			 "%lld ms while it runs nothing of the collector's and a user-mode spinner is pinned to every "
			 "other allowed CPU (the collector's thread sleeps on one of those): with NO_HZ each is a wakeup "
			 "of the idle CPU for a timer of its own (pinned timers and hrtimers; timer migration moves the "
			 "others to a busy CPU). A sample is the window's length divided by its count: the mean time "
			 "between wakeups, ns (the window's length if there was none). The first %d allowed CPUs in "
			 "turn, series cpuN; series timer_softirq and sched_softirq: the same windows' TIMER softirqs "
			 "(timer-wheel expiries) and SCHED softirqs (the kicks of the busy CPUs' nohz balance and "
			 "blocked-load updates) of /proc/softirqs; series context_switches: the context switches on "
			 "the measured CPU in the same windows (a cpu-wide software perf event, root only), i.e. the "
			 "runs of other tasks there, a switch in and one out each; series "
			 "all_idle: the other CPUs' local timer "
			 "interrupts with no spinner, the collector's thread sleeping on the first allowed CPU; series "
			 "gp_kthread: in those windows the sleeps (voluntary context switches) of the RCU grace-period "
			 "kthread, which on an idle machine runs the grace periods others ask for, two sleeps each "
			 "(its start, the FQS scan that ends it). params events and seconds: the measured CPUs' totals "
			 "(local timer interrupts at the top, each counter in its series), which give the rates also "
			 "where a window saw no event.",
		    windows, (long long)(window / NS_PER_MS), MAX_MEASURED_CPUS);
	jv_set(ctx->params, "windows", jv_int(windows));
	jv_set(ctx->params, "window_ns", jv_int(window));
	jv_set(ctx->params, "measured_cpus", jv_int(measured));
	if (o->ncpus < 2) {
		item_skip(ctx, "only one CPU is online or allowed: there is no other CPU to keep busy");
		return;
	}
	static long long probe[NCOUNTERS][4096];
	if (read_counters(probe) < 0) {
		item_skip(ctx, "/proc/interrupts has no LOC row (local timer interrupts are counted there on x86 only), or "
			       "/proc/softirqs no TIMER or SCHED row");
		return;
	}
	struct pinned pm;
	pm.ok = get_self_affinity(&pm.saved) == 0;
	int failed = 0;
	sampleset wheel, kicks, switches;
	ss_init(&wheel);
	ss_init(&kicks);
	ss_init(&switches);
	long long total[NCOUNTERS] = {0};
	long long total_switches = 0;
	int have_switches = 1;
	int64_t total_ns = 0;
	for (int k = 0; k < measured && !failed; k++) {
		int cpu = o->cpus[k];
		int others[1024];
		int n = 0;
		for (int i = 0; i < o->ncpus && n < (int)ARRAY_LEN(others); i++)
			if (o->cpus[i] != cpu)
				others[n++] = o->cpus[i];
		pin_self_to_cpu(others[0]);
		int fd = open_switch_counter(cpu);
		if (fd < 0)
			have_switches = 0;
		struct spinners *sp = spinners_start(others, n);
		sampleset s;
		ss_init(&s);
		for (long w = 0; w < windows; w++) {
			long long cnt[NCOUNTERS][MAX_MEASURED_CPUS];
			int64_t elapsed;
			long long sw;
			if (count_window(&cpu, 1, window, cnt, &elapsed, &fd, &sw) < 0) {
				failed = 1;
				break;
			}
			ss_add(&s, gap_of(cnt[0][0], elapsed));
			ss_add(&ctx->samples, gap_of(cnt[0][0], elapsed));
			ss_add(&wheel, gap_of(cnt[1][0], elapsed));
			ss_add(&kicks, gap_of(cnt[2][0], elapsed));
			if (sw < 0) {
				have_switches = 0;
			} else {
				ss_add(&switches, gap_of(sw, elapsed));
				total_switches += sw;
			}
			for (int c = 0; c < NCOUNTERS; c++)
				total[c] += cnt[c][0];
			total_ns += elapsed;
		}
		spinners_stop(sp);
		if (fd >= 0)
			close(fd);
		char label[32];
		snprintf(label, sizeof(label), "cpu%d", cpu);
		jv *ent = item_series_add(ctx, label, &s, "ns");
		jv_set(jv_get(ent, "params"), "cpu", jv_int(cpu));
		ss_free(&s);
	}
	if (!failed) {
		/* the totals give the rates exactly, also where a window saw no event */
		jv_set(ctx->params, "events", jv_int(total[0]));
		jv_set(ctx->params, "seconds", jv_num((double)total_ns / NS_PER_SEC));
		jv *e = item_series_add(ctx, "timer_softirq", &wheel, "ns");
		jv_set(jv_get(e, "params"), "events", jv_int(total[1]));
		jv_set(jv_get(e, "params"), "seconds", jv_num((double)total_ns / NS_PER_SEC));
		e = item_series_add(ctx, "sched_softirq", &kicks, "ns");
		jv_set(jv_get(e, "params"), "events", jv_int(total[2]));
		jv_set(jv_get(e, "params"), "seconds", jv_num((double)total_ns / NS_PER_SEC));
		if (have_switches) {
			e = item_series_add(ctx, "context_switches", &switches, "ns");
			jv_set(jv_get(e, "params"), "events", jv_int(total_switches));
			jv_set(jv_get(e, "params"), "seconds", jv_num((double)total_ns / NS_PER_SEC));
		}
	}
	ss_free(&wheel);
	ss_free(&kicks);
	ss_free(&switches);
	if (!failed) {
		pin_self_to_cpu(o->cpus[0]);
		sampleset all, gp;
		ss_init(&all);
		ss_init(&gp);
		int pids[8];
		int npids = find_gp_kthreads(pids, (int)ARRAY_LEN(pids));
		long long gp_total = 0;
		int64_t gp_ns = 0;
		for (long w = 0; w < windows && !failed; w++) {
			long long cnt[NCOUNTERS][MAX_MEASURED_CPUS];
			int64_t elapsed;
			const int nofds[MAX_MEASURED_CPUS] = {-1, -1, -1, -1};
			long long sw[MAX_MEASURED_CPUS];
			long long g0 = npids ? gp_kthread_switches(pids, npids) : -1;
			failed = count_window(o->cpus + 1, measured - 1, window, cnt, &elapsed, nofds, sw) < 0;
			long long g1 = npids ? gp_kthread_switches(pids, npids) : -1;
			for (int i = 0; !failed && i < measured - 1; i++)
				ss_add(&all, gap_of(cnt[0][i], elapsed));
			if (g0 >= 0 && g1 >= g0) {
				ss_add(&gp, gap_of(g1 - g0, elapsed));
				gp_total += g1 - g0;
				gp_ns += elapsed;
			} else {
				npids = 0; /* a kthread gone or unreadable: no series */
			}
		}
		item_series_add(ctx, "all_idle", &all, "ns");
		if (npids && gp_ns > 0) {
			jv *e = item_series_add(ctx, "gp_kthread", &gp, "ns");
			jv_set(jv_get(e, "params"), "events", jv_int(gp_total));
			jv_set(jv_get(e, "params"), "seconds", jv_num((double)gp_ns / NS_PER_SEC));
			jv_set(jv_get(e, "params"), "kthreads", jv_int(npids));
		}
		ss_free(&all);
		ss_free(&gp);
	}
	if (pm.ok)
		pin_self_to_set(&pm.saved);
	if (failed)
		item_fail(ctx, "/proc/interrupts or /proc/softirqs could not be read again: %s", strerror(errno));
}
