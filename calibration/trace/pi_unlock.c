/* Side probe (not a collector item): what one FUTEX_UNLOCK_PI costs the owner when a waiter is
 * queued on the futex's rt-mutex, timed from user space around the system call.
 *
 * The owner takes the PI futex, lets the waiter call FUTEX_LOCK_PI, waits until the word shows
 * FUTEX_WAITERS, then (per series) unlocks:
 *   same_cpu        waiter on the owner's CPU as SCHED_IDLE (its wakeup preempts nobody, so the
 *                   timed call is the unlock and a local try_to_wake_up, nothing else);
 *   cross_sleeping  waiter on another CPU; the owner sleeps 1 ms first, so the waiter, which
 *                   spins only while the owner runs (rt_mutex_slowlock_block), has gone to sleep
 *                   and its CPU idles: the unlock wakes an idle CPU;
 *   cross_spinning  waiter on another CPU; the owner spins 20 us first, so the waiter is still
 *                   spinning on the running owner: a handoff with no wakeup.
 * Also the uncontended FUTEX_LOCK_PI + FUTEX_UNLOCK_PI pair and getppid(), as baselines.
 *
 * usage: pi_unlock SERIES ROUNDS OWNER_CPU WAITER_CPU
 * prints: series=S rounds=R p10_ns=A median_ns=B p90_ns=C pair_median_ns=D getppid_median_ns=E
 * Build: cc -O2 -Wall -Wextra -Werror -pthread pi_unlock.c -o pi_unlock (calibration.trace.probes does). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum series { SAME_CPU, CROSS_SLEEPING, CROSS_SPINNING };

static _Atomic uint32_t word;
static _Atomic long phase;
static _Atomic int failed;
static long rounds;
static int waiter_cpu;
static enum series kind;

static long futex_pi(int op)
{
	return syscall(SYS_futex, &word, op, 0, NULL, NULL, 0);
}

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int pin(int c)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(c, &s);
	return sched_setaffinity(0, sizeof s, &s);
}

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* Waits for the owner's turn number; gives up (and flags failure) if the owner failed. */
static int wait_phase(long want)
{
	while (atomic_load(&phase) != want) {
		if (atomic_load(&failed))
			return -1;
		sched_yield();
	}
	return 0;
}

static void *waiter(void *arg)
{
	(void)arg;
	struct sched_param sp = {0};
	if (pin(waiter_cpu) != 0 || (kind == SAME_CPU && sched_setscheduler(0, SCHED_IDLE, &sp) != 0)) {
		atomic_store(&failed, errno ? errno : EINVAL);
		return NULL;
	}
	for (long i = 0; i < rounds; i++) {
		if (wait_phase(2 * i + 1) != 0)
			return NULL;
		if (futex_pi(FUTEX_LOCK_PI_PRIVATE) != 0 || futex_pi(FUTEX_UNLOCK_PI_PRIVATE) != 0) {
			atomic_store(&failed, errno);
			return NULL;
		}
		atomic_store(&phase, 2 * i + 2);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: pi_unlock same_cpu|cross_sleeping|cross_spinning ROUNDS OWNER_CPU WAITER_CPU\n");
		return 2;
	}
	if (strcmp(argv[1], "same_cpu") == 0)
		kind = SAME_CPU;
	else if (strcmp(argv[1], "cross_sleeping") == 0)
		kind = CROSS_SLEEPING;
	else if (strcmp(argv[1], "cross_spinning") == 0)
		kind = CROSS_SPINNING;
	else {
		fprintf(stderr, "pi_unlock: unknown series %s\n", argv[1]);
		return 2;
	}
	rounds = atol(argv[2]);
	int owner_cpu = atoi(argv[3]);
	waiter_cpu = atoi(argv[4]);
	if (rounds < 10 || (kind == SAME_CPU) != (owner_cpu == waiter_cpu)) {
		fprintf(stderr, "pi_unlock: ROUNDS >= 10; same_cpu needs OWNER_CPU == WAITER_CPU, the others two CPUs\n");
		return 2;
	}
	if (pin(owner_cpu) != 0) {
		perror("pi_unlock: sched_setaffinity");
		return 1;
	}
	int64_t *unlock = calloc((size_t)rounds, sizeof *unlock), *pair = calloc((size_t)rounds, sizeof *pair),
		*base = calloc((size_t)rounds, sizeof *base);
	if (!unlock || !pair || !base) {
		fprintf(stderr, "pi_unlock: out of memory\n");
		return 1;
	}
	pthread_t w;
	if (pthread_create(&w, NULL, waiter, NULL) != 0) {
		fprintf(stderr, "pi_unlock: pthread_create failed\n");
		return 1;
	}
	for (long i = 0; i < rounds && !atomic_load(&failed); i++) {
		if (wait_phase(2 * i) != 0)
			break;
		int64_t a = now_ns();
		syscall(SYS_getppid);
		int64_t b = now_ns();
		if (futex_pi(FUTEX_LOCK_PI_PRIVATE) != 0 || futex_pi(FUTEX_UNLOCK_PI_PRIVATE) != 0) {
			atomic_store(&failed, errno);
			break;
		}
		int64_t c = now_ns();
		base[i] = b - a;
		pair[i] = c - b;
		if (futex_pi(FUTEX_LOCK_PI_PRIVATE) != 0) { /* the owner's hold for this round */
			atomic_store(&failed, errno);
			break;
		}
		atomic_store(&phase, 2 * i + 1);
		while (!(atomic_load(&word) & FUTEX_WAITERS)) {
			if (atomic_load(&failed))
				break;
			sched_yield(); /* on the same CPU this lets the waiter run and queue */
		}
		if (kind == CROSS_SLEEPING) {
			struct timespec ms = {0, 1000000};
			nanosleep(&ms, NULL);
		}
		if (kind != SAME_CPU) { /* spin 20 us: a cross_sleeping owner warms up again after its sleep */
			int64_t t = now_ns();
			while (now_ns() - t < 20000)
				;
		}
		int64_t t0 = now_ns();
		if (futex_pi(FUTEX_UNLOCK_PI_PRIVATE) != 0) {
			atomic_store(&failed, errno);
			break;
		}
		unlock[i] = now_ns() - t0;
	}
	int err = atomic_load(&failed);
	if (err)
		atomic_store(&phase, -1);
	pthread_join(w, NULL);
	if (err) {
		fprintf(stderr, "pi_unlock: %s\n", strerror(err));
		return 1;
	}
	qsort(unlock, (size_t)rounds, sizeof *unlock, cmp);
	qsort(pair, (size_t)rounds, sizeof *pair, cmp);
	qsort(base, (size_t)rounds, sizeof *base, cmp);
	printf("series=%s rounds=%ld p10_ns=%lld median_ns=%lld p90_ns=%lld pair_median_ns=%lld getppid_median_ns=%lld\n",
	       argv[1], rounds, (long long)unlock[rounds / 10], (long long)unlock[rounds / 2],
	       (long long)unlock[9 * rounds / 10], (long long)pair[rounds / 2],
	       (long long)base[rounds / 2]);
	return 0;
}
