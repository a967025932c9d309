/*
 * Machine facts for the profile's "machine" object: CPUs, kernel
 * configuration (from /boot/config-$(uname -r) or /proc/config.gz, read with
 * our own gunzip), HZ, preemption model, RCU settings and kthreads.
 */
#include "collector.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static jv *cpu_list_json(const char *path)
{
	jv *o = jv_obj();
	char *s = read_file_trim(path);
	jv_set(o, "list", jv_str(s));
	if (s) {
		static int cpus[8192];
		jv_set(o, "count", jv_int(parse_cpu_list(s, cpus, 8192)));
	} else {
		jv_set(o, "count", jv_null());
	}
	free(s);
	return o;
}

static void cpuinfo_facts(jv *m)
{
	char *s = read_file("/proc/cpuinfo", NULL);
	const char *keys[] = {"model name", "Model", "Hardware", "cpu model", "cpu", "uarch", "CPU part"};
	char *model = NULL;
	int hypervisor = 0;
	for (size_t k = 0; s && k < ARRAY_LEN(keys) && !model; k++) {
		for (char *line = s; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
			size_t kl = strlen(keys[k]);
			if (strncmp(line, keys[k], kl) != 0)
				continue;
			char *p = line + kl;
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p != ':')
				continue;
			p++;
			while (*p == ' ')
				p++;
			char *end = strchr(p, '\n');
			size_t len = end ? (size_t)(end - p) : strlen(p);
			model = strndup(p, len);
			break;
		}
	}
	if (s && strstr(s, " hypervisor"))
		hypervisor = 1;
	jv_set(m, "cpu_model", jv_str(model));
	jv_set(m, "cpu_model_source", jv_str(s ? "/proc/cpuinfo" : NULL));
	jv_set(m, "hypervisor_flag", jv_bool(hypervisor));
	free(model);
	free(s);
}

/* ------------------------------------------------------- kernel config */
struct kconfig {
	char *text;
	char source[512];
	char error[512];
};

static void load_kconfig(struct kconfig *kc, const char *release)
{
	memset(kc, 0, sizeof(*kc));
	char path[512];
	const char *text_paths[] = {"/boot/config-%s", "/lib/modules/%s/config", "/usr/lib/modules/%s/config"};
	for (size_t i = 0; i < ARRAY_LEN(text_paths); i++) {
		snprintf(path, sizeof(path), text_paths[i], release);
		char *t = read_file(path, NULL);
		if (t) {
			kc->text = t;
			snprintf(kc->source, sizeof(kc->source), "%s", path);
			return;
		}
	}
	size_t len;
	unsigned char *gz = (unsigned char *)read_file("/proc/config.gz", &len);
	if (!gz) {
		snprintf(kc->error, sizeof(kc->error), "no /boot/config-%s and /proc/config.gz unreadable (%s)",
			 release, strerror(errno));
		return;
	}
	char err[256];
	kc->text = gunzip_buffer(gz, len, NULL, err, sizeof(err));
	free(gz);
	if (kc->text)
		snprintf(kc->source, sizeof(kc->source), "/proc/config.gz");
	else
		snprintf(kc->error, sizeof(kc->error), "/proc/config.gz: %s", err);
}

/* Value of CONFIG_<name>: malloc'd string, "" when "is not set", NULL when absent. */
static char *kconfig_get(const struct kconfig *kc, const char *name)
{
	if (!kc->text)
		return NULL;
	char key[128], unset[160];
	snprintf(key, sizeof(key), "%s=", name);
	snprintf(unset, sizeof(unset), "# %s is not set", name);
	size_t kl = strlen(key), ul = strlen(unset);
	for (const char *line = kc->text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		if (len >= kl && strncmp(line, key, kl) == 0) {
			const char *v = line + kl;
			size_t vl = len - kl;
			if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
				v++;
				vl -= 2;
			}
			return strndup(v, vl);
		}
		if (len == ul && strncmp(line, unset, ul) == 0)
			return strdup("");
		if (!end)
			break;
		line = end + 1;
	}
	return NULL;
}

