/*
 * A tiny JSON document model and its single serializer.  Every byte of JSON
 * the collector emits goes through jv_write(): strings are escaped (control
 * characters, quotes, backslashes; invalid UTF-8 becomes U+FFFD), object keys
 * are unique, and non-finite numbers become null.
 */
#include "collector.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q) {
		fputs(COLLECTOR_NAME ": out of memory\n", stderr);
		abort();
	}
	return q;
}

static char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = xrealloc(NULL, n);
	memcpy(d, s, n);
	return d;
}

static jv *jv_new(jv_type t)
{
	jv *v = xrealloc(NULL, sizeof(*v));
	memset(v, 0, sizeof(*v));
	v->type = t;
	return v;
}

jv *jv_null(void) { return jv_new(JV_NULL); }

jv *jv_bool(int b)
{
	jv *v = jv_new(JV_BOOL);
	v->boolean = !!b;
	return v;
}

jv *jv_int(long long i)
{
	jv *v = jv_new(JV_INT);
	v->integer = i;
	return v;
}

jv *jv_num(double d)
{
	jv *v = jv_new(JV_NUM);
	v->number = d;
	return v;
}

jv *jv_str(const char *s)
{
	if (!s)
		return jv_null();
	jv *v = jv_new(JV_STR);
	v->string = xstrdup(s);
	return v;
}

jv *jv_strf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return jv_null();
	char *buf = xrealloc(NULL, (size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(buf, (size_t)n + 1, fmt, ap);
	va_end(ap);
	jv *v = jv_new(JV_STR);
	v->string = buf;
	return v;
}

jv *jv_arr(void) { return jv_new(JV_ARR); }
jv *jv_obj(void) { return jv_new(JV_OBJ); }

static void grow(jv *c)
{
	if (c->len < c->cap)
		return;
	c->cap = c->cap ? c->cap * 2 : 8;
	c->items = xrealloc(c->items, c->cap * sizeof(*c->items));
	if (c->type == JV_OBJ)
		c->keys = xrealloc(c->keys, c->cap * sizeof(*c->keys));
}

jv *jv_push(jv *arr, jv *value)
{
	if (!arr || arr->type != JV_ARR) {
		jv_free(value);
		return NULL;
	}
	grow(arr);
	arr->items[arr->len++] = value;
	return value;
}

jv *jv_set(jv *obj, const char *key, jv *value)
{
	if (!obj || obj->type != JV_OBJ) {
		jv_free(value);
		return NULL;
	}
	for (size_t i = 0; i < obj->len; i++) {
		if (strcmp(obj->keys[i], key) == 0) {
			jv_free(obj->items[i]);
			obj->items[i] = value;
			return value;
		}
	}
	grow(obj);
	obj->keys[obj->len] = xstrdup(key);
	obj->items[obj->len++] = value;
	return value;
}

jv *jv_get(const jv *obj, const char *key)
{
	if (!obj || obj->type != JV_OBJ)
		return NULL;
	for (size_t i = 0; i < obj->len; i++)
		if (strcmp(obj->keys[i], key) == 0)
			return obj->items[i];
	return NULL;
}

void jv_free(jv *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->len; i++) {
		jv_free(v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->string);
	free(v);
}

/* Length of a valid UTF-8 sequence at s (1..4), or 0 when invalid. */
static int utf8_len(const unsigned char *s)
{
	unsigned c = s[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		return (s[1] & 0xC0) == 0x80 ? 2 : 0;
	if (c >= 0xE0 && c <= 0xEF) {
		if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
			return 0;
		if (c == 0xE0 && s[1] < 0xA0)
			return 0; /* overlong */
		if (c == 0xED && s[1] > 0x9F)
			return 0; /* surrogate */
		return 3;
	}
	if (c >= 0xF0 && c <= 0xF4) {
		if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
			return 0;
		if (c == 0xF0 && s[1] < 0x90)
			return 0;
		if (c == 0xF4 && s[1] > 0x8F)
			return 0;
		return 4;
	}
	return 0;
}

static void write_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	fputc('"', f);
	while (*s) {
		unsigned c = *s;
		switch (c) {
		case '"': fputs("\\\"", f); s++; continue;
		case '\\': fputs("\\\\", f); s++; continue;
		case '\n': fputs("\\n", f); s++; continue;
		case '\r': fputs("\\r", f); s++; continue;
		case '\t': fputs("\\t", f); s++; continue;
		case '\b': fputs("\\b", f); s++; continue;
		case '\f': fputs("\\f", f); s++; continue;
		default: break;
		}
		if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			s++;
			continue;
		}
		int n = utf8_len(s);
		if (n == 0) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		fwrite(s, 1, (size_t)n, f);
		s += n;
	}
	fputc('"', f);
}

static void write_number(FILE *f, double d)
{
	if (!isfinite(d)) {
		fputs("null", f);
		return;
	}
	if (d == 0.0) {
		fputs("0", f); /* also folds -0 */
		return;
	}
	char buf[64];
	snprintf(buf, sizeof(buf), "%.12g", d);
	fputs(buf, f);
}

static int is_scalar(const jv *v) { return v->type != JV_ARR && v->type != JV_OBJ; }

static void indent(FILE *f, int depth)
{
	fputc('\n', f);
	for (int i = 0; i < depth; i++)
		fputs("  ", f);
}

static void write_value(FILE *f, const jv *v, int depth)
{
	switch (v->type) {
	case JV_NULL: fputs("null", f); break;
	case JV_BOOL: fputs(v->boolean ? "true" : "false", f); break;
	case JV_INT: fprintf(f, "%lld", v->integer); break;
	case JV_NUM: write_number(f, v->number); break;
	case JV_STR: write_string(f, v->string); break;
	case JV_ARR: {
		int flat = 1;
		for (size_t i = 0; i < v->len; i++)
			if (!is_scalar(v->items[i]) &&
			    !(v->items[i]->type == JV_ARR && v->items[i]->len <= 4))
				flat = 0;
		fputc('[', f);
		for (size_t i = 0; i < v->len; i++) {
			if (i)
				fputs(flat ? ", " : ",", f);
			if (!flat)
				indent(f, depth + 1);
			write_value(f, v->items[i], depth + 1);
		}
		if (!flat && v->len)
			indent(f, depth);
		fputc(']', f);
		break;
	}
	case JV_OBJ:
		fputc('{', f);
		for (size_t i = 0; i < v->len; i++) {
			if (i)
				fputc(',', f);
			indent(f, depth + 1);
			write_string(f, v->keys[i]);
			fputs(": ", f);
			write_value(f, v->items[i], depth + 1);
		}
		if (v->len)
			indent(f, depth);
		fputc('}', f);
		break;
	}
}

int jv_write(FILE *f, const jv *v)
{
	write_value(f, v, 0);
	fputc('\n', f);
	return ferror(f) ? -1 : 0;
}
