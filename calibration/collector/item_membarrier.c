/*
 * membarrier items and the --modify-system grace-period items.
 * MEMBARRIER_CMD_GLOBAL (formerly SHARED) waits for an RCU grace period
 * (synchronize_rcu() when more than one CPU is online), so its latency is our
 * user-visible grace-period latency.  The expedited commands IPI the CPUs
 * running registered processes (GLOBAL_EXPEDITED) or this mm (PRIVATE_EXPEDITED).
 * See kernel/sched/membarrier.c.
 */
#include "collector.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>

static long query_mask(void) { return membarrier_call(MEMBARRIER_CMD_QUERY, 0); }

/* Time `count` calls of cmd into s, with gap_ns of sleep between calls. Returns 0 or errno. */
static int time_calls(int cmd, long count, int64_t gap_ns, sampleset *s)
{
	for (long i = 0; i < count; i++) {
		int64_t t0 = now_ns();
		long rc = membarrier_call(cmd, 0);
		int64_t t1 = now_ns();
		if (rc < 0)
			return errno;
		ss_add(s, (double)(t1 - t0));
		sleep_ns(gap_ns);
	}
	return 0;
}

struct pinned_main {
	cpu_set_t saved;
	int ok;
};

static void pin_main(struct pinned_main *pm, int cpu)
{
	pm->ok = get_self_affinity(&pm->saved) == 0;
	pin_self_to_cpu(cpu);
}

static void unpin_main(struct pinned_main *pm)
{
	if (pm->ok)
		pin_self_to_set(&pm->saved);
}

static int need_cmd(item_ctx *ctx, int cmd, const char *name)
{
	long mask = query_mask();
	if (mask < 0) {
		item_skip(ctx, "membarrier() is not available: %s", strerror(errno));
		return 0;
	}
	if (!(mask & cmd)) {
		item_skip(ctx, "this kernel does not support %s (MEMBARRIER_CMD_QUERY mask 0x%lx)", name, mask);
		return 0;
	}
	return 1;
}

static void global_common(item_ctx *ctx, int busy)
{
	ctx->unit = "ns";
	long count = plan(ctx, 40, 500);
	int64_t gap = NS_PER_MS;
	item_method(ctx, "Times membarrier(MEMBARRIER_CMD_GLOBAL) calls one at a time, 1 ms apart, from a "
			 "thread pinned to the first allowed CPU, while %s.",
		    busy ? "one user-mode spinning thread is pinned to each other allowed CPU"
			 : "the collector runs nothing on the other CPUs");
	jv_set(ctx->params, "count", jv_int(count));
	jv_set(ctx->params, "gap_ns", jv_int(gap));
	jv_set(ctx->params, "measuring_cpu", jv_int(ctx->opt->cpus[0]));
	jv_set(ctx->params, "spinning_cpus", jv_int(busy ? ctx->opt->ncpus - 1 : 0));
	if (!need_cmd(ctx, MEMBARRIER_CMD_GLOBAL, "MEMBARRIER_CMD_GLOBAL"))
		return;
	if (busy && ctx->opt->ncpus < 2) {
		item_skip(ctx, "only one CPU is online or allowed, there is no other CPU to keep busy");
		return;
	}
	struct pinned_main pm;
	pin_main(&pm, ctx->opt->cpus[0]);
	struct spinners *sp = busy ? spinners_start(ctx->opt->cpus + 1, ctx->opt->ncpus - 1) : NULL;
	int e = time_calls(MEMBARRIER_CMD_GLOBAL, count, gap, &ctx->samples);
	spinners_stop(sp);
	unpin_main(&pm);
	if (e)
		item_fail(ctx, "membarrier(GLOBAL): %s", strerror(e));
}

void item_membarrier_global(item_ctx *ctx) { global_common(ctx, 0); }
void item_membarrier_global_busy(item_ctx *ctx) { global_common(ctx, 1); }