static jv *kconfig_value_json(const char *v)
{
	/* "is not set" -> null, so every key maps to a string or null */
	if (!v || !*v)
		return jv_null();
	return jv_str(v);
}

static int kconfig_is_y(const struct kconfig *kc, const char *name)
{
	char *v = kconfig_get(kc, name);
	int y = v && strcmp(v, "y") == 0;
	free(v);
	return y;
}

static jv *kconfig_json(const struct kconfig *kc)
{
	jv *o = jv_obj();
	jv_set(o, "source", jv_str(kc->text ? kc->source : NULL));
	jv_set(o, "error", jv_str(kc->text ? NULL : kc->error));
	jv *opts = jv_set(o, "options", jv_obj());
	if (!kc->text)
		return o;
	const char *prefixes[] = {"CONFIG_RCU", "CONFIG_TREE_RCU", "CONFIG_PREEMPT", "CONFIG_TINY_RCU",
				  "CONFIG_TASKS_", "CONFIG_NO_HZ", "CONFIG_HZ", "CONFIG_NR_CPUS",
				  "CONFIG_HOTPLUG_CPU", "CONFIG_SMP", "CONFIG_NET_NS", "CONFIG_MEMBARRIER",
				  "CONFIG_FUTEX", "CONFIG_SCHED_", "CONFIG_CPU_ISOLATION", "CONFIG_VIRT_CPU_ACCOUNTING",
				  "CONFIG_CONTEXT_TRACKING", "CONFIG_IRQ_TIME_ACCOUNTING", "CONFIG_HIGH_RES_TIMERS",
				  "CONFIG_PARAVIRT", "CONFIG_KVM_GUEST", "CONFIG_LOCALVERSION"};
	for (const char *line = kc->text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *name = line;
		size_t nlen = 0;
		int unset = 0;
		if (strncmp(line, "CONFIG_", 7) == 0) {
			const char *eq = memchr(line, '=', len);
			nlen = eq ? (size_t)(eq - line) : 0;
		} else if (strncmp(line, "# CONFIG_", 9) == 0 && len > 13 &&
			   strncmp(line + len - 11, " is not set", 11) == 0) {
			name = line + 2;
			nlen = len - 13;
			unset = 1;
		}
		if (nlen > 0 && nlen < 120) {
			int want = 0;
			for (size_t p = 0; p < ARRAY_LEN(prefixes) && !want; p++)
				want = strncmp(name, prefixes[p], strlen(prefixes[p])) == 0;
			if (want) {
				char key[128];
				memcpy(key, name, nlen);
				key[nlen] = '\0';
				char *v = unset ? NULL : kconfig_get(kc, key);
				jv_set(opts, key, kconfig_value_json(v));
				free(v);
			}
		}
		if (!end)
			break;
		line = end + 1;
	}
	return o;
}

/* ------------------------------------------------------------------ HZ */
static long snap_hz(double hz)
{
	const long common[] = {24, 32, 48, 64, 100, 128, 200, 250, 256, 300, 500, 1000, 1024, 1200};
	for (size_t i = 0; i < ARRAY_LEN(common); i++)
		if (fabs(hz - (double)common[i]) <= 0.05 * (double)common[i])
			return common[i];
	return lround(hz);
}

static long long timer_list_jiffies(void)
{
	char *s = read_file("/proc/timer_list", NULL);
	if (!s)
		return -1;
	char *p = strstr(s, "\njiffies: ");
	long long j = p ? atoll(p + 10) : -1;
	free(s);
	return j;
}

