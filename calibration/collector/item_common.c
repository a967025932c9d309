/* Helpers shared by the measurement items. */
#include "collector.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void set_reason(item_ctx *ctx, item_status st, const char *fmt, va_list ap)
{
	ctx->status = st;
	vsnprintf(ctx->reason, sizeof(ctx->reason), fmt, ap);
}

void item_skip(item_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_reason(ctx, ITEM_SKIPPED, fmt, ap);
	va_end(ap);
}

void item_fail(item_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_reason(ctx, ITEM_FAILED, fmt, ap);
	va_end(ap);
}

void item_method(item_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx->method, sizeof(ctx->method), fmt, ap);
	va_end(ap);
}

jv *item_series_add(item_ctx *ctx, const char *label, const sampleset *s, const char *unit)
{
	jv *series = jv_get(ctx->extra, "series");
	if (!series)
		series = jv_set(ctx->extra, "series", jv_arr());
	jv *e = jv_push(series, jv_obj());
	jv_set(e, "label", jv_str(label));
	jv_set(e, "unit", jv_str(unit ? unit : ctx->unit));
	jv_set(e, "params", jv_obj());
	ss_to_json(s, e, ctx->opt->max_samples);
	return e;
}

long membarrier_call(int cmd, unsigned flags)
{
	return syscall(__NR_membarrier, cmd, flags, 0);
}

/* ------------------------------------------------------------ spinners */
struct spinner {
	pthread_t thread;
	int cpu;
	int started;
	atomic_int *stop;
};

struct spinners {
	atomic_int stop;
	int n;
	struct spinner s[];
};

static void *spin_main(void *arg)
{
	struct spinner *sp = arg;
	pin_self_to_cpu(sp->cpu);
	/* user-mode spinning: the CPU is busy and never idle, but in a quiescent state */
	while (!atomic_load_explicit(sp->stop, memory_order_relaxed))
		;
	return NULL;
}

struct spinners *spinners_start(const int *cpus, int n)
{
	struct spinners *sp = calloc(1, sizeof(*sp) + (size_t)n * sizeof(struct spinner));
	if (!sp)
		return NULL;
	atomic_init(&sp->stop, 0);
	sp->n = n;
	for (int i = 0; i < n; i++) {
		sp->s[i].cpu = cpus[i];
		sp->s[i].stop = &sp->stop;
		sp->s[i].started = spawn_thread(spin_main, &sp->s[i], &sp->s[i].thread) == 0;
	}
	sleep_ns(20 * NS_PER_MS); /* let them reach their CPUs */
	return sp;
}

void spinners_stop(struct spinners *sp)
{
	if (!sp)
		return;
	atomic_store(&sp->stop, 1);
	for (int i = 0; i < sp->n; i++)
		if (sp->s[i].started)
			pthread_join(sp->s[i].thread, NULL);
	free(sp);
}

long sys_futex(atomic_int *uaddr, int op, int val)
{
	return syscall(SYS_futex, (int *)uaddr, op, val, NULL, NULL, 0);
}
