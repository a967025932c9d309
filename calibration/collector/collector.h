/*
 * rcusim-collector: shared declarations.
 *
 * The helper library (util_*.c) provides timing, CPU affinity, a JSON
 * document model with one serializer, statistics, a tiny gzip reader, and the
 * safety layer (changed settings, child processes, signal handling).
 * Measurement items live in item_*.c and only fill a struct item_ctx.
 */
#ifndef RCUSIM_COLLECTOR_H
#define RCUSIM_COLLECTOR_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define COLLECTOR_NAME "rcusim-collector"
#define COLLECTOR_VERSION "0.16.0"
#define PROFILE_SCHEMA_VERSION 1
#define PROFILE_KIND "rcusim-profile"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define NS_PER_SEC 1000000000LL
#define NS_PER_MS 1000000LL
#define NS_PER_US 1000LL

/* ---------------------------------------------------------------- json */
typedef enum { JV_NULL, JV_BOOL, JV_INT, JV_NUM, JV_STR, JV_ARR, JV_OBJ } jv_type;

typedef struct jv {
	jv_type type;
	int boolean;
	long long integer;
	double number;
	char *string;
	struct jv **items; /* JV_ARR and JV_OBJ values */
	char **keys;       /* JV_OBJ keys, parallel to items */
	size_t len, cap;
} jv;

jv *jv_null(void);
jv *jv_bool(int b);
jv *jv_int(long long i);
jv *jv_num(double d); /* NaN and infinities serialize as null */
jv *jv_str(const char *s); /* NULL gives a JSON null */
jv *jv_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
jv *jv_arr(void);
jv *jv_obj(void);
jv *jv_push(jv *arr, jv *value);                 /* returns value */
jv *jv_set(jv *obj, const char *key, jv *value); /* replaces an existing key; returns value */
jv *jv_get(const jv *obj, const char *key);
void jv_free(jv *v);
/* Serialize with two-space indentation; short scalar arrays stay on one line. */
int jv_write(FILE *f, const jv *v);

/* ---------------------------------------------------------------- time */
int64_t now_ns(void);            /* CLOCK_MONOTONIC */
void sleep_ns(int64_t ns);       /* relative CLOCK_MONOTONIC sleep, restarts on EINTR */
void utc_iso8601(char *buf, size_t len); /* "2025-01-31T12:00:00Z" */
double realtime_s(void);

/* ----------------------------------------------------------- affinity */
int cpus_allowed(int *cpus, int max);    /* CPUs in this process's affinity mask */
int pin_self_to_cpu(int cpu);            /* current thread; 0 or -errno */
int pin_self_to_set(const cpu_set_t *set);
int get_self_affinity(cpu_set_t *set);
int parse_cpu_list(const char *s, int *cpus, int max); /* "0-3,8" */

/* ---------------------------------------------------------- statistics */
typedef struct {
	double *v;
	size_t n, cap;
} sampleset;

void ss_init(sampleset *s);
void ss_add(sampleset *s, double x);
void ss_free(sampleset *s);
/* {"samples_total", "samples", "stats", "histogram"} added to obj; at most max_emit samples. */
void ss_to_json(const sampleset *s, jv *obj, size_t max_emit);
jv *ss_stats_json(const sampleset *s);

/* --------------------------------------------------------------- files */
/* Read a whole (small) file into a malloc'd NUL-terminated buffer; NULL on error (errno set). */
char *read_file(const char *path, size_t *len_out);
/* Like read_file, trailing whitespace stripped; NULL when unreadable. */
char *read_file_trim(const char *path);
int write_file_str(const char *path, const char *s); /* 0 or -errno */

/* gunzip a buffer; malloc'd NUL-terminated output or NULL with a reason in err. */
char *gunzip_buffer(const unsigned char *in, size_t inlen, size_t *outlen, char *err, size_t errlen);

/* -------------------------------------------------------------- safety */
/* Record the current value of a sysfs/procfs setting, then write new_value.
 * The original is restored by settings_restore_all(), at exit and on signals. */
int setting_change(const char *path, const char *new_value, char *err, size_t errlen);
int setting_restore(const char *path); /* 0 or -errno; entry forgotten afterwards */
int settings_restore_all(void);        /* async-signal-safe; returns failure count */
jv *settings_log_json(void);           /* every change made during the run */

/* Fork with SIGINT/SIGTERM/SIGHUP blocked; the child gets PR_SET_PDEATHSIG
 * SIGKILL and default signal dispositions; the parent tracks the pid. */