static jv *hz_json(const struct kconfig *kc)
{
	jv *o = jv_obj();
	long config_hz = -1, coarse_hz = -1, tl_hz = -1;
	char *v = kconfig_get(kc, "CONFIG_HZ");
	if (v && *v)
		config_hz = atol(v);
	free(v);
	/* CLOCK_*_COARSE read the tick-updated time, and the kernel reports their
	 * resolution as one tick (LOW_RES_NSEC = TICK_NSEC = 1e9 / HZ). */
	struct timespec res;
	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0 && res.tv_sec == 0 && res.tv_nsec > 0)
		coarse_hz = lround(1e9 / (double)res.tv_nsec);
	jv_set(o, "clock_getres_coarse_ns", coarse_hz > 0 ? jv_int(res.tv_nsec) : jv_null());
	/* /proc/timer_list (root only): jiffies advanced over a timed sleep */
	long long j0 = timer_list_jiffies();
	if (j0 >= 0) {
		int64_t t0 = now_ns();
		sleep_ns(300 * NS_PER_MS);
		long long j1 = timer_list_jiffies();
		int64_t t1 = now_ns();
		if (j1 > j0)
			tl_hz = snap_hz((double)(j1 - j0) / ((double)(t1 - t0) / 1e9));
	}
	jv_set(o, "config_hz", config_hz > 0 ? jv_int(config_hz) : jv_null());
	jv_set(o, "clock_getres_coarse_hz", coarse_hz > 0 ? jv_int(coarse_hz) : jv_null());
	jv_set(o, "timer_list_jiffies_hz", tl_hz > 0 ? jv_int(tl_hz) : jv_null());
	if (config_hz > 0) {
		jv_set(o, "value", jv_int(config_hz));
		jv_set(o, "method", jv_strf("CONFIG_HZ from %s", kc->source));
	} else if (coarse_hz > 0) {
		jv_set(o, "value", jv_int(coarse_hz));
		jv_set(o, "method", jv_str("1e9 / clock_getres(CLOCK_MONOTONIC_COARSE), which the kernel reports as one tick"));
	} else if (tl_hz > 0) {
		jv_set(o, "value", jv_int(tl_hz));
		jv_set(o, "method", jv_str("jiffies from /proc/timer_list advanced over a 300 ms CLOCK_MONOTONIC sleep"));
	} else {
		jv_set(o, "value", jv_null());
		jv_set(o, "method", jv_str("unknown: no kernel config, no coarse clock resolution, /proc/timer_list unreadable"));
	}
	return o;
}