static void expedited_common(item_ctx *ctx, int reg_cmd, int cmd, const char *name)
{
	ctx->unit = "ns";
	long count = plan(ctx, 300, 3000);
	int64_t gap = 20 * NS_PER_US;
	item_method(ctx, "Registers with the matching REGISTER command, then times %s calls one at a time "
			 "(20 us apart) from a thread pinned to the first allowed CPU while a thread of this "
			 "process spins in user mode on each other allowed CPU, so that IPIs are sent; "
			 "series 'no_other_threads' repeats it without the spinners.", name);
	jv_set(ctx->params, "count", jv_int(count));
	jv_set(ctx->params, "gap_ns", jv_int(gap));
	jv_set(ctx->params, "measuring_cpu", jv_int(ctx->opt->cpus[0]));
	jv_set(ctx->params, "spinning_cpus", jv_int(ctx->opt->ncpus - 1));
	if (!need_cmd(ctx, cmd, name))
		return;
	if (membarrier_call(reg_cmd, 0) < 0) {
		item_fail(ctx, "registration for %s failed: %s", name, strerror(errno));
		return;
	}
	struct pinned_main pm;
	pin_main(&pm, ctx->opt->cpus[0]);
	sampleset idle;
	ss_init(&idle);
	int e = time_calls(cmd, count, gap, &idle);
	if (!e) {
		struct spinners *sp = spinners_start(ctx->opt->cpus + 1, ctx->opt->ncpus - 1);
		e = time_calls(cmd, count, gap, &ctx->samples);
		spinners_stop(sp);
	}
	unpin_main(&pm);
	if (e) {
		item_fail(ctx, "membarrier(%s): %s", name, strerror(e));
	} else {
		item_series_add(ctx, "other_threads_spinning", &ctx->samples, "ns");
		item_series_add(ctx, "no_other_threads", &idle, "ns");
	}
	ss_free(&idle);
}

void item_membarrier_global_expedited(item_ctx *ctx)
{
	expedited_common(ctx, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, MEMBARRIER_CMD_GLOBAL_EXPEDITED,
			 "MEMBARRIER_CMD_GLOBAL_EXPEDITED");
}

void item_membarrier_private_expedited(item_ctx *ctx)
{
	expedited_common(ctx, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, MEMBARRIER_CMD_PRIVATE_EXPEDITED,
			 "MEMBARRIER_CMD_PRIVATE_EXPEDITED");
}

/* ------------------------------------------------ --modify-system items */
static int modify_allowed(item_ctx *ctx)
{
	if (!ctx->opt->modify_system) {
		item_skip(ctx, "changes system settings; run with --modify-system (as root) to measure it");
		return 0;
	}
	if (!ctx->opt->is_root) {
		item_skip(ctx, "--modify-system needs root (effective uid 0) to write sysfs settings");
		return 0;
	}
	return need_cmd(ctx, MEMBARRIER_CMD_GLOBAL, "MEMBARRIER_CMD_GLOBAL");
}

static int online_cpu_count(void)
{
	char *s = read_file_trim("/sys/devices/system/cpu/online");
	int cpus[4096];
	int n = s ? parse_cpu_list(s, cpus, 4096) : -1;
	free(s);
	return n;
}

static int gp_series(item_ctx *ctx, const char *label, long count, sampleset *keep)
{
	sampleset s;
	ss_init(&s);
	int e = time_calls(MEMBARRIER_CMD_GLOBAL, count, NS_PER_MS, &s);
	if (!e) {
		jv *entry = item_series_add(ctx, label, &s, "ns");
		jv_set(jv_get(entry, "params"), "cpus_online", jv_int(online_cpu_count()));
		if (keep)
			for (size_t i = 0; i < s.n; i++)
				ss_add(keep, s.v[i]);
	}
	ss_free(&s);
	return e;
}

