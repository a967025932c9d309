/* Items: syscall, fork_exec, timerfd_arm_cancel, sleep_lateness. */
#include "collector.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void item_syscall(item_ctx *ctx)
{
	long batch = 1000, batches = plan(ctx, 200, 2000);
	ctx->unit = "ns";
	item_method(ctx, "Times batches of %ld getppid() calls made through syscall(SYS_getppid) "
			 "with CLOCK_MONOTONIC and reports the mean cost of one call per batch.", batch);
	jv_set(ctx->params, "syscall", jv_str("getppid"));
	jv_set(ctx->params, "batch_calls", jv_int(batch));
	jv_set(ctx->params, "batches", jv_int(batches));
	for (long i = 0; i < 10000; i++) /* warm caches and the branch predictors */
		syscall(SYS_getppid);
	for (long b = 0; b < batches; b++) {
		int64_t t0 = now_ns();
		for (long i = 0; i < batch; i++)
			syscall(SYS_getppid);
		int64_t t1 = now_ns();
		ss_add(&ctx->samples, (double)(t1 - t0) / (double)batch);
	}
}

void item_fork_exec(item_ctx *ctx)
{
	const char *candidates[] = {"/bin/true", "/usr/bin/true"};
	const char *path = NULL;
	for (size_t i = 0; i < ARRAY_LEN(candidates) && !path; i++)
		if (access(candidates[i], X_OK) == 0)
			path = candidates[i];
	ctx->unit = "ns";
	item_method(ctx, "Times fork(), execv() of %s in the child and waitpid() in the parent, "
			 "one at a time; the child also sets PR_SET_PDEATHSIG before exec (top level, series "
			 "fork_exec_wait). Series fork_exit_wait: the same with a child that calls _exit(0) at once; "
			 "fork_call: the duration of the fork() call in the parent in that case.",
		    path ? path : "/bin/true");
	if (!path) {
		item_skip(ctx, "neither /bin/true nor /usr/bin/true is executable");
		return;
	}
	long n = plan(ctx, 100, 1000), warm = 5;
	jv_set(ctx->params, "program", jv_str(path));
	jv_set(ctx->params, "count", jv_int(n));
	sampleset exit_wait, fork_call;
	ss_init(&exit_wait);
	ss_init(&fork_call);
	for (long i = 0; i < n + warm; i++) {
		for (int with_exec = 1; with_exec >= 0; with_exec--) {
			int64_t t0 = now_ns();
			pid_t pid = tracked_fork();
			if (pid < 0) {
				item_fail(ctx, "fork: %s", strerror(errno));
				goto out;
			}
			if (pid == 0) {
				if (!with_exec)
					_exit(0);
				char *const argv[] = {(char *)path, NULL};
				execv(path, argv);
				_exit(127);
			}
			int64_t tf = now_ns();
			int status;
			tracked_wait(pid, &status);
			int64_t t1 = now_ns();
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
				item_fail(ctx, "%s exited abnormally (status 0x%x)", with_exec ? path : "child", status);
				goto out;
			}
			if (i < warm)
				continue;
			if (with_exec) {
				ss_add(&ctx->samples, (double)(t1 - t0));
			} else {
				ss_add(&exit_wait, (double)(t1 - t0));
				ss_add(&fork_call, (double)(tf - t0));
			}
		}
	}
	item_series_add(ctx, "fork_exec_wait", &ctx->samples, "ns");
	item_series_add(ctx, "fork_exit_wait", &exit_wait, "ns");
	item_series_add(ctx, "fork_call", &fork_call, "ns");
out:
	ss_free(&exit_wait);
	ss_free(&fork_call);
}

void item_timerfd_arm_cancel(item_ctx *ctx)
{
	long batch = 100, batches = plan(ctx, 200, 2000);
	ctx->unit = "ns";
	item_method(ctx, "Times batches of %ld pairs of timerfd_settime() on a CLOCK_MONOTONIC timerfd: "
			 "arm 1 s ahead, then disarm with a zero it_value; reports ns per arm+cancel pair.",
		    batch);
	jv_set(ctx->params, "batch_pairs", jv_int(batch));
	jv_set(ctx->params, "batches", jv_int(batches));
	jv_set(ctx->params, "timeout_ns", jv_int(NS_PER_SEC));
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (fd < 0) {
		item_fail(ctx, "timerfd_create: %s", strerror(errno));
		return;
	}
	struct itimerspec arm = {.it_value = {.tv_sec = 1}}, disarm = {{0, 0}, {0, 0}};
	for (long i = 0; i < 1000; i++) {
		timerfd_settime(fd, 0, &arm, NULL);
		timerfd_settime(fd, 0, &disarm, NULL);
	}
	for (long b = 0; b < batches; b++) {
		int64_t t0 = now_ns();
		for (long i = 0; i < batch; i++) {
			if (timerfd_settime(fd, 0, &arm, NULL) != 0 || timerfd_settime(fd, 0, &disarm, NULL) != 0) {
				item_fail(ctx, "timerfd_settime: %s", strerror(errno));
				close(fd);
				return;
			}
		}
		int64_t t1 = now_ns();
		ss_add(&ctx->samples, (double)(t1 - t0) / (double)batch);
	}
	close(fd);
}

static int sleep_series(long req_ns, long count, sampleset *out)
{
	struct timespec req = {.tv_sec = req_ns / NS_PER_SEC, .tv_nsec = req_ns % NS_PER_SEC};
	for (long i = 0; i < count; i++) {
		int64_t t0 = now_ns();
		int rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL);
		int64_t t1 = now_ns();
		if (rc == EINTR) {
			i--;
			continue;
		}
		if (rc != 0)
			return rc;
		ss_add(out, (double)(t1 - t0 - req_ns));
	}
	return 0;
}

void item_sleep_lateness(item_ctx *ctx)
{
	ctx->unit = "ns";
	item_method(ctx, "Calls relative clock_nanosleep(CLOCK_MONOTONIC) for 1 ms and for 100 us and "
			 "records elapsed CLOCK_MONOTONIC time minus the request; top-level samples are the 1 ms case.");
	long slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	jv_set(ctx->params, "timer_slack_ns", slack >= 0 ? jv_int(slack) : jv_null());
	jv_set(ctx->params, "requested_ns", jv_int(NS_PER_MS));
	struct {
		const char *label;
		long req, count;
	} cases[] = {
		{"1ms", NS_PER_MS, plan(ctx, 100, 1000)},
		{"100us", 100 * NS_PER_US, plan(ctx, 300, 3000)},
	};
	for (size_t c = 0; c < ARRAY_LEN(cases); c++) {
		sampleset s;
		ss_init(&s);
		int rc = sleep_series(cases[c].req, cases[c].count, &s);
		if (rc != 0) {
			item_fail(ctx, "clock_nanosleep: %s", strerror(rc));
			ss_free(&s);
			return;
		}
		jv *e = item_series_add(ctx, cases[c].label, &s, "ns");
		jv_set(jv_get(e, "params"), "requested_ns", jv_int(cases[c].req));
		if (c == 0)
			for (size_t i = 0; i < s.n; i++)
				ss_add(&ctx->samples, s.v[i]);
		ss_free(&s);
	}
}
