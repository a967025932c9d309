/* Side probe (not a collector item): N members pinned to one CPU pass one byte round a ring of
 * pipes, as the collector's context_switch_process ring series do, for any N and either
 * scheduling policy, and report ns per hop with the voluntary and involuntary context switches
 * per hop (getrusage).  Under SCHED_BATCH a wakeup never preempts, so the ring then costs one
 * switch per hop; under SCHED_OTHER the waker may be preempted by the member it woke.
 *
 * usage: ring MEMBERS HOPS threads|processes other|batch CPU
 * prints: members=N mode=M policy=P ns_per_hop=X voluntary_per_hop=V involuntary_per_hop=I
 * Build: cc -O2 -Wall -Wextra -Werror -pthread ring.c -o ring (calibration.trace.probes does). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_MEMBERS 256

static int members, cpu;
static int rd[MAX_MEMBERS], wr[MAX_MEMBERS];

static int pin(void)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof s, &s);
}

/* Member i forwards every byte from its pipe to the next member's until end of stream. */
static void forward(int i)
{
	char c;
	for (;;) {
		ssize_t n = read(rd[i], &c, 1);
		if (n <= 0)
			break;
		if (write(wr[(i + 1) % members], &c, 1) != 1)
			break;
	}
	close(wr[(i + 1) % members]);
}

static void *member_thread(void *arg)
{
	if (pin() != 0)
		return NULL;
	forward((int)(long)arg);
	return NULL;
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int lap(long laps)
{
	char c = 'x';
	for (long l = 0; l < laps; l++)
		if (write(wr[1 % members], &c, 1) != 1 || read(rd[0], &c, 1) != 1)
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: ring MEMBERS HOPS threads|processes other|batch CPU\n");
		return 2;
	}
	members = atoi(argv[1]);
	long hops = atol(argv[2]);
	int procs = strcmp(argv[3], "processes") == 0, batch = strcmp(argv[4], "batch") == 0;
	cpu = atoi(argv[5]);
	if (members < 2 || members > MAX_MEMBERS || hops < members || (!procs && strcmp(argv[3], "threads")) ||
	    (!batch && strcmp(argv[4], "other"))) {
		fprintf(stderr, "ring: MEMBERS 2..%d, HOPS >= MEMBERS, threads|processes, other|batch\n", MAX_MEMBERS);
		return 2;
	}
	struct sched_param sp = {0};
	if (batch && sched_setscheduler(0, SCHED_BATCH, &sp) != 0) {
		perror("ring: SCHED_BATCH");
		return 1;
	}
	if (pin() != 0) {
		perror("ring: sched_setaffinity");
		return 1;
	}
	for (int i = 0; i < members; i++) {
		int fds[2];
		if (pipe(fds) != 0) {
			perror("ring: pipe");
			return 1;
		}
		rd[i] = fds[0];
		wr[i] = fds[1];
	}
	pid_t pids[MAX_MEMBERS] = {0};
	pthread_t tids[MAX_MEMBERS];
	for (int i = 1; i < members; i++) {
		if (procs) {
			pid_t pid = fork();
			if (pid < 0) {
				perror("ring: fork");
				for (int k = 1; k < i; k++)
					kill(pids[k], SIGKILL);
				return 1;
			}
			if (pid == 0) {
				for (int k = 0; k < members; k++) {
					if (k != i)
						close(rd[k]);
					if (k != (i + 1) % members)
						close(wr[k]);
				}
				forward(i);
				_exit(0);
			}
			pids[i] = pid;
		} else if (pthread_create(&tids[i], NULL, member_thread, (void *)(long)i) != 0) {
			fprintf(stderr, "ring: pthread_create failed\n");
			return 1;
		}
	}
	long laps = hops / members;
	struct rusage r0, r1, c1;
	int rc = lap(laps / 10 + 1); /* warm-up */
	getrusage(RUSAGE_SELF, &r0);
	double t0 = now_ns();
	if (rc == 0)
		rc = lap(laps);
	double t1 = now_ns();
	getrusage(RUSAGE_SELF, &r1);
	close(wr[1 % members]); /* end of stream travels round the ring */
	if (procs) {
		for (int i = 2; i < members; i++)
			close(wr[i]);
		close(wr[0]);
		for (int i = 1; i < members; i++)
			waitpid(pids[i], NULL, 0);
	} else {
		for (int i = 1; i < members; i++)
			pthread_join(tids[i], NULL);
	}
	if (rc != 0) {
		fprintf(stderr, "ring: the ring broke: %s\n", strerror(errno));
		return 1;
	}
	/* threads: RUSAGE_SELF counts every thread; processes: the members' own count comes from
	 * RUSAGE_CHILDREN, which covers the warm-up too, so it is scaled to the timed laps */
	double n = (double)laps * members, vol, inv;
	if (procs) {
		getrusage(RUSAGE_CHILDREN, &c1);
		double share = (double)laps / (double)(laps + laps / 10 + 1);
		vol = (double)(r1.ru_nvcsw - r0.ru_nvcsw) + (double)c1.ru_nvcsw * share;
		inv = (double)(r1.ru_nivcsw - r0.ru_nivcsw) + (double)c1.ru_nivcsw * share;
	} else {
		vol = (double)(r1.ru_nvcsw - r0.ru_nvcsw);
		inv = (double)(r1.ru_nivcsw - r0.ru_nivcsw);
	}
	printf("members=%d mode=%s policy=%s ns_per_hop=%.1f voluntary_per_hop=%.3f involuntary_per_hop=%.3f\n", members,
	       argv[3], argv[4], (t1 - t0) / n, vol / n, inv / n);
	return 0;
}
