/*
 * rcusim-collector: measures the kernel primitives rcusim is calibrated with
 * and writes one JSON profile (see README.md for every field).
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

static const struct item_def items[] = {
	{"syscall", "getppid() through syscall(), ns per call", item_syscall},
	{"context_switch", "pipe ping-pong between two threads on one CPU, ns per switch", item_context_switch},
	{"context_switch_process", "pipe ping-pong between two processes on one CPU, ns per switch", item_context_switch_process},
	{"cross_cpu_wakeup", "pipe ping-pong between two CPUs, ns per one-way wakeup", item_cross_cpu_wakeup},
	{"wake_placement", "where a task that may run anywhere is woken: the waker's CPU or an idle one", item_wake_placement},
	{"fork_exec", "fork + exec /bin/true + waitpid, ns", item_fork_exec},
	{"membarrier_global", "MEMBARRIER_CMD_GLOBAL latency (a grace period), other CPUs idle", item_membarrier_global},
	{"membarrier_global_busy", "MEMBARRIER_CMD_GLOBAL latency with every other CPU spinning", item_membarrier_global_busy},
	{"membarrier_global_expedited", "MEMBARRIER_CMD_GLOBAL_EXPEDITED latency", item_membarrier_global_expedited},
	{"membarrier_private_expedited", "MEMBARRIER_CMD_PRIVATE_EXPEDITED latency with IPIs", item_membarrier_private_expedited},
	{"futex_handoff", "futex mutex under contention, N = 2..2*ncpus: throughput and handoff latency", item_futex_handoff},
	{"pi_futex_handoff", "PI futex (kernel rt-mutex) under contention: throughput and handoff latency", item_pi_futex_handoff},
	{"pipe_message", "100-byte pipe message, one-way, same and cross CPU", item_pipe_message},
	{"unix_socket_message", "100-byte AF_UNIX stream message, one-way, same and cross CPU", item_unix_socket_message},
	{"timerfd_arm_cancel", "timerfd_settime arm then disarm, ns per pair", item_timerfd_arm_cancel},
	{"sleep_lateness", "clock_nanosleep 1 ms and 100 us: lateness", item_sleep_lateness},
	{"netns_create", "network namespace create cost vs namespaces alive, destroy (root)", item_netns_create},
	{"gp_rcu_expedited", "grace-period latency with rcu_expedited=1 (--modify-system)", item_gp_rcu_expedited},
	{"gp_cpu_offline", "grace-period latency with cpu1 offline (--modify-system)", item_gp_cpu_offline},
	{"pipe_costs", "single pipe write()/read() calls, and a write() that wakes a remote reader", item_pipe_costs},
	{"irq_cost", "interruption gaps of a user-mode spinner: tick, IPI, hrtimer", item_irq_cost},
	{"idle_wakeups", "how often an idle CPU wakes for timers of its own while the others spin, ns between wakeups", item_idle_wakeups},
	{"wake_by_sleep_age", "cross-CPU futex wakeup latency by the time since the wakee called FUTEX_WAIT", item_wake_by_sleep_age},
	{"tool_exec", "fork + exec + waitpid of ip -V and sysctl -n against /bin/true, ns", item_tool_exec},
	{"pi_futex_uncontended", "FUTEX_LOCK_PI + FUTEX_UNLOCK_PI syscalls on an unowned word; trylock of an owned one", item_pi_futex_uncontended},
	{"veth_link", "rtnetlink veth create (peer in another netns, one queue, same netns), move, delete; lo up (root)", item_veth_link},
	{"messaging", "composite: perf bench sched messaging style groups over pipes, total time", item_messaging},
	{"netns_script", "composite (root): the netns-2014 fake-router script with ip/sysctl, per router", item_netns_script},
};
#define NITEMS ((int)ARRAY_LEN(items))

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " COLLECTOR_NAME " [options]\n"
		"Measure kernel primitives and write one JSON profile for rcusim.\n\n"
		"  --quick            fewer samples (about a minute on a 2-CPU machine)\n"
		"  --items a,b,...    run only these items (see --list)\n"
		"  --list             list the items and exit\n"
		"  --out FILE         write the profile to FILE (default: stdout)\n"
		"  --modify-system    also run items that change settings (root only):\n"
		"                     /sys/kernel/rcu_expedited=1 and cpu1 offline; all restored\n"
		"  --max-samples N    raw samples kept per item or series (default 2000)\n"
		"  --version          print the version and exit\n"
		"  --help             this text\n\n"
		"Progress goes to stderr. Exit status: 0 done (items may be skipped),\n"
		"1 runtime error, 2 bad usage; on SIGINT/SIGTERM children are killed,\n"
		"settings restored, and the collector dies of that signal.\n");
}

static void die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, COLLECTOR_NAME ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (try --help)\n");
	exit(2);
}

static int find_item(const char *name, size_t len)
{
	for (int i = 0; i < NITEMS; i++)
		if (strlen(items[i].name) == len && strncmp(items[i].name, name, len) == 0)
			return i;
	return -1;
}

static const char *status_name(item_status s)
{
	return s == ITEM_OK ? "ok" : s == ITEM_SKIPPED ? "skipped" : "failed";
}

/* CPU time of the whole machine from /proc/stat (seconds): busy (user..softirq) and steal. */
static int machine_cpu_time(double *busy, double *steal)
{
	char *stat = read_file("/proc/stat", NULL);
	if (!stat)
		return -1;
	unsigned long long v[10] = {0};
	int n = sscanf(stat, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		       &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
	free(stat);
	if (n < 8)
		return -1;
	double hz = (double)sysconf(_SC_CLK_TCK);
	/* user nice system idle iowait irq softirq steal */
	*busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6]) / hz;
	*steal = (double)v[7] / hz;
	return 0;
}

