/* CPU affinity helpers. */
#include "collector.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int get_self_affinity(cpu_set_t *set)
{
	CPU_ZERO(set);
	return pthread_getaffinity_np(pthread_self(), sizeof(*set), set) ? -1 : 0;
}

int cpus_allowed(int *cpus, int max)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -errno;
	int n = 0;
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

int pin_self_to_set(const cpu_set_t *set)
{
	int rc = pthread_setaffinity_np(pthread_self(), sizeof(*set), set);
	return rc ? -rc : 0;
}

int pin_self_to_cpu(int cpu)
{
	if (cpu < 0 || cpu >= CPU_SETSIZE)
		return -EINVAL;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pin_self_to_set(&set);
}

int parse_cpu_list(const char *s, int *cpus, int max)
{
	int n = 0;
	while (s && *s && n < max) {
		char *end;
		long a = strtol(s, &end, 10);
		if (end == s)
			break;
		long b = a;
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			s = end;
		}
		for (long c = a; c <= b && n < max; c++)
			cpus[n++] = (int)c;
		if (*s == ',')
			s++;
		else
			break;
	}
	return n;
}
