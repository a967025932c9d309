/*
 * Items: tool_exec, pi_futex_uncontended.
 *
 * Components of the held-back composites, measured on their own (never the
 * composites themselves):
 *
 * tool_exec: fork + exec + waitpid of the real tools the netns_script item
 *   runs (ip, sysctl), with arguments that do no namespace or device work,
 *   against /bin/true measured the same way in the same rounds. The difference
 *   is what running the tool costs beyond a minimal program (dynamic linking of
 *   its libraries, start-up, a larger address space to tear down at exit).
 *
 * pi_futex_uncontended: FUTEX_LOCK_PI + FUTEX_UNLOCK_PI issued as system calls
 *   on a futex word that nobody owns and nobody waits on. The kernel path
 *   (kernel/futex/pi.c futex_lock_pi -> futex_lock_pi_atomic takes a zero word
 *   with no top waiter by cmpxchg; futex_unlock_pi finds no top waiter and
 *   cmpxchgs TID -> 0) hashes the word and takes the hash-bucket lock but
 *   never touches a pi_state or the rt-mutex. Baseline: getppid() in the same
 *   item. Series trylock_owned: FUTEX_TRYLOCK_PI on a word owned by another
 *   live (sleeping) thread, which attaches a pi_state to the owner
 *   (attach_to_pi_owner), fails rt_mutex_futex_trylock under the rt-mutex's
 *   wait_lock and frees the pi_state again (put_pi_state).
 */
#include "collector.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------ tool_exec */

void item_tool_exec(item_ctx *ctx)
{
	char true_buf[256], ip_buf[256], sysctl_buf[256];
	const char *tru = find_tool("true", true_buf, sizeof(true_buf));
	const char *ip = find_tool("ip", ip_buf, sizeof(ip_buf));
	const char *sysctl = find_tool("sysctl", sysctl_buf, sizeof(sysctl_buf));
	long rounds = plan(ctx, 100, 500), warm = 5;
	ctx->unit = "ns";
	item_method(ctx, "Times fork(), execv() and waitpid() of the tools the netns_script item runs, with "
			 "arguments that do no namespace or device work (series ip_version: ip -V; sysctl_read: "
			 "sysctl -n kernel.ostype), and of true (series true, the baseline), stdin/stdout/stderr on "
			 "/dev/null, one process at a time, the three interleaved in each round; top level = ip_version.");
	jv_set(ctx->params, "rounds", jv_int(rounds));
	jv_set(ctx->params, "warmup_rounds", jv_int(warm));
	if (!tru || !ip || !sysctl) {
		item_skip(ctx, "%s not found in /usr/sbin, /sbin, /usr/bin, /bin, /usr/local/{s,}bin (apt-get install "
			       "iproute2 procps coreutils)",
			  !ip ? "ip" : !sysctl ? "sysctl" : "true");
		return;
	}
	struct {
		const char *label;
		char *argv[4];
		sampleset s;
	} tools[] = {
		{"true", {(char *)tru, NULL, NULL, NULL}, {0}},
		{"ip_version", {(char *)ip, "-V", NULL, NULL}, {0}},
		{"sysctl_read", {(char *)sysctl, "-n", "kernel.ostype", NULL}, {0}},
	};
	jv *progs = jv_set(ctx->params, "commands", jv_obj());
	for (size_t t = 0; t < ARRAY_LEN(tools); t++) {
		ss_init(&tools[t].s);
		jv *a = jv_set(progs, tools[t].label, jv_arr());
		for (char *const *p = tools[t].argv; *p; p++)
			jv_push(a, jv_str(*p));
	}
	for (long r = 0; r < rounds + warm; r++) {
		for (size_t t = 0; t < ARRAY_LEN(tools); t++) {
			int64_t ns = 0;
			int rc = run_cmd(tools[t].argv, &ns);
			if (rc != 0) {
				item_fail(ctx, "%s exited abnormally (%s %d)", tools[t].argv[0], rc < 0 ? "error" : "status",
					  rc < 0 ? -rc : rc);
				goto out;
			}
			if (r >= warm)
				ss_add(&tools[t].s, (double)ns);
		}
	}
	for (size_t i = 0; i < tools[1].s.n; i++)
		ss_add(&ctx->samples, tools[1].s.v[i]);
	for (size_t t = 0; t < ARRAY_LEN(tools); t++) {
		jv *e = item_series_add(ctx, tools[t].label, &tools[t].s, "ns");
		jv *a = jv_set(jv_get(e, "params"), "command", jv_arr());
		for (char *const *p = tools[t].argv; *p; p++)
			jv_push(a, jv_str(*p));
	}
out:
	for (size_t t = 0; t < ARRAY_LEN(tools); t++)
		ss_free(&tools[t].s);
}

/* ------------------------------------------------- pi_futex_uncontended */

struct sleeper {
	int pipe_rd;
	atomic_int tid;
};

