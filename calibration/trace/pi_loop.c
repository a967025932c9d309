/*
 * pi_loop: N threads (default 2), pinned round-robin to the allowed CPUs, contend one
 * PI futex the way the collector's pi_futex_handoff item does (cmpxchg 0 -> TID, else
 * FUTEX_LOCK_PI; a critical section of 100 increments; cmpxchg TID -> 0, else
 * FUTEX_UNLOCK_PI), for a given time. It prints its thread ids and the rate, so a
 * scheduler trace taken around it (calibration/trace/pi_trace.py) can pick its threads.
 *
 * usage: pi_loop [seconds [threads]]
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXT 16

static _Alignas(64) atomic_int word;
static _Alignas(64) atomic_int stop_flag;
static _Alignas(64) atomic_int go;
static _Alignas(64) volatile long counter;
static long ops[MAXT];
static int tids[MAXT];
static int cpus[1024], ncpus;

static long futex_pi(int op)
{
	return syscall(SYS_futex, (int *)&word, op, 0, NULL, NULL, 0);
}

static void *worker(void *arg)
{
	int i = (int)(long)arg;
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpus[i % ncpus], &s);
	if (sched_setaffinity(0, sizeof s, &s) != 0) {
		perror("sched_setaffinity");
		exit(1);
	}
	int tid = (int)syscall(SYS_gettid);
	tids[i] = tid;
	while (!atomic_load(&go))
		;
	while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
		int zero = 0;
		if (!atomic_compare_exchange_strong(&word, &zero, tid))
			while (futex_pi(FUTEX_LOCK_PI_PRIVATE) != 0)
				if (errno != EINTR && errno != EAGAIN) {
					perror("FUTEX_LOCK_PI");
					exit(1);
				}
		for (int j = 0; j < 100; j++)
			counter++;
		int mine = tid;
		if (!atomic_compare_exchange_strong(&word, &mine, 0) && futex_pi(FUTEX_UNLOCK_PI_PRIVATE) != 0) {
			perror("FUTEX_UNLOCK_PI");
			exit(1);
		}
		ops[i]++;
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0;
	int n = argc > 2 ? atoi(argv[2]) : 2;
	if (secs <= 0 || n < 2 || n > MAXT) {
		fprintf(stderr, "usage: pi_loop [seconds > 0 [threads 2..%d]]\n", MAXT);
		return 2;
	}
	cpu_set_t s;
	sched_getaffinity(0, sizeof s, &s);
	for (int c = 0; c < CPU_SETSIZE && ncpus < 1024; c++)
		if (CPU_ISSET(c, &s))
			cpus[ncpus++] = c;
	pthread_t th[MAXT];
	for (long i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i) != 0) {
			perror("pthread_create");
			return 1;
		}
	usleep(100000);
	double t0 = now_s();
	atomic_store(&go, 1);
	usleep((useconds_t)(secs * 1e6));
	atomic_store(&stop_flag, 1);
	double t1 = now_s();
	long total = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		total += ops[i];
	}
	printf("tids");
	for (int i = 0; i < n; i++)
		printf(" %d", tids[i]);
	printf("\nops %ld rate %.0f\n", total, (double)total / (t1 - t0));
	return 0;
}