static double own_cpu_time(void)
{
	struct rusage self, kids;
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	double t = 0;
	const struct rusage *r[2] = {&self, &kids};
	for (int i = 0; i < 2; i++)
		t += (double)(r[i]->ru_utime.tv_sec + r[i]->ru_stime.tv_sec) +
		     (double)(r[i]->ru_utime.tv_usec + r[i]->ru_stime.tv_usec) / 1e6;
	return t;
}

static jv *loadavg_json(void)
{
	char *s = read_file_trim("/proc/loadavg");
	double a = 0, b = 0, c = 0;
	jv *arr = jv_arr();
	if (s && sscanf(s, "%lf %lf %lf", &a, &b, &c) == 3) {
		jv_push(arr, jv_num(a));
		jv_push(arr, jv_num(b));
		jv_push(arr, jv_num(c));
	}
	free(s);
	return arr;
}

static jv *item_json(item_ctx *ctx, double secs)
{
	jv *o = jv_obj();
	jv_set(o, "status", jv_str(status_name(ctx->status)));
	if (ctx->status != ITEM_OK)
		jv_set(o, "reason", jv_str(ctx->reason[0] ? ctx->reason : "unspecified"));
	jv_set(o, "unit", jv_str(ctx->unit ? ctx->unit : "ns"));
	jv_set(o, "method", jv_str(ctx->method));
	jv_set(o, "params", ctx->params);
	ctx->params = NULL;
	jv_set(o, "duration_s", jv_num(secs));
	ss_to_json(&ctx->samples, o, ctx->opt->max_samples);
	/* extra fields (series, throughput...) after the common ones */
	jv *extra = ctx->extra;
	for (size_t i = 0; i < extra->len; i++) {
		jv_set(o, extra->keys[i], extra->items[i]);
		extra->items[i] = NULL;
	}
	for (size_t i = 0; i < extra->len; i++)
		free(extra->keys[i]);
	extra->len = 0;
	jv_free(extra);
	ctx->extra = NULL;
	return o;
}