void item_gp_rcu_expedited(item_ctx *ctx)
{
	const char *path = "/sys/kernel/rcu_expedited";
	long count = plan(ctx, 30, 300);
	ctx->unit = "ns";
	item_method(ctx, "Grace-period latency seen through membarrier(MEMBARRIER_CMD_GLOBAL), 1 ms apart: "
			 "series 'baseline' with %s unchanged, then series 'rcu_expedited_1' (the top-level "
			 "samples) after writing 1 to it; the original value is restored afterwards.", path);
	jv_set(ctx->params, "count", jv_int(count));
	if (!modify_allowed(ctx))
		return;
	char *orig = read_file_trim(path);
	char *normal = read_file_trim("/sys/kernel/rcu_normal");
	jv_set(ctx->params, "rcu_expedited_original", jv_str(orig));
	jv_set(ctx->params, "rcu_normal", jv_str(normal));
	if (normal && strcmp(normal, "1") == 0)
		jv_set(ctx->params, "note", jv_str("rcu_normal=1 overrides rcu_expedited"));
	free(normal);
	if (!orig) {
		item_skip(ctx, "%s is not readable: %s", path, strerror(errno));
		return;
	}
	free(orig);
	int e = gp_series(ctx, "baseline", count, NULL);
	if (e) {
		item_fail(ctx, "membarrier(GLOBAL): %s", strerror(e));
		return;
	}
	char err[512];
	if (setting_change(path, "1", err, sizeof(err)) != 0) {
		item_skip(ctx, "%s", err);
		return;
	}
	e = gp_series(ctx, "rcu_expedited_1", count, &ctx->samples);
	int rc = setting_restore(path);
	if (e)
		item_fail(ctx, "membarrier(GLOBAL) with rcu_expedited=1: %s", strerror(e));
	else if (rc < 0)
		item_fail(ctx, "could not restore %s: %s", path, strerror(-rc));
}

void item_gp_cpu_offline(item_ctx *ctx)
{
	const char *path = "/sys/devices/system/cpu/cpu1/online";
	long count = plan(ctx, 30, 300);
	ctx->unit = "ns";
	item_method(ctx, "Grace-period latency seen through membarrier(MEMBARRIER_CMD_GLOBAL), 1 ms apart: "
			 "series 'baseline' with all CPUs online, then series 'cpu1_offline' (the top-level "
			 "samples) after writing 0 to %s; cpu1 is brought back online afterwards.", path);
	jv_set(ctx->params, "count", jv_int(count));
	jv_set(ctx->params, "offlined_cpu", jv_int(1));
	if (!modify_allowed(ctx))
		return;
	char *cur = read_file_trim(path);
	if (!cur) {
		item_skip(ctx, "%s is not readable (%s): cpu1 missing or not hot-pluggable", path, strerror(errno));
		return;
	}
	int online = strcmp(cur, "1") == 0;
	free(cur);
	if (!online) {
		item_skip(ctx, "cpu1 is already offline; not touching it");
		return;
	}
	if (ctx->opt->cpus[0] == 1) {
		item_skip(ctx, "the measuring CPU is cpu1 (affinity mask); not offlining it");
		return;
	}
	int e = gp_series(ctx, "baseline", count, NULL);
	if (e) {
		item_fail(ctx, "membarrier(GLOBAL): %s", strerror(e));
		return;
	}
	char err[512];
	int64_t t0 = now_ns();
	if (setting_change(path, "0", err, sizeof(err)) != 0) {
		item_skip(ctx, "%s", err);
		return;
	}
	int64_t t1 = now_ns();
	jv_set(ctx->params, "offline_ns", jv_int(t1 - t0));
	jv_set(ctx->params, "cpus_online_during", jv_int(online_cpu_count()));
	sleep_ns(50 * NS_PER_MS);
	e = gp_series(ctx, "cpu1_offline", count, &ctx->samples);
	t0 = now_ns();
	int rc = setting_restore(path);
	t1 = now_ns();
	jv_set(ctx->params, "online_ns", jv_int(t1 - t0));
	if (e)
		item_fail(ctx, "membarrier(GLOBAL) with cpu1 offline: %s", strerror(e));
	else if (rc < 0)
		item_fail(ctx, "could not bring cpu1 back online: %s", strerror(-rc));
}
