/* Timing helpers: CLOCK_MONOTONIC nanoseconds and UTC timestamps. */
#include "collector.h"

#include <errno.h>
#include <time.h>

int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

double realtime_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void sleep_ns(int64_t ns)
{
	if (ns <= 0)
		return;
	struct timespec deadline;
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	int64_t t = (int64_t)deadline.tv_sec * NS_PER_SEC + deadline.tv_nsec + ns;
	deadline.tv_sec = t / NS_PER_SEC;
	deadline.tv_nsec = t % NS_PER_SEC;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR)
		;
}

void utc_iso8601(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
