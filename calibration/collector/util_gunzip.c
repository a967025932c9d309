/*
 * A minimal gzip (RFC 1952) / DEFLATE (RFC 1951) decoder, so that
 * /proc/config.gz can be read with libc only.  It follows the structure of
 * Mark Adler's puff.c: canonical Huffman decoding one bit at a time, which is
 * slow but small and easy to check; config.gz is ~30 KB.  The CRC-32 and
 * length in the gzip trailer are verified.
 */
#include "collector.h"

#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#define MAXBITS 15
#define MAXLCODES 286
#define MAXDCODES 30
#define FIXLCODES 288
#define OUT_LIMIT (64u << 20)

struct state {
	const unsigned char *in;
	size_t inlen, incnt;
	unsigned bitbuf;
	int bitcnt;
	unsigned char *out;
	size_t outlen, outcap;
	jmp_buf fail;
	const char *why;
};

struct huffman {
	short count[MAXBITS + 1];
	short symbol[FIXLCODES];
};

static void fail(struct state *s, const char *why)
{
	s->why = why;
	longjmp(s->fail, 1);
}

static unsigned bits(struct state *s, int need)
{
	unsigned long val = s->bitbuf;
	while (s->bitcnt < need) {
		if (s->incnt >= s->inlen)
			fail(s, "truncated deflate stream");
		val |= (unsigned long)s->in[s->incnt++] << s->bitcnt;
		s->bitcnt += 8;
	}
	s->bitbuf = (unsigned)(val >> need);
	s->bitcnt -= need;
	return (unsigned)(val & ((1UL << need) - 1));
}

static void put(struct state *s, unsigned char c)
{
	if (s->outlen == s->outcap) {
		if (s->outcap >= OUT_LIMIT)
			fail(s, "output too large");
		size_t cap = s->outcap ? s->outcap * 2 : 65536;
		unsigned char *o = realloc(s->out, cap + 1);
		if (!o)
			fail(s, "out of memory");
		s->out = o;
		s->outcap = cap;
	}
	s->out[s->outlen++] = c;
}

static void stored(struct state *s)
{
	s->bitbuf = 0;
	s->bitcnt = 0;
	if (s->incnt + 4 > s->inlen)
		fail(s, "truncated stored block");
	unsigned len = s->in[s->incnt] | (s->in[s->incnt + 1] << 8);
	unsigned nlen = s->in[s->incnt + 2] | (s->in[s->incnt + 3] << 8);
	s->incnt += 4;
	if (len != (~nlen & 0xffff))
		fail(s, "bad stored block length");
	if (s->incnt + len > s->inlen)
		fail(s, "truncated stored block");
	while (len--)
		put(s, s->in[s->incnt++]);
}

static int decode(struct state *s, const struct huffman *h)
{
	int code = 0, first = 0, index = 0;
	for (int len = 1; len <= MAXBITS; len++) {
		code |= (int)bits(s, 1);
		int count = h->count[len];
		if (code - count < first)
			return h->symbol[index + (code - first)];
		index += count;
		first += count;
		first <<= 1;
		code <<= 1;
	}
	fail(s, "bad Huffman code");
	return -1;
}

/* Returns 0 for a complete code, > 0 incomplete, < 0 over-subscribed. */
static int construct(struct huffman *h, const short *length, int n)
{
	short offs[MAXBITS + 1];
	memset(h->count, 0, sizeof(h->count));
	for (int sym = 0; sym < n; sym++)
		h->count[length[sym]]++;
	if (h->count[0] == n)
		return 0;
	int left = 1;
	for (int len = 1; len <= MAXBITS; len++) {
		left <<= 1;
		left -= h->count[len];
		if (left < 0)
			return left;
	}
	offs[1] = 0;
	for (int len = 1; len < MAXBITS; len++)
		offs[len + 1] = (short)(offs[len] + h->count[len]);
	for (int sym = 0; sym < n; sym++)
		if (length[sym] != 0)
			h->symbol[offs[length[sym]]++] = (short)sym;
	return left;
}

static void codes(struct state *s, const struct huffman *lencode, const struct huffman *distcode)
{
	static const short lbase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
					35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
	static const short lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
				       3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
	static const short dbase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129,
					 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
					 6145, 8193, 12289, 16385, 24577};
	static const short dext[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
				       6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
	for (;;) {
		int symbol = decode(s, lencode);
		if (symbol < 256) {
			put(s, (unsigned char)symbol);
			continue;
		}
		if (symbol == 256)
			return;
		symbol -= 257;
		if (symbol >= 29)
			fail(s, "bad length symbol");
		unsigned len = (unsigned)lbase[symbol] + bits(s, lext[symbol]);
		symbol = decode(s, distcode);
		if (symbol < 0 || symbol >= 30)
			fail(s, "bad distance symbol");
		size_t dist = (size_t)dbase[symbol] + bits(s, dext[symbol]);
		if (dist > s->outlen)
			fail(s, "distance too far back");
		while (len--)
			put(s, s->out[s->outlen - dist]);
	}
}