/* The owner of the trylock_owned word: alive and asleep in read() until told to go. */
static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	atomic_store(&s->tid, (int)syscall(SYS_gettid));
	char c;
	while (read(s->pipe_rd, &c, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

void item_pi_futex_uncontended(item_ctx *ctx)
{
	long batch = 100, batches = plan(ctx, 200, 2000);
	ctx->unit = "ns";
	item_method(ctx, "One thread pinned to cpu A times batches of %ld FUTEX_LOCK_PI_PRIVATE + "
			 "FUTEX_UNLOCK_PI_PRIVATE pairs issued as system calls (no user-space cmpxchg) on a word "
			 "nobody else owns or waits on; sample = ns per pair (top level, series lock_unlock_pair). "
			 "Series syscall_baseline: batches of getppid() through syscall() in the same item, ns per "
			 "call; trylock_owned: batches of FUTEX_TRYLOCK_PI_PRIVATE on a word owned by another live "
			 "thread asleep in read() (fails with EWOULDBLOCK; the word is reset to the owner's TID "
			 "after each call), ns per call. The three are interleaved batch by batch.",
		    batch);
	jv_set(ctx->params, "batch_calls", jv_int(batch));
	jv_set(ctx->params, "batches", jv_int(batches));
	jv_set(ctx->params, "cpu", jv_int(ctx->opt->cpus[0]));

	static _Alignas(64) atomic_int word;
	static _Alignas(64) atomic_int owned;
	int tid = (int)syscall(SYS_gettid);
	atomic_store(&word, 0);
	if (sys_futex(&word, FUTEX_LOCK_PI_PRIVATE, 0) != 0) {
		if (errno == ENOSYS)
			item_skip(ctx, "FUTEX_LOCK_PI: the kernel has no PI futexes (CONFIG_FUTEX_PI)");
		else
			item_fail(ctx, "FUTEX_LOCK_PI: %s", strerror(errno));
		return;
	}
	if (atomic_load(&word) != tid || sys_futex(&word, FUTEX_UNLOCK_PI_PRIVATE, 0) != 0 || atomic_load(&word) != 0) {
		item_fail(ctx, "FUTEX_LOCK_PI / FUTEX_UNLOCK_PI did not leave the word as expected (%d)",
			  atomic_load(&word));
		return;
	}

	int fds[2];
	if (pipe(fds) != 0) {
		item_fail(ctx, "pipe: %s", strerror(errno));
		return;
	}
	struct sleeper sl = {.pipe_rd = fds[0]};
	atomic_store(&sl.tid, 0);
	pthread_t th;
	if (spawn_thread(sleeper_main, &sl, &th) != 0) {
		item_fail(ctx, "pthread_create failed");
		close(fds[0]);
		close(fds[1]);
		return;
	}
	while (!atomic_load(&sl.tid))
		sched_yield();
	int owner = atomic_load(&sl.tid);
	atomic_store(&owned, owner);
	cpu_set_t saved;
	get_self_affinity(&saved);
	pin_self_to_cpu(ctx->opt->cpus[0]);

	sampleset base, tryl;
	ss_init(&base);
	ss_init(&tryl);
	for (long b = -10; b < batches; b++) { /* 10 warm-up batches */
		int64_t t0 = now_ns();
		for (long i = 0; i < batch; i++) {
			sys_futex(&word, FUTEX_LOCK_PI_PRIVATE, 0);
			sys_futex(&word, FUTEX_UNLOCK_PI_PRIVATE, 0);
		}
		int64_t t1 = now_ns();
		if (atomic_load(&word) != 0) {
			item_fail(ctx, "the futex word is %d after FUTEX_UNLOCK_PI", atomic_load(&word));
			goto out;
		}
		for (long i = 0; i < batch; i++)
			syscall(SYS_getppid);
		int64_t t2 = now_ns();
		long fails = 0;
		for (long i = 0; i < batch; i++) {
			if (sys_futex(&owned, FUTEX_TRYLOCK_PI_PRIVATE, 0) != 0 && (errno == EWOULDBLOCK || errno == EAGAIN))
				fails++;
			atomic_store_explicit(&owned, owner, memory_order_relaxed);
		}
		int64_t t3 = now_ns();
		if (fails != batch) {
			item_fail(ctx, "FUTEX_TRYLOCK_PI on an owned word did not fail with EWOULDBLOCK (%ld of %ld)", fails,
				  batch);
			goto out;
		}
		if (b < 0)
			continue;
		ss_add(&ctx->samples, (double)(t1 - t0) / (double)batch);
		ss_add(&base, (double)(t2 - t1) / (double)batch);
		ss_add(&tryl, (double)(t3 - t2) / (double)batch);
	}
	item_series_add(ctx, "lock_unlock_pair", &ctx->samples, "ns");
	item_series_add(ctx, "syscall_baseline", &base, "ns");
	item_series_add(ctx, "trylock_owned", &tryl, "ns");
out:
	pin_self_to_set(&saved);
	{
		char c = 0;
		if (write(fds[1], &c, 1) != 1)
			pthread_cancel(th);
		pthread_join(th, NULL);
	}
	close(fds[0]);
	close(fds[1]);
	ss_free(&base);
	ss_free(&tryl);
}