int main(int argc, char **argv)
{
	/* the command line as given, before any parsing */
	jv *cmdline = jv_arr();
	for (int i = 0; i < argc; i++)
		jv_push(cmdline, jv_str(argv[i]));

	static struct options opt;
	opt.max_samples = 2000;
	const char *out_path = NULL;
	int selected[NITEMS], any_selected = 0, list = 0;
	memset(selected, 0, sizeof(selected));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = NULL;
		char name[64];
		const char *eq = strchr(a, '=');
		if (strncmp(a, "--", 2) == 0 && eq) {
			snprintf(name, sizeof(name), "%.*s", (int)(eq - a), a);
			val = eq + 1;
		} else {
			snprintf(name, sizeof(name), "%s", a);
		}
		int takes = !strcmp(name, "--items") || !strcmp(name, "--out") || !strcmp(name, "--max-samples");
		if (takes && !val) {
			if (i + 1 >= argc)
				die_usage("option %s needs a value", name);
			val = argv[++i];
		} else if (!takes && val) {
			die_usage("option %s takes no value", name);
		}
		if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(name, "--version")) {
			printf(COLLECTOR_NAME " " COLLECTOR_VERSION "\n");
			return 0;
		} else if (!strcmp(name, "--quick")) {
			opt.quick = 1;
		} else if (!strcmp(name, "--list")) {
			list = 1;
		} else if (!strcmp(name, "--modify-system")) {
			opt.modify_system = 1;
		} else if (!strcmp(name, "--out")) {
			if (!*val)
				die_usage("option %s needs a non-empty file name", name);
			out_path = val;
		} else if (!strcmp(name, "--max-samples")) {
			char *end;
			long n = strtol(val, &end, 10);
			if (*end || end == val || n < 0 || n > 1000000)
				die_usage("--max-samples needs an integer between 0 and 1000000, not '%s'", val);
			opt.max_samples = (size_t)n;
		} else if (!strcmp(name, "--items")) {
			const char *p = val;
			for (;;) {
				const char *comma = strchr(p, ',');
				size_t len = comma ? (size_t)(comma - p) : strlen(p);
				if (len == 0)
					die_usage("empty item name in --items '%s'", val);
				int k = find_item(p, len);
				if (k < 0) {
					char bad[128];
					snprintf(bad, sizeof(bad), "%.*s", (int)(len > 100 ? 100 : len), p);
					die_usage("unknown item '%s' (see --list)", bad);
				}
				selected[k] = 1;
				any_selected = 1;
				if (!comma)
					break;
				p = comma + 1;
			}
		} else if (a[0] == '-') {
			die_usage("unknown option '%s'", a);
		} else {
			die_usage("unexpected argument '%s'", a);
		}
	}
	if (list) {
		for (int i = 0; i < NITEMS; i++)
			printf("%-30s %s\n", items[i].name, items[i].summary);
		return 0;
	}
	if (!any_selected)
		for (int i = 0; i < NITEMS; i++)
			selected[i] = 1;

	/* open the output early so that a bad path fails before any measurement */
	FILE *out = stdout;
	char tmp_path[4096] = "";
	if (out_path) {
		int n = snprintf(tmp_path, sizeof(tmp_path), "%s.tmp.%d", out_path, (int)getpid());
		if (n < 0 || (size_t)n >= sizeof(tmp_path)) {
			fprintf(stderr, COLLECTOR_NAME ": output path too long\n");
			return 2;
		}
		int fd = open(tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 || !(out = fdopen(fd, "w"))) {
			fprintf(stderr, COLLECTOR_NAME ": cannot write %s: %s\n", tmp_path, strerror(errno));
			return 1;
		}
	}
	safety_install(out_path ? tmp_path : NULL);

	opt.is_root = geteuid() == 0;
	int n = cpus_allowed(opt.cpus, (int)ARRAY_LEN(opt.cpus));
	opt.ncpus = n > 0 ? n : 1;
	if (n <= 0)
		opt.cpus[0] = 0;

	char start[64], end[64];
	utc_iso8601(start, sizeof(start));
	int64_t t_start = now_ns();

	jv *doc = jv_obj();
	jv_set(doc, "schema_version", jv_int(PROFILE_SCHEMA_VERSION));
	jv_set(doc, "kind", jv_str(PROFILE_KIND));
	jv *coll = jv_set(doc, "collector", jv_obj());
	jv_set(coll, "name", jv_str(COLLECTOR_NAME));
	jv_set(coll, "version", jv_str(COLLECTOR_VERSION));
	jv_set(coll, "compiler", jv_str(__VERSION__));
	jv_set(doc, "command_line", cmdline);
	jv_set(doc, "start_time", jv_str(start));
	jv_set(doc, "end_time", jv_null());
	jv_set(doc, "duration_s", jv_null());
	struct utsname u;
	uname(&u);
	jv *un = jv_set(doc, "uname", jv_obj());
	jv_set(un, "sysname", jv_str(u.sysname));
	jv_set(un, "nodename", jv_str(u.nodename));
	jv_set(un, "release", jv_str(u.release));
	jv_set(un, "version", jv_str(u.version));
	jv_set(un, "machine", jv_str(u.machine));
	jv_set(doc, "root", jv_bool(opt.is_root));
	jv_set(doc, "euid", jv_int((long long)geteuid()));
	jv *oj = jv_set(doc, "options", jv_obj());
	jv_set(oj, "mode", jv_str(opt.quick ? "quick" : "full"));
	jv_set(oj, "quick", jv_bool(opt.quick));
	jv *il = jv_set(oj, "items", jv_arr());
	for (int i = 0; i < NITEMS; i++)
		if (selected[i])
			jv_push(il, jv_str(items[i].name));
	jv_set(oj, "items_explicit", jv_bool(any_selected));
	jv_set(oj, "out", jv_str(out_path));
	jv_set(oj, "modify_system", jv_bool(opt.modify_system));
	jv_set(oj, "max_samples", jv_int((long long)opt.max_samples));
	jv_set(doc, "settings_changed", jv_arr());
	jv *warnings = jv_set(doc, "warnings", jv_arr());

	jv *load = jv_set(doc, "load", jv_obj());
	jv_set(load, "loadavg_start", loadavg_json());
	errno = 0;
	int nice_value = getpriority(PRIO_PROCESS, 0);
	jv_set(load, "nice", errno ? jv_null() : jv_int(nice_value));
	double busy0 = 0, steal0 = 0, own0 = own_cpu_time();
	int have_stat = machine_cpu_time(&busy0, &steal0) == 0;

	/* before anything grows the collector's memory (see spawner_start) */
	int spawner_rc = spawner_start();
	if (spawner_rc < 0)
		jv_push(warnings, jv_strf("no spawner process (%s): commands are forked from the collector itself, "
					  "which costs more as its memory grows",
					  strerror(-spawner_rc)));
	fprintf(stderr, "[0/%d] machine facts ...\n", (int)jv_get(oj, "items")->len);
	jv_set(doc, "machine", machine_json(&opt));
	jv *items_obj = jv_set(doc, "items", jv_obj());

	int total = 0, done = 0;
	for (int i = 0; i < NITEMS; i++)
		total += selected[i];
	for (int i = 0; i < NITEMS; i++) {
		if (!selected[i])
			continue;
		done++;
		fprintf(stderr, "[%d/%d] %s ...\n", done, total, items[i].name);
		item_ctx ctx;
		memset(&ctx, 0, sizeof(ctx));
		ctx.opt = &opt;
		ctx.status = ITEM_OK;
		ctx.params = jv_obj();
		ctx.extra = jv_obj();
		ss_init(&ctx.samples);
		int64_t t0 = now_ns();
		items[i].run(&ctx);
		double secs = (double)(now_ns() - t0) / 1e9;
		if (ctx.status == ITEM_OK && ctx.samples.n == 0)
			item_fail(&ctx, "no samples were collected");
		if (tracked_count() > 0) {
			jv_push(warnings, jv_strf("item %s left %d child processes; they were killed", items[i].name,
						  tracked_count()));
			tracked_kill_strays();
		}
		if (ctx.status == ITEM_OK)
			fprintf(stderr, "[%d/%d] %s: ok, %zu samples (%.1f s)\n", done, total, items[i].name,
				ctx.samples.n, secs);
		else
			fprintf(stderr, "[%d/%d] %s: %s: %s\n", done, total, items[i].name,
				status_name(ctx.status), ctx.reason);
		jv_set(items_obj, items[i].name, item_json(&ctx, secs));
		ss_free(&ctx.samples);
	}

	spawner_stop();
	/* how much else ran on the machine meanwhile: timings of a busy machine include it */
	jv_set(load, "loadavg_end", loadavg_json());
	double busy1 = 0, steal1 = 0, own1 = own_cpu_time();
	double wall = (double)(now_ns() - t_start) / 1e9, capacity = wall * opt.ncpus;
	if (have_stat && machine_cpu_time(&busy1, &steal1) == 0 && capacity > 0) {
		double other = (busy1 - busy0 - (own1 - own0)) / capacity;
		jv_set(load, "other_cpu_share", jv_num(other < 0 ? 0 : other));
		jv_set(load, "steal_share", jv_num((steal1 - steal0) / capacity));
		if (other > 0.1)
			jv_push(warnings, jv_strf("other work used %.0f%% of the CPUs during the run: timings include "
						  "its interference; collect on a quiet machine", 100 * other));
	} else {
		jv_set(load, "other_cpu_share", jv_null());
		jv_set(load, "steal_share", jv_null());
	}

	int restore_failures = settings_restore_all();
	if (restore_failures)
		jv_push(warnings, jv_strf("%d changed settings could not be restored", restore_failures));
	jv_set(doc, "settings_changed", settings_log_json());
	utc_iso8601(end, sizeof(end));
	jv_set(doc, "end_time", jv_str(end));
	jv_set(doc, "duration_s", jv_num((double)(now_ns() - t_start) / 1e9));

	int rc = 0;
	if (jv_write(out, doc) != 0 || fflush(out) != 0) {
		fprintf(stderr, COLLECTOR_NAME ": writing the profile failed: %s\n", strerror(errno));
		rc = 1;
	}
	if (out_path) {
		if (fsync(fileno(out)) != 0 && rc == 0)
			rc = 1;
		if (fclose(out) != 0)
			rc = 1;
		int complete = rc == 0; /* the temporary file holds the whole profile */
		if (rc == 0 && rename(tmp_path, out_path) != 0) {
			/* keep the measurement: only its final name is missing */
			fprintf(stderr, COLLECTOR_NAME ": cannot rename %s to %s: %s; the profile is kept in %s\n",
				tmp_path, out_path, strerror(errno), tmp_path);
			rc = 1;
		}
		if (rc != 0 && !complete)
			unlink(tmp_path);
		else if (rc == 0)
			fprintf(stderr, "profile written to %s\n", out_path);
	}
	if (restore_failures) {
		fprintf(stderr, COLLECTOR_NAME ": %d changed settings could not be restored, see settings_changed\n",
			restore_failures);
		rc = 1;
	}
	jv_free(doc);
	return rc;
}
