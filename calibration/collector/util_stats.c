/*
 * Sample sets and their statistics: count, min, max, mean, stddev, median,
 * p90, p99 (linear interpolation between closest ranks, as numpy's default),
 * and a sparse log-scale histogram (4 buckets per power of two).
 */
#include "collector.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SS_MAX_KEEP 4000000 /* values kept for statistics */

void ss_init(sampleset *s) { memset(s, 0, sizeof(*s)); }

void ss_add(sampleset *s, double x)
{
	if (s->n >= SS_MAX_KEEP)
		return;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		double *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = x;
}

void ss_free(sampleset *s)
{
	free(s->v);
	ss_init(s);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double percentile(const double *sorted, size_t n, double p)
{
	double rank = p / 100.0 * (double)(n - 1);
	size_t lo = (size_t)floor(rank);
	size_t hi = lo + 1 < n ? lo + 1 : lo;
	double frac = rank - (double)lo;
	return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

jv *ss_stats_json(const sampleset *s)
{
	jv *o = jv_obj();
	jv_set(o, "count", jv_int((long long)s->n));
	if (s->n == 0) {
		const char *keys[] = {"min", "max", "mean", "stddev", "median", "p90", "p99"};
		for (size_t i = 0; i < ARRAY_LEN(keys); i++)
			jv_set(o, keys[i], jv_null());
		return o;
	}
	double *sorted = malloc(s->n * sizeof(*sorted));
	if (!sorted)
		return o;
	memcpy(sorted, s->v, s->n * sizeof(*sorted));
	qsort(sorted, s->n, sizeof(*sorted), cmp_double);
	double sum = 0;
	for (size_t i = 0; i < s->n; i++)
		sum += sorted[i];
	double mean = sum / (double)s->n;
	double var = 0;
	for (size_t i = 0; i < s->n; i++)
		var += (sorted[i] - mean) * (sorted[i] - mean);
	var = s->n > 1 ? var / (double)(s->n - 1) : 0.0;
	jv_set(o, "min", jv_num(sorted[0]));
	jv_set(o, "max", jv_num(sorted[s->n - 1]));
	jv_set(o, "mean", jv_num(mean));
	jv_set(o, "stddev", jv_num(sqrt(var)));
	jv_set(o, "median", jv_num(percentile(sorted, s->n, 50)));
	jv_set(o, "p90", jv_num(percentile(sorted, s->n, 90)));
	jv_set(o, "p99", jv_num(percentile(sorted, s->n, 99)));
	free(sorted);
	return o;
}

/* Bucket 0 is [0, 1); bucket k >= 1 is [2^e * (1 + q/4), 2^e * (1 + (q+1)/4))
 * with e = (k-1)/4 and q = (k-1)%4. */
static long bucket_of(double x)
{
	if (x < 1.0)
		return 0; /* [0, 1) */
	int e;
	double m = frexp(x, &e); /* x = m * 2^e, m in [0.5, 1) */
	int q = (int)((m * 2.0 - 1.0) * 4.0); /* 0..3 */
	if (q > 3)
		q = 3;
	return 1 + (long)(e - 1) * 4 + q;
}

static void bucket_bounds(long k, double *lo, double *hi)
{
	if (k == 0) {
		*lo = 0;
		*hi = 1;
		return;
	}
	long e = (k - 1) / 4, q = (k - 1) % 4;
	double base = ldexp(1.0, (int)e);
	*lo = base * (1.0 + (double)q / 4.0);
	*hi = base * (1.0 + (double)(q + 1) / 4.0);
}

static jv *histogram_json(const sampleset *s)
{
	enum { NB = 1 + 4 * 80 };
	static long counts[NB];
	memset(counts, 0, sizeof(counts));
	long underflow = 0, overflow = 0;
	for (size_t i = 0; i < s->n; i++) {
		double x = s->v[i];
		if (!(x >= 0)) {
			underflow++;
			continue;
		}
		long k = bucket_of(x);
		if (k >= NB)
			overflow++;
		else
			counts[k]++;
	}
	jv *h = jv_obj();
	jv_set(h, "scheme", jv_str("log2-quarter"));
	jv *b = jv_set(h, "buckets", jv_arr());
	for (long k = 0; k < NB; k++) {
		if (!counts[k])
			continue;
		double lo, hi;
		bucket_bounds(k, &lo, &hi);
		jv *t = jv_push(b, jv_arr());
		jv_push(t, jv_num(lo));
		jv_push(t, jv_num(hi));
		jv_push(t, jv_int(counts[k]));
	}
	jv_set(h, "underflow", jv_int(underflow));
	jv_set(h, "overflow", jv_int(overflow));
	return h;
}

void ss_to_json(const sampleset *s, jv *obj, size_t max_emit)
{
	jv_set(obj, "samples_total", jv_int((long long)s->n));
	jv *arr = jv_set(obj, "samples", jv_arr());
	if (s->n <= max_emit) {
		for (size_t i = 0; i < s->n; i++)
			jv_push(arr, jv_num(s->v[i]));
	} else {
		/* stratified subsample, in measurement order: one sample from each of max_emit equal
		 * slices, at a pseudo-random position (fixed seed) so that it cannot alias with a
		 * periodic structure of the measurement (e.g. the first call of every batch) */
		uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)s->n;
		for (size_t i = 0; i < max_emit; i++) {
			size_t lo = (size_t)((double)i * (double)s->n / (double)max_emit);
			size_t hi = (size_t)((double)(i + 1) * (double)s->n / (double)max_emit);
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t k = hi > lo ? lo + (size_t)(x % (uint64_t)(hi - lo)) : lo;
			jv_push(arr, jv_num(s->v[k]));
		}
	}
	jv_set(obj, "stats", ss_stats_json(s));
	jv_set(obj, "histogram", histogram_json(s));
}