/* -------------------------------------------------------------- cmdline */
static jv *cmdline_json(void)
{
	jv *o = jv_obj();
	char *s = read_file_trim("/proc/cmdline");
	jv_set(o, "rcu_nocbs", jv_null());
	jv_set(o, "nohz_full", jv_null());
	if (!s)
		return o;
	const char *exact[] = {"rcu_nocbs", "nohz_full", "nohz", "isolcpus", "preempt", "rcu_nocb_poll",
			       "irqaffinity", "maxcpus", "nr_cpus", "threadirqs", "mitigations", "idle",
			       "intel_idle.max_cstate", "processor.max_cstate", "cpuidle.off", "skew_tick"};
	const char *prefixes[] = {"rcutree.", "rcupdate.", "rcu_", "rcuscale.", "sched_"};
	char *save = NULL;
	for (char *tok = strtok_r(s, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
		if (strcmp(tok, "--") == 0)
			break; /* the rest belongs to init */
		char *eq = strchr(tok, '=');
		size_t nlen = eq ? (size_t)(eq - tok) : strlen(tok);
		int want = 0;
		for (size_t i = 0; i < ARRAY_LEN(exact) && !want; i++)
			want = strlen(exact[i]) == nlen && strncmp(tok, exact[i], nlen) == 0;
		for (size_t i = 0; i < ARRAY_LEN(prefixes) && !want; i++)
			want = strncmp(tok, prefixes[i], strlen(prefixes[i])) == 0;
		if (!want)
			continue;
		char key[128];
		snprintf(key, sizeof(key), "%.*s", (int)nlen, tok);
		jv_set(o, key, eq ? jv_str(eq + 1) : jv_bool(1));
	}
	free(s);
	return o;
}

/* ------------------------------------------------------------ preemption */
static jv *preempt_json(const struct kconfig *kc, const struct utsname *u, const jv *cmdline)
{
	jv *o = jv_obj();
	const char *version = u->version;
	jv *flags = jv_set(o, "uname_flags", jv_arr());
	int rt = strstr(version, "PREEMPT_RT") != NULL;
	int dyn = strstr(version, "PREEMPT_DYNAMIC") != NULL;
	int lazy = strstr(version, "PREEMPT_LAZY") != NULL;
	int plain = 0;
	for (const char *p = version; (p = strstr(p, "PREEMPT")) != NULL; p += 7) {
		char next = p[7];
		if (next == '\0' || next == ' ')
			plain = 1;
	}
	if (plain)
		jv_push(flags, jv_str("PREEMPT"));
	if (rt)
		jv_push(flags, jv_str("PREEMPT_RT"));
	if (dyn)
		jv_push(flags, jv_str("PREEMPT_DYNAMIC"));
	if (lazy)
		jv_push(flags, jv_str("PREEMPT_LAZY"));

	char *debugfs = read_file_trim("/sys/kernel/debug/sched/preempt");
	jv_set(o, "debugfs_sched_preempt", jv_str(debugfs));
	const jv *cmd_preempt = jv_get(cmdline, "preempt");
	const char *model = NULL, *source = NULL;
	char chosen[64] = "";
	if (debugfs) {
		char *l = strchr(debugfs, '('), *r = l ? strchr(l, ')') : NULL;
		if (l && r && r - l - 1 < (long)sizeof(chosen)) {
			snprintf(chosen, sizeof(chosen), "%.*s", (int)(r - l - 1), l + 1);
			model = chosen;
			source = "/sys/kernel/debug/sched/preempt";
		}
	}
	if (!model && (rt || kconfig_is_y(kc, "CONFIG_PREEMPT_RT"))) {
		model = "rt";
		source = rt ? "uname -v" : "kernel config";
	}
	if (!model && dyn && cmd_preempt && cmd_preempt->type == JV_STR) {
		snprintf(chosen, sizeof(chosen), "%s", cmd_preempt->string);
		model = chosen;
		source = "preempt= on /proc/cmdline";
	}
	if (!model && kc->text) {
		if (kconfig_is_y(kc, "CONFIG_PREEMPT_LAZY"))
			model = "lazy";
		else if (kconfig_is_y(kc, "CONFIG_PREEMPT"))
			model = "full";
		else if (kconfig_is_y(kc, "CONFIG_PREEMPT_VOLUNTARY"))
			model = "voluntary";
		else if (kconfig_is_y(kc, "CONFIG_PREEMPT_NONE"))
			model = "none";
		if (model)
			source = dyn ? "kernel config (boot default of PREEMPT_DYNAMIC)" : "kernel config";
	}
	if (!model) {
		if (plain && !dyn)
			model = "full";
		else if (dyn)
			model = "unknown (PREEMPT_DYNAMIC)";
		else
			model = "none_or_voluntary";
		source = "uname -v";
	}
	jv_set(o, "model", jv_str(model));
	jv_set(o, "source", jv_str(source));
	jv_set(o, "dynamic", jv_bool(dyn || kconfig_is_y(kc, "CONFIG_PREEMPT_DYNAMIC")));
	free(debugfs);
	return o;
}

/* ----------------------------------------------------------------- RCU */
static jv *rcu_config_json(const struct kconfig *kc)
{
	const char *keys[] = {"CONFIG_RCU_NOCB_CPU", "CONFIG_RCU_NOCB_CPU_DEFAULT_ALL", "CONFIG_RCU_LAZY",
			      "CONFIG_RCU_LAZY_DEFAULT_OFF", "CONFIG_PREEMPT_RCU", "CONFIG_TREE_RCU",
			      "CONFIG_RCU_FANOUT", "CONFIG_RCU_FANOUT_LEAF", "CONFIG_RCU_BOOST",
			      "CONFIG_RCU_EXP_KTHREAD", "CONFIG_NO_HZ_IDLE", "CONFIG_NO_HZ_FULL",
			      "CONFIG_NO_HZ_COMMON", "CONFIG_HZ_PERIODIC", "CONFIG_HZ", "CONFIG_NR_CPUS"};
	jv *o = jv_obj();
	jv_set(o, "available", jv_bool(kc->text != NULL));
	jv *opts = jv_set(o, "options", jv_obj());
	for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
		char *v = kconfig_get(kc, keys[i]);
		jv_set(opts, keys[i], kconfig_value_json(v));
		free(v);
	}
	return o;
}