pid_t tracked_fork(void);
/* waitpid + untrack; returns waitpid's result. */
pid_t tracked_wait(pid_t pid, int *status);
void tracked_kill_all(void); /* SIGKILL and reap every tracked child; async-signal-safe */
void tracked_kill_strays(void); /* the same, sparing the spawner */
int tracked_count(void);        /* tracked children but the spawner */
/* The path of an executable tool in the usual sbin/bin directories (written into buf), or NULL. */
const char *find_tool(const char *name, char *buf, size_t len);
/* The spawner: a small tracked child, forked before any item runs, that forks the workloads
 * (run_cmd's commands, the messaging item's processes) so that their forks and exits do not
 * depend on the collector's grown memory; spawner_start() returns 0 or -errno. */
int spawner_start(void);
void spawner_stop(void); /* end it and reap it */
/* A job run in the spawner: reads inlen bytes of input, writes exactly outlen bytes of output
 * (zeroed beforehand). It runs in the collector itself when there is no spawner. */
typedef void (*spawner_job)(const void *in, size_t inlen, void *out, size_t outlen);
/* Run fn in the spawner (in and out at most 8 KiB); 0, or -errno when the spawner is gone. */
int spawner_call(spawner_job fn, const void *in, size_t inlen, void *out, size_t outlen);
/* fork + execv(argv) with stdin/stdout/stderr on /dev/null + wait, in the spawner; *ns is fork()
 * to reaped. 0 when the child exits 0, else its wait status (or -errno if the fork or the
 * spawner failed). */
int run_cmd(char *const argv[], int64_t *ns);
void safety_install(const char *tmp_out_path); /* signal handlers + atexit */
/* Register an async-signal-safe cleanup run on every exit path (signal, exit()) after the
 * children are killed; an item calls it itself on its normal path and then removes it. */
int safety_add_cleanup(void (*fn)(void));
void safety_remove_cleanup(void (*fn)(void));
/* Create a thread with the termination signals blocked so the main thread handles them. */
int spawn_thread(void *(*fn)(void *), void *arg, void *thread_out /* pthread_t* */);

/* --------------------------------------------------------------- items */
typedef enum { ITEM_OK, ITEM_SKIPPED, ITEM_FAILED } item_status;

struct options {
	int quick;
	int modify_system;
	size_t max_samples;
	int ncpus;          /* CPUs in the affinity mask */
	int cpus[1024];     /* their ids */
	int is_root;
};

typedef struct item_ctx {
	const struct options *opt;
	item_status status;
	char reason[512];
	const char *unit;
	char method[1024];
	jv *params;  /* object */
	sampleset samples;
	jv *extra;   /* object: fields merged into the item (series, throughput...) */
} item_ctx;

typedef void (*item_fn)(item_ctx *ctx);

struct item_def {
	const char *name;
	const char *summary;
	item_fn run;
};

void item_skip(item_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void item_fail(item_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void item_method(item_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* pick the quick or the full figure */
static inline long plan(const item_ctx *ctx, long quick, long full) { return ctx->opt->quick ? quick : full; }

/* Series entries ("series": [...]) hold the sub-measurements of an item. */
jv *item_series_add(item_ctx *ctx, const char *label, const sampleset *s, const char *unit);

/* futex(2) on a word with no timeout: the futex, PI-futex and wakeup items' one wrapper */
long sys_futex(atomic_int *uaddr, int op, int val);

/* items */
void item_syscall(item_ctx *);
void item_context_switch(item_ctx *);
void item_context_switch_process(item_ctx *);
void item_cross_cpu_wakeup(item_ctx *);
void item_wake_placement(item_ctx *);
void item_fork_exec(item_ctx *);
void item_membarrier_global(item_ctx *);
void item_membarrier_global_busy(item_ctx *);
void item_membarrier_global_expedited(item_ctx *);
void item_membarrier_private_expedited(item_ctx *);
void item_futex_handoff(item_ctx *);
void item_pi_futex_handoff(item_ctx *);
void item_pipe_message(item_ctx *);
void item_unix_socket_message(item_ctx *);
void item_timerfd_arm_cancel(item_ctx *);
void item_sleep_lateness(item_ctx *);
void item_netns_create(item_ctx *);
void item_gp_rcu_expedited(item_ctx *);
void item_gp_cpu_offline(item_ctx *);
void item_pipe_costs(item_ctx *);
void item_irq_cost(item_ctx *);
void item_idle_wakeups(item_ctx *);
void item_wake_by_sleep_age(item_ctx *);
void item_tool_exec(item_ctx *);
void item_pi_futex_uncontended(item_ctx *);
void item_veth_link(item_ctx *);
void item_messaging(item_ctx *);
void item_netns_script(item_ctx *);

/* machine facts */
jv *machine_json(const struct options *opt);

/* shared helpers for items */
long membarrier_call(int cmd, unsigned flags);
struct spinners;
struct spinners *spinners_start(const int *cpus, int n); /* one user-mode spinning thread per CPU */
void spinners_stop(struct spinners *sp);

#endif