static void fixed(struct state *s)
{
	struct huffman lencode, distcode;
	short lengths[FIXLCODES];
	int sym = 0;
	for (; sym < 144; sym++)
		lengths[sym] = 8;
	for (; sym < 256; sym++)
		lengths[sym] = 9;
	for (; sym < 280; sym++)
		lengths[sym] = 7;
	for (; sym < FIXLCODES; sym++)
		lengths[sym] = 8;
	construct(&lencode, lengths, FIXLCODES);
	for (sym = 0; sym < MAXDCODES; sym++)
		lengths[sym] = 5;
	construct(&distcode, lengths, MAXDCODES);
	codes(s, &lencode, &distcode);
}

static void dynamic(struct state *s)
{
	static const short order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
	short lengths[MAXLCODES + MAXDCODES];
	struct huffman lencode, distcode;
	int nlen = (int)bits(s, 5) + 257;
	int ndist = (int)bits(s, 5) + 1;
	int ncode = (int)bits(s, 4) + 4;
	if (nlen > MAXLCODES || ndist > MAXDCODES)
		fail(s, "bad code counts");
	int index;
	for (index = 0; index < ncode; index++)
		lengths[order[index]] = (short)bits(s, 3);
	for (; index < 19; index++)
		lengths[order[index]] = 0;
	if (construct(&lencode, lengths, 19) != 0)
		fail(s, "incomplete code-length code");
	index = 0;
	while (index < nlen + ndist) {
		int symbol = decode(s, &lencode);
		if (symbol < 16) {
			lengths[index++] = (short)symbol;
			continue;
		}
		short len = 0;
		if (symbol == 16) {
			if (index == 0)
				fail(s, "repeat with no previous length");
			len = lengths[index - 1];
			symbol = 3 + (int)bits(s, 2);
		} else if (symbol == 17) {
			symbol = 3 + (int)bits(s, 3);
		} else {
			symbol = 11 + (int)bits(s, 7);
		}
		if (index + symbol > nlen + ndist)
			fail(s, "too many lengths");
		while (symbol--)
			lengths[index++] = len;
	}
	if (lengths[256] == 0)
		fail(s, "no end-of-block code");
	int err = construct(&lencode, lengths, nlen);
	if (err < 0 || (err > 0 && nlen - lencode.count[0] != 1))
		fail(s, "bad literal/length code");
	err = construct(&distcode, lengths + nlen, ndist);
	if (err < 0 || (err > 0 && ndist - distcode.count[0] != 1))
		fail(s, "bad distance code");
	codes(s, &lencode, &distcode);
}

static unsigned long crc32_of(const unsigned char *p, size_t n)
{
	unsigned long crc = 0xffffffffUL;
	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320UL & (0UL - (crc & 1)));
	}
	return crc ^ 0xffffffffUL;
}

/* Decode one gzip member held in s->in; fails by longjmp. */
static char *inflate_member(struct state *s, size_t *outlen)
{
	const unsigned char *in = s->in;
	size_t inlen = s->inlen;
	if (inlen < 18 || in[0] != 0x1f || in[1] != 0x8b || in[2] != 8)
		fail(s, "not a gzip (deflate) file");
	unsigned flags = in[3];
	size_t pos = 10;
	if (flags & 4) { /* FEXTRA */
		if (pos + 2 > inlen)
			fail(s, "truncated header");
		pos += 2 + (in[pos] | ((size_t)in[pos + 1] << 8));
	}
	for (unsigned f = 8; f <= 16; f <<= 1) { /* FNAME, FCOMMENT */
		if (flags & f) {
			while (pos < inlen && in[pos])
				pos++;
			pos++;
		}
	}
	if (flags & 2) /* FHCRC */
		pos += 2;
	if (pos >= inlen)
		fail(s, "truncated header");
	s->incnt = pos;
	int last;
	do {
		last = (int)bits(s, 1);
		int type = (int)bits(s, 2);
		if (type == 0)
			stored(s);
		else if (type == 1)
			fixed(s);
		else if (type == 2)
			dynamic(s);
		else
			fail(s, "bad block type");
	} while (!last);
	if (s->incnt + 8 > inlen)
		fail(s, "truncated trailer");
	const unsigned char *t = in + s->incnt;
	unsigned long crc = t[0] | (t[1] << 8) | (t[2] << 16) | ((unsigned long)t[3] << 24);
	unsigned long isize = t[4] | (t[5] << 8) | (t[6] << 16) | ((unsigned long)t[7] << 24);
	if (isize != (s->outlen & 0xffffffffUL))
		fail(s, "length mismatch");
	if (crc != crc32_of(s->out, s->outlen))
		fail(s, "CRC mismatch");
	if (!s->out) { /* empty member */
		s->out = malloc(1);
		if (!s->out)
			fail(s, "out of memory");
	}
	s->out[s->outlen] = '\0';
	if (outlen)
		*outlen = s->outlen;
	return (char *)s->out;
}

char *gunzip_buffer(const unsigned char *in, size_t inlen, size_t *outlen, char *err, size_t errlen)
{
	/* on the heap, and the pointer is never reassigned: longjmp leaves nothing stale */
	struct state *const st = calloc(1, sizeof(*st));
	if (!st) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	st->in = in;
	st->inlen = inlen;
	if (setjmp(st->fail)) {
		snprintf(err, errlen, "%s", st->why);
		free(st->out);
		free(st);
		return NULL;
	}
	char *out = inflate_member(st, outlen);
	free(st);
	return out;
}