static jv *params_dir_json(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return jv_null();
	char *names[512];
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < 512)
		if (de->d_name[0] != '.')
			names[n++] = strdup(de->d_name);
	closedir(d);
	if (n)
		qsort(names, (size_t)n, sizeof(names[0]), cmp_str);
	jv *o = jv_obj();
	for (int i = 0; i < n; i++) {
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		char *v = read_file_trim(path);
		jv_set(o, names[i], jv_str(v)); /* null when unreadable */
		free(v);
		free(names[i]);
	}
	return o;
}

static jv *rcuo_kthreads_json(void)
{
	DIR *d = opendir("/proc");
	jv *a = jv_arr();
	if (!d)
		return a;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s/comm", de->d_name);
		char *comm = read_file_trim(path);
		if (!comm)
			continue;
		if (strncmp(comm, "rcuo", 4) == 0) {
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				char **nn = realloc(names, cap * sizeof(*names));
				if (!nn) {
					free(comm);
					break;
				}
				names = nn;
			}
			names[n++] = comm;
		} else {
			free(comm);
		}
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		jv_push(a, jv_str(names[i]));
		free(names[i]);
	}
	free(names);
	return a;
}

jv *machine_json(const struct options *opt)
{
	struct utsname u;
	uname(&u);
	jv *m = jv_obj();
	jv_set(m, "kernel_release", jv_str(u.release));
	jv_set(m, "kernel_version", jv_str(u.version));
	jv_set(m, "arch", jv_str(u.machine));
	jv_set(m, "cpus_online", cpu_list_json("/sys/devices/system/cpu/online"));
	jv_set(m, "cpus_possible", cpu_list_json("/sys/devices/system/cpu/possible"));
	jv *allowed = jv_set(m, "cpus_allowed", jv_obj());
	jv *al = jv_set(allowed, "cpus", jv_arr());
	for (int i = 0; i < opt->ncpus; i++)
		jv_push(al, jv_int(opt->cpus[i]));
	jv_set(allowed, "count", jv_int(opt->ncpus));
	cpuinfo_facts(m);
	char *cs = read_file_trim("/sys/devices/system/clocksource/clocksource0/current_clocksource");
	jv_set(m, "clocksource", jv_str(cs));
	free(cs);
	char *idle = read_file_trim("/sys/devices/system/cpu/cpuidle/current_driver");
	jv_set(m, "cpuidle_driver", jv_str(idle));
	free(idle);

	struct kconfig kc;
	load_kconfig(&kc, u.release);
	jv_set(m, "hz", hz_json(&kc));
	jv *cmdline = cmdline_json();
	jv_set(m, "preemption", preempt_json(&kc, &u, cmdline));
	jv_set(m, "rcu_config", rcu_config_json(&kc));
	jv_set(m, "kernel_config", kconfig_json(&kc));
	jv_set(m, "cmdline", cmdline);
	jv *rcuo = rcuo_kthreads_json();
	jv_set(m, "rcuo_kthread_count", jv_int((long long)rcuo->len));
	jv_set(m, "rcuo_kthreads", rcuo);
	jv_set(m, "rcutree_parameters", params_dir_json("/sys/module/rcutree/parameters"));
	jv_set(m, "rcupdate_parameters", params_dir_json("/sys/module/rcupdate/parameters"));
	char *s;
	s = read_file_trim("/sys/kernel/rcu_expedited");
	jv_set(m, "rcu_expedited", jv_str(s));
	free(s);
	s = read_file_trim("/sys/kernel/rcu_normal");
	jv_set(m, "rcu_normal", jv_str(s));
	free(s);
	s = read_file_trim("/proc/sys/kernel/timer_migration");
	jv_set(m, "timer_migration", jv_str(s));
	free(s);
	free(kc.text);
	return m;
}
