/*
 * loader._native: the compiled parts of the hot path (optional; loader/native.py is its door).
 *
 * Families of kernels over Arrow buffers, each with a numpy / pyarrow twin that gives the
 * same result (the tests hold them equal):
 *   encode_rows      a row's mutation bytes ("1a <len> <ListValue>") in one pass (loader/encode)
 *   list_cells       ARRAY cells from their elements, for encode_rows (loader/encode)
 *   take_binary      gather of binary rows by index (sort.py), on up to `threads` threads
 *   sort_int64_keys  a stable radix sort of INT64 keys (sort.py)
 *   encode_keys,     any key as order-preserving bytes, and a stable sort of such bytes
 *   sort_binary      (sort.py)
 *   plain_*          fast parses of plain INT64, DATE, NUMERIC and Z-suffixed TIMESTAMP text
 *                    (loader/convert); anything not plain returns None and takes the Arrow path
 *   has_either       a two-byte search (parse.py)
 *   quote_scan       quoting followed through a stream, for a stray quote (parse/quotes.py)
 *   base64_values, offset_timestamps, bool_values, json_checks, json_arrays, pg_arrays
 *                    BYTES base64 decoded, TIMESTAMP text with offsets made canonical, BOOL
 *                    words matched, JSON validated, flat JSON arrays and PostgreSQL's array
 *                    text split (loader/convert); what they do not vouch for takes the
 *                    reference path, as with plain_*
 *
 * loader/encode builds each row's bytes column by column with numpy and Arrow kernels. That is
 * columnar but it walks the data a dozen times (packing small pieces, compacting them, joining
 * them per row). encode_rows writes the same bytes in one pass over the Arrow buffers, into a
 * buffer sized by each type's longest cell. Without this module (no C compiler at install time,
 * a big-endian machine, or SPANNER_LOADER_NATIVE=0) the numpy paths run.
 *
 * Python hands over each column as a tuple (see loader/encode/__init__.py, _native_column):
 *     (kind, validity or None, data, offsets or None, offset, offset_width)
 * where validity/data/offsets are objects with the buffer protocol (pyarrow Buffers) and
 * offset is the Arrow array's element offset. Every buffer is checked against n before any
 * byte is read, so a malformed descriptor raises instead of reading out of bounds. The kinds
 * are the enum below, exported as the module's KINDS dict, which loader/native.py reads: that
 * enum is the one kind table.
 *
 * encode_rows(columns, n, tag, allocate) -> (offsets, data, offset_width)
 *     Row i is "<tag> <varint size> <cells>" at offsets[i] of data; offsets are int32, or
 *     int64 past 2 GiB of data (offset_width 8). allocate(nbytes) returns a writable buffer
 *     (loader/encode passes pyarrow.allocate_buffer, so the memory comes from Arrow's pool). The
 *     GIL is released while the rows are written. Each row's length goes before its cells, so
 *     its byte count is guessed from the row before and the cells moved over when wrong; the
 *     buffer's unused end is left alone (Arrow counts only the bytes the offsets reach).
 *
 * Portability: built against the stable ABI of CPython 3.11 (Py_LIMITED_API, one abi3 wheel per
 * platform) except on free-threaded builds, which have no stable ABI yet; declares that it needs
 * no GIL. Any C11 compiler: GCC/Clang builtins and 128-bit integers are used where present,
 * with portable fallbacks below. The byte tricks read Arrow's little-endian buffers as words,
 * so a big-endian machine does not build it (the #error below; setup.py marks the extension
 * optional, and the loader then runs its numpy paths).
 */
#define PY_SSIZE_T_CLEAN
#if !defined(Py_LIMITED_API) && !defined(SPANNER_LOADER_FULL_API)
#define Py_LIMITED_API 0x030B0000
#endif
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if !defined(_WIN32) && !defined(__STDC_NO_ATOMICS__)
#include <pthread.h>
#include <stdatomic.h>
#define HAVE_THREADS 1
#endif

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "loader._native reads little-endian words; this machine is big-endian (numpy path used)"
#endif
#elif !(defined(_M_X64) || defined(_M_IX86) || defined(_M_ARM64) || defined(__x86_64__) || \
        defined(__i386__) || defined(__aarch64__))
#error "loader._native cannot tell this machine's byte order (numpy path used)"
#endif

/* ---------------------------------------------------------------------------------------- */
/* Compiler portability: builtins and 128-bit integers, with fallbacks. */

#if defined(__GNUC__) || defined(__clang__)
#define CLZ64(x) __builtin_clzll(x)
#define PREFETCH(p) __builtin_prefetch(p)
#else
static inline int CLZ64(uint64_t x) { /* x != 0, as for __builtin_clzll */
    int n = 0;
    while (!(x & 0x8000000000000000ULL)) {
        x <<= 1;
        n++;
    }
    return n;
}
#define PREFETCH(p) ((void)(p))
#endif

#if defined(__SIZEOF_INT128__) && !defined(SPANNER_LOADER_NO_INT128)
typedef unsigned __int128 u128;
static inline u128 u128_make(uint64_t hi, uint64_t lo) { return ((u128)hi << 64) | lo; }
static inline uint64_t u128_hi(u128 v) { return (uint64_t)(v >> 64); }
static inline uint64_t u128_lo(u128 v) { return (uint64_t)v; }
static inline u128 u128_neg(u128 v) { return (u128)0 - v; }
static inline u128 u128_muladd(u128 v, uint64_t m, uint64_t a) { return v * m + a; }
static inline u128 u128_divmod(u128 v, uint64_t d, uint64_t *rem) {
    *rem = (uint64_t)(v % d);
    return v / d;
}
#else
typedef struct {
    uint64_t hi, lo;
} u128;
static inline u128 u128_make(uint64_t hi, uint64_t lo) {
    u128 v = {hi, lo};
    return v;
}
static inline uint64_t u128_hi(u128 v) { return v.hi; }
static inline uint64_t u128_lo(u128 v) { return v.lo; }
static inline u128 u128_neg(u128 v) {
    u128 r = {~v.hi + (v.lo == 0), ~v.lo + 1};
    return r;
}
/* v * m + a, modulo 2**128, from 32-bit halves */
static inline u128 u128_muladd(u128 v, uint64_t m, uint64_t a) {
    uint64_t a0 = v.lo & 0xffffffffu, a1 = v.lo >> 32, b0 = m & 0xffffffffu, b1 = m >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t mid = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
    u128 r;
    r.lo = (p00 & 0xffffffffu) | (mid << 32);
    r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32) + v.hi * m;
    r.lo += a;
    r.hi += r.lo < a;
    return r;
}
/* v / d and v % d by shift and subtract (the rare path: values past 2**64) */
static inline u128 u128_divmod(u128 v, uint64_t d, uint64_t *rem) {
    u128 q = {0, 0};
    uint64_t r = 0;
    for (int i = 127; i >= 0; i--) {
        uint64_t carry = r >> 63;
        uint64_t bit = i >= 64 ? (v.hi >> (i - 64)) & 1 : (v.lo >> i) & 1;
        r = (r << 1) | bit;
        if (carry || r >= d) {
            r -= d; /* the true remainder is below d < 2**64, so the wrap-around is exact */
            if (i >= 64)
                q.hi |= 1ULL << (i - 64);
            else
                q.lo |= 1ULL << i;
        }
    }
    *rem = r;
    return q;
}
#endif

enum {
    KIND_CELLS = 0,   /* binary: complete cells already encoded (BYTES, ARRAY) */
    KIND_STRING = 1,  /* binary payload sent as string_value (STRING, JSON, TIMESTAMP, text) */
    KIND_INT64 = 2,   /* int64 as decimal text */
    KIND_FLOAT64 = 3, /* double as number_value, non-finite values as text */
    KIND_FLOAT32 = 4, /* float widened to double */
    KIND_BOOL = 5,    /* bit-packed booleans */
    KIND_NUMERIC = 6, /* decimal128(38, 9) as plain decimal text */
    KIND_DATE = 7,    /* int32 days since 1970-01-01 as YYYY-MM-DD */
    KIND_BYTES = 8,   /* binary payload sent as base64 text (BYTES) */
};

#define DATE_MIN (-719162) /* 0001-01-01 */
#define DATE_MAX 2932896   /* 9999-12-31 */

typedef struct {
    int kind;
    Py_buffer validity, data, offsets;
    int has_validity, has_data, has_offsets;
    Py_ssize_t offset;
    int offset_width;
} Column;

static const char NULL_CELL[4] = {0x0a, 0x02, 0x08, 0x00};
static const char NAN_CELL[7] = {0x0a, 0x05, 0x1a, 0x03, 'N', 'a', 'N'};
static const char INF_CELL[12] = {0x0a, 0x0a, 0x1a, 0x08, 'I', 'n', 'f', 'i', 'n', 'i', 't', 'y'};
static const char NINF_CELL[13] = {0x0a, 0x0b, 0x1a, 0x09, '-', 'I', 'n',
                                   'f',  'i',  'n',  'i',  't',  'y'};

/* ---------------------------------------------------------------------------------------- */
/* Small helpers. */

static inline int varint_len(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline char *put_varint(char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (char)((v & 0x7f) | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

static inline int is_valid(const Column *c, Py_ssize_t i) {
    if (!c->has_validity) return 1;
    Py_ssize_t b = c->offset + i;
    return (((const uint8_t *)c->validity.buf)[b >> 3] >> (b & 7)) & 1;
}

static inline int64_t offset_at(const Column *c, Py_ssize_t i) {
    Py_ssize_t j = c->offset + i;
    if (c->offset_width == 8) {
        int64_t v;
        memcpy(&v, (const char *)c->offsets.buf + 8 * j, 8);
        return v;
    }
    int32_t v;
    memcpy(&v, (const char *)c->offsets.buf + 4 * j, 4);
    return v;
}

static const char DIGITS2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* The 8 decimal digits of x < 10**8, leading zeros included: four independent pairs. */
static inline void eight_digits_text(char *p, uint32_t x) {
    uint32_t hi = x / 10000, lo = x - hi * 10000;
    uint32_t a = hi / 100, b = hi - a * 100, c = lo / 100, d = lo - c * 100;
    memcpy(p, DIGITS2 + 2 * a, 2);
    memcpy(p + 2, DIGITS2 + 2 * b, 2);
    memcpy(p + 4, DIGITS2 + 2 * c, 2);
    memcpy(p + 6, DIGITS2 + 2 * d, 2);
}

/* Decimal digits of v, written backwards ending at end; returns the start. Past 8 digits the
 * low ones go 8 at a time, so a long number is not one chain of divisions by 100. */
static inline char *digits_u64(char *end, uint64_t v) {
    while (v >= 100000000) {
        uint64_t q = v / 100000000;
        end -= 8;
        eight_digits_text(end, (uint32_t)(v - q * 100000000));
        v = q;
    }
    while (v >= 100) {
        uint64_t q = v / 100;
        end -= 2;
        memcpy(end, DIGITS2 + 2 * (v - 100 * q), 2);
        v = q;
    }
    if (v >= 10) {
        end -= 2;
        memcpy(end, DIGITS2 + 2 * v, 2);
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

static const uint64_t POW10[20] = {1ULL,
                                   10ULL,
                                   100ULL,
                                   1000ULL,
                                   10000ULL,
                                   100000ULL,
                                   1000000ULL,
                                   10000000ULL,
                                   100000000ULL,
                                   1000000000ULL,
                                   10000000000ULL,
                                   100000000000ULL,
                                   1000000000000ULL,
                                   10000000000000ULL,
                                   100000000000000ULL,
                                   1000000000000000ULL,
                                   10000000000000000ULL,
                                   100000000000000000ULL,
                                   1000000000000000000ULL,
                                   10000000000000000000ULL};

static inline int count_digits_u64(uint64_t v) {
    /* floor(log10(w)) from the bit length (1233 / 4096 ~ log10(2)), then one correction; w = v | 1
     * has the digits of v and gives 0 one digit */
    uint64_t w = v | 1;
    int t = ((64 - CLZ64(w)) * 1233) >> 12;
    return t + (w >= POW10[t]);
}

static inline uint64_t int64_magnitude(int64_t v) {
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

/* A NUMERIC's plain text: at most '-' + 29 integer digits + '.' + 9 fraction digits. */
#define NUMERIC_TEXT_MAX 48
#define E9 1000000000ULL
#define E19 10000000000000000000ULL

/* A NUMERIC cell's sign, fraction (in billionths) and integer part. */
static inline void numeric_parts(const Column *c, Py_ssize_t i, int *neg, uint64_t *frac,
                                 u128 *ip) {
    const char *p = (const char *)c->data.buf + 16 * (c->offset + i);
    uint64_t lo, hi;
    memcpy(&lo, p, 8);
    memcpy(&hi, p + 8, 8);
    u128 v = u128_make(hi, lo);
    *neg = (int)(hi >> 63);
    if (*neg) v = u128_neg(v);
    if (u128_hi(v) == 0) { /* the usual case: 64-bit division is much cheaper */
        uint64_t m = u128_lo(v);
        *frac = m % E9;
        *ip = u128_make(0, m / E9);
    } else {
        *ip = u128_divmod(v, E9, frac);
    }
}

static int numeric_text(const Column *c, Py_ssize_t i, char *out) {
    int neg;
    uint64_t frac;
    u128 ip;
    numeric_parts(c, i, &neg, &frac, &ip);
    /* built backwards ending mid-buffer, so a fixed-size copy of the text stays inside it */
    char buf[2 * NUMERIC_TEXT_MAX];
    char *end = buf + NUMERIC_TEXT_MAX;
    char *s = end;
    int trim = 0; /* trailing fraction zeros, written and then left off the length */
    if (frac) {
        /* all nine digits at fixed places, no loop over them; the zeros are counted from the
         * text: the last eight digits as one word, '0' bytes at its top */
        s = end - 9;
        s[0] = (char)('0' + frac / 100000000);
        eight_digits_text(s + 1, (uint32_t)(frac % 100000000));
        uint64_t last8;
        memcpy(&last8, s + 1, 8);
        last8 ^= 0x3030303030303030ULL; /* little-endian: the last digit is the top byte */
        trim = last8 ? CLZ64(last8) >> 3 : 8;
        *--s = '.';
    }
    if (u128_hi(ip)) {
        uint64_t low;
        uint64_t high = u128_lo(u128_divmod(ip, E19, &low)); /* < 10**10 */
        char *t = digits_u64(s, low);
        while (s - t < 19) *--t = '0';
        s = digits_u64(t, high);
    } else {
        s = digits_u64(s, u128_lo(ip));
    }
    if (neg) *--s = '-';
    memcpy(out, s, NUMERIC_TEXT_MAX); /* out holds NUMERIC_TEXT_MAX bytes; the text is shorter */
    return (int)(end - trim - s);
}

static inline void civil_date(int64_t days, char *out) {
    int64_t z = days + 719468;
    int64_t era = z / 146097; /* z > 0 within DATE_MIN..DATE_MAX */
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    int64_t y = yoe + era * 400 + (m <= 2);
    out[0] = (char)('0' + y / 1000);
    out[1] = (char)('0' + y / 100 % 10);
    out[2] = (char)('0' + y / 10 % 10);
    out[3] = (char)('0' + y % 10);
    out[4] = '-';
    out[5] = (char)('0' + m / 10);
    out[6] = (char)('0' + m % 10);
    out[7] = '-';
    out[8] = (char)('0' + d / 10);
    out[9] = (char)('0' + d % 10);
}

/* ---------------------------------------------------------------------------------------- */
/* Sizes: the bytes of "0a <len> <Value>" for row i of column c. */

static inline double float_at(const Column *c, Py_ssize_t i) {
    if (c->kind == KIND_FLOAT32) {
        float f;
        memcpy(&f, (const char *)c->data.buf + 4 * (c->offset + i), 4);
        return (double)f;
    }
    double d;
    memcpy(&d, (const char *)c->data.buf + 8 * (c->offset + i), 8);
    return d;
}

static inline int64_t int64_at(const Column *c, Py_ssize_t i) {
    int64_t v;
    memcpy(&v, (const char *)c->data.buf + 8 * (c->offset + i), 8);
    return v;
}

static inline int32_t int32_at(const Column *c, Py_ssize_t i) {
    int32_t v;
    memcpy(&v, (const char *)c->data.buf + 4 * (c->offset + i), 4);
    return v;
}

/* The most bytes column c's cells of n rows can take (a cell's text is never longer than its
 * type allows); the rows are written into a buffer this size in one pass. */
static int64_t cell_bound(const Column *c, Py_ssize_t n) {
    switch (c->kind) {
    case KIND_CELLS:
        return offset_at(c, n) - offset_at(c, 0);
    case KIND_STRING: {
        /* 0a <varint> 1a <varint> payload: two varints of at most 5 bytes under 2**35 */
        int64_t payload = offset_at(c, n) - offset_at(c, 0);
        return payload + (payload < ((int64_t)1 << 35) ? 12 : 22) * (int64_t)n;
    }
    case KIND_INT64:
        return (4 + 20) * (int64_t)n;
    case KIND_FLOAT64:
    case KIND_FLOAT32:
        return (int64_t)sizeof NINF_CELL * n; /* the longest: "-Infinity" */
    case KIND_BOOL:
        return 4 * (int64_t)n;
    case KIND_NUMERIC:
        return (4 + NUMERIC_TEXT_MAX) * (int64_t)n;
    case KIND_DATE:
        return 14 * (int64_t)n;
    case KIND_BYTES: {
        /* base64 takes 4 bytes per 3, rounded up per row, then the same two varints as text */
        int64_t payload = offset_at(c, n) - offset_at(c, 0);
        int64_t heads = payload * 4 < ((int64_t)1 << 35) ? 12 : 22;
        return payload / 3 * 4 + (4 + heads) * (int64_t)n;
    }
    }
    return 0;
}

/* 0 when every DATE of c is in 0001-01-01 .. 9999-12-31 (or c is no DATE column). */
static int dates_out_of_range(const Column *c, Py_ssize_t n) {
    if (c->kind != KIND_DATE) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t d = int32_at(c, i);
        if ((d < DATE_MIN || d > DATE_MAX) && is_valid(c, i)) return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Writing: row i's cell of column c at p; returns the end.
 *
 * The output buffer has SLACK bytes past the last row, so short copies can move a fixed 16 or
 * 48 bytes (one or a few machine moves instead of a memcpy call); the bytes past the cell are
 * overwritten by the next cell or lie in the slack, which Arrow never sees. */
#define SLACK 64

static inline char *copy_payload(char *p, const char *src, int64_t len, const char *src_end) {
    if (len <= 16 && src_end - src >= 16)
        memcpy(p, src, 16);
    else
        memcpy(p, src, (size_t)len);
    return p + len;
}

static inline char *write_string_cell(char *p, const char *s, int64_t len, const char *s_end) {
    if (len < 126) { /* both lengths one byte */
        p[0] = 0x0a;
        p[1] = (char)(len + 2);
        p[2] = 0x1a;
        p[3] = (char)len;
        return copy_payload(p + 4, s, len, s_end);
    }
    int64_t value = 1 + varint_len((uint64_t)len) + len;
    *p++ = 0x0a;
    p = put_varint(p, (uint64_t)value);
    *p++ = 0x1a;
    p = put_varint(p, (uint64_t)len);
    memcpy(p, s, (size_t)len);
    return p + len;
}

static inline char *write_text_head(char *p, int len) {
    /* len < 126: both lengths are one byte */
    p[0] = 0x0a;
    p[1] = (char)(len + 2);
    p[2] = 0x1a;
    p[3] = (char)len;
    return p + 4;
}

/* BYTES: "0a <len> 1a <len> <standard base64 with padding>" of len raw bytes at s. */
static const char B64_ALPHABET[65] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static inline char *write_bytes_cell(char *p, const unsigned char *s, int64_t len) {
    int64_t text = (len + 2) / 3 * 4;
    if (text < 126) {
        p = write_text_head(p, (int)text);
    } else {
        *p++ = 0x0a;
        p = put_varint(p, (uint64_t)(1 + varint_len((uint64_t)text) + text));
        *p++ = 0x1a;
        p = put_varint(p, (uint64_t)text);
    }
    int64_t k = 0;
    for (; k + 3 <= len; k += 3, p += 4) {
        uint32_t v = (uint32_t)s[k] << 16 | (uint32_t)s[k + 1] << 8 | s[k + 2];
        p[0] = B64_ALPHABET[v >> 18];
        p[1] = B64_ALPHABET[(v >> 12) & 63];
        p[2] = B64_ALPHABET[(v >> 6) & 63];
        p[3] = B64_ALPHABET[v & 63];
    }
    if (k < len) {
        uint32_t v = (uint32_t)s[k] << 16 | (k + 1 < len ? (uint32_t)s[k + 1] << 8 : 0);
        p[0] = B64_ALPHABET[v >> 18];
        p[1] = B64_ALPHABET[(v >> 12) & 63];
        p[2] = k + 1 < len ? B64_ALPHABET[(v >> 6) & 63] : '=';
        p[3] = '=';
        p += 4;
    }
    return p;
}

static char *write_cell(const Column *c, Py_ssize_t i, char *p) {
    if (c->kind == KIND_CELLS) {
        int64_t a = offset_at(c, i), b = offset_at(c, i + 1);
        const char *data = c->data.buf;
        return copy_payload(p, data + a, b - a, data + c->data.len);
    }
    if (!is_valid(c, i)) {
        memcpy(p, NULL_CELL, 4);
        return p + 4;
    }
    switch (c->kind) {
    case KIND_STRING: {
        int64_t a = offset_at(c, i), b = offset_at(c, i + 1);
        const char *data = c->data.buf;
        return write_string_cell(p, data + a, b - a, data + c->data.len);
    }
    case KIND_INT64: {
        int64_t v = int64_at(c, i);
        uint64_t m = int64_magnitude(v);
        int len = count_digits_u64(m) + (v < 0);
        char *text = write_text_head(p, len);
        if (v < 0) text[0] = '-';
        digits_u64(text + len, m);
        return text + len;
    }
    case KIND_FLOAT64:
    case KIND_FLOAT32: {
        double v = float_at(c, i);
        if (v != v) {
            memcpy(p, NAN_CELL, sizeof NAN_CELL);
            return p + sizeof NAN_CELL;
        }
        if (v == (double)INFINITY) {
            memcpy(p, INF_CELL, sizeof INF_CELL);
            return p + sizeof INF_CELL;
        }
        if (v == -(double)INFINITY) {
            memcpy(p, NINF_CELL, sizeof NINF_CELL);
            return p + sizeof NINF_CELL;
        }
        p[0] = 0x0a;
        p[1] = 0x09;
        p[2] = 0x11;
        memcpy(p + 3, &v, 8); /* little-endian machines only, like loader/encode */
        return p + 11;
    }
    case KIND_BOOL: {
        Py_ssize_t b = c->offset + i;
        p[0] = 0x0a;
        p[1] = 0x02;
        p[2] = 0x20;
        p[3] = (char)((((const uint8_t *)c->data.buf)[b >> 3] >> (b & 7)) & 1);
        return p + 4;
    }
    case KIND_NUMERIC: {
        char text[NUMERIC_TEXT_MAX];
        int len = numeric_text(c, i, text);
        memcpy(write_text_head(p, len), text, NUMERIC_TEXT_MAX); /* len <= 40 */
        return p + 4 + len;
    }
    case KIND_DATE: {
        civil_date(int32_at(c, i), write_text_head(p, 10));
        return p + 14;
    }
    case KIND_BYTES: {
        int64_t a = offset_at(c, i), b = offset_at(c, i + 1);
        return write_bytes_cell(p, (const unsigned char *)c->data.buf + a, b - a);
    }
    }
    return p;
}

/* ---------------------------------------------------------------------------------------- */
/* Column descriptors from Python, with every buffer checked against n. */

static void release_columns(Column *cols, Py_ssize_t k) {
    for (Py_ssize_t j = 0; j < k; j++) {
        if (cols[j].has_validity) PyBuffer_Release(&cols[j].validity);
        if (cols[j].has_data) PyBuffer_Release(&cols[j].data);
        if (cols[j].has_offsets) PyBuffer_Release(&cols[j].offsets);
    }
    PyMem_Free(cols);
}

static int need(const Py_buffer *b, Py_ssize_t bytes, const char *what, Py_ssize_t j) {
    if (bytes < 0 || b->len < bytes) {
        PyErr_Format(PyExc_ValueError, "column %zd: %s buffer holds %zd bytes, %zd needed", j,
                     what, b->len, bytes);
        return -1;
    }
    return 0;
}

static int check_column(Column *c, Py_ssize_t n, Py_ssize_t j) {
    Py_ssize_t end = c->offset + n;
    int binary = c->kind == KIND_CELLS || c->kind == KIND_STRING || c->kind == KIND_BYTES;
    if (c->kind < KIND_CELLS || c->kind > KIND_BYTES) {
        PyErr_Format(PyExc_ValueError, "column %zd: unknown kind %d", j, c->kind);
        return -1;
    }
    if (c->offset < 0) {
        PyErr_Format(PyExc_ValueError, "column %zd: negative offset", j);
        return -1;
    }
    if (c->has_validity && need(&c->validity, (end + 7) / 8, "validity", j)) return -1;
    if (c->kind == KIND_CELLS && c->has_validity) {
        PyErr_Format(PyExc_ValueError, "column %zd: encoded cells cannot be NULL", j);
        return -1;
    }
    if (binary) {
        if (!c->has_offsets || (c->offset_width != 4 && c->offset_width != 8)) {
            PyErr_Format(PyExc_ValueError, "column %zd: binary column without offsets", j);
            return -1;
        }
        if (need(&c->offsets, (end + 1) * c->offset_width, "offsets", j)) return -1;
        int64_t prev = offset_at(c, 0);
        if (prev < 0) {
            PyErr_Format(PyExc_ValueError, "column %zd: negative offset", j);
            return -1;
        }
        for (Py_ssize_t i = 1; i <= n; i++) {
            int64_t cur = offset_at(c, i);
            if (cur < prev) {
                PyErr_Format(PyExc_ValueError, "column %zd: offsets decrease at %zd", j, i);
                return -1;
            }
            prev = cur;
        }
        return need(&c->data, (Py_ssize_t)prev, "data", j);
    }
    switch (c->kind) {
    case KIND_INT64:
    case KIND_FLOAT64:
        return need(&c->data, end * 8, "data", j);
    case KIND_FLOAT32:
    case KIND_DATE:
        return need(&c->data, end * 4, "data", j);
    case KIND_BOOL:
        return need(&c->data, (end + 7) / 8, "data", j);
    case KIND_NUMERIC:
        return need(&c->data, end * 16, "data", j);
    }
    return 0;
}

static int get_buffer(PyObject *obj, Py_buffer *view, int *flag) {
    if (obj == Py_None) return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) return -1;
    *flag = 1;
    return 0;
}

/* A new reference to seq's items as a tuple (the stable ABI has no PySequence_Fast macros). */
static PyObject *as_tuple(PyObject *seq, const char *message) {
    if (!PySequence_Check(seq)) {
        PyErr_SetString(PyExc_TypeError, message);
        return NULL;
    }
    return PySequence_Tuple(seq);
}

static Column *parse_columns(PyObject *seq, Py_ssize_t n, Py_ssize_t *k_out) {
    PyObject *fast = as_tuple(seq, "columns must be a sequence");
    if (!fast) return NULL;
    Py_ssize_t k = PyTuple_Size(fast);
    Column *cols = PyMem_Calloc(k ? (size_t)k : 1, sizeof(Column));
    if (!cols) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *validity, *data, *offsets;
        Column *c = &cols[j];
        if (!PyArg_ParseTuple(PyTuple_GetItem(fast, j), "iOOOni", &c->kind, &validity,
                              &data, &offsets, &c->offset, &c->offset_width) ||
            get_buffer(validity, &c->validity, &c->has_validity) ||
            get_buffer(data, &c->data, &c->has_data) ||
            get_buffer(offsets, &c->offsets, &c->has_offsets)) {
            release_columns(cols, j + 1);
            Py_DECREF(fast);
            return NULL;
        }
        if (!c->has_data) {
            PyErr_Format(PyExc_ValueError, "column %zd: no data buffer", j);
            release_columns(cols, j + 1);
            Py_DECREF(fast);
            return NULL;
        }
        if (check_column(c, n, j)) {
            release_columns(cols, j + 1);
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);
    *k_out = k;
    return cols;
}

static int writable_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t bytes, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE) < 0) return -1;
    if (view->len < bytes) {
        PyErr_Format(PyExc_ValueError, "%s buffer holds %zd bytes, %zd needed", what, view->len,
                     bytes);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* offsets[i] = v, as int32 or int64 (width 4 or 8). */
static inline void put_offset(void *offsets, int width, Py_ssize_t i, int64_t v) {
    if (width == 8) {
        memcpy((char *)offsets + 8 * i, &v, 8);
    } else {
        int32_t v32 = (int32_t)v;
        memcpy((char *)offsets + 4 * i, &v32, 4);
    }
}

/* allocate(nbytes) -> a writable buffer object of at least nbytes, and a view of it. */
static PyObject *allocate(PyObject *alloc, Py_ssize_t bytes, Py_buffer *view, const char *what) {
    PyObject *obj = PyObject_CallFunction(alloc, "n", bytes);
    if (!obj) return NULL;
    if (writable_buffer(obj, view, bytes, what)) {
        Py_DECREF(obj);
        return NULL;
    }
    return obj;
}

/* The offsets (int32, or int64 past 2 GiB) and data (with SLACK) of a binary array of count
 * elements and total bytes; -1 with an exception set. */
static int allocate_binary(PyObject *alloc, Py_ssize_t count, int64_t total, int *width,
                           PyObject **off_obj, Py_buffer *off, PyObject **data_obj,
                           Py_buffer *data) {
    *width = total > INT32_MAX ? 8 : 4;
    *off_obj = allocate(alloc, (count + 1) * *width, off, "offsets");
    if (!*off_obj) return -1;
    *data_obj = allocate(alloc, (Py_ssize_t)total + SLACK, data, "data");
    if (!*data_obj) {
        PyBuffer_Release(off);
        Py_CLEAR(*off_obj);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* The module's function. */

static PyObject *py_encode_rows(PyObject *self, PyObject *args) {
    PyObject *seq, *alloc;
    Py_ssize_t n, k = 0;
    int tag;
    (void)self;
    if (!PyArg_ParseTuple(args, "OniO", &seq, &n, &tag, &alloc)) return NULL;
    if (n < 0) return PyErr_Format(PyExc_ValueError, "negative row count");
    if (tag < 0 || tag > 0x7f) return PyErr_Format(PyExc_ValueError, "tag must be one byte");
    Column *cols = parse_columns(seq, n, &k);
    if (!cols) return NULL;
    PyObject *off_obj = NULL, *data_obj = NULL, *result = NULL;
    Py_buffer off, data;
    int have_off = 0, have_data = 0;

    /* The buffer: room for every row at its longest (cell_bound), written once. */
    int bad = -1;
    int64_t total = 0;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t j = 0; j < k && bad < 0; j++) {
        if (dates_out_of_range(&cols[j], n)) bad = (int)j;
        total += cell_bound(&cols[j], n);
    }
    Py_END_ALLOW_THREADS;
    if (bad >= 0) {
        PyErr_SetString(PyExc_ValueError, "DATE outside 0001-01-01 .. 9999-12-31");
        goto done;
    }
    total += (1 + 10) * (int64_t)n; /* each row's tag and length */

    int width;
    if (allocate_binary(alloc, n, total, &width, &off_obj, &off, &data_obj, &data)) goto done;
    have_off = have_data = 1;
    Py_BEGIN_ALLOW_THREADS;
    char *base = data.buf, *p = base;
    int guess = 1; /* bytes of the row's length: as the row before, moved over when not */
    for (Py_ssize_t i = 0; i < n; i++) {
        put_offset(off.buf, width, i, p - base);
        char *cells = p + 1 + guess, *q = cells;
        for (Py_ssize_t j = 0; j < k; j++) q = write_cell(&cols[j], i, q);
        uint64_t len = (uint64_t)(q - cells);
        int need = varint_len(len);
        if (need != guess) {
            memmove(p + 1 + need, cells, (size_t)len);
            guess = need;
        }
        *p = (char)tag;
        p = put_varint(p + 1, len) + len;
    }
    put_offset(off.buf, width, n, p - base);
    Py_END_ALLOW_THREADS;
    result = Py_BuildValue("(OOi)", off_obj, data_obj, width);

done:
    if (have_data) PyBuffer_Release(&data);
    if (have_off) PyBuffer_Release(&off);
    Py_XDECREF(data_obj);
    Py_XDECREF(off_obj);
    release_columns(cols, k);
    return result;
}

/* ---------------------------------------------------------------------------------------- */
/* Pieces on threads: a kernel's work cut into independent pieces, which the calling thread
 * (having released the GIL) and up to threads - 1 more take one at a time from a shared
 * counter until none is left; joined before returning. Each piece reads shared inputs and
 * writes only its own range of the output, so the result is the same however many threads
 * ran and whichever took a piece. Many pieces rather than one per thread, so a thread the
 * machine's other work holds up delays the call by one piece, not by its share. Where threads
 * cannot be made (no pthreads or C11 atomics, Windows, pthread_create failing) the calling
 * thread takes every piece. Callers pass the number of threads the load may use
 * (loader/native.py, threads()) and keep pieces above a size where the hand-out costs more
 * than it saves. */

#define THREADS_MAX 8
#define PIECES_MAX 256

typedef void (*piece_fn)(void *arg);

typedef struct {
    piece_fn fn;
    char *args;
    size_t size;
    Py_ssize_t pieces;
#ifdef HAVE_THREADS
    atomic_size_t next;
#else
    size_t next;
#endif
} PieceQueue;

static void work_pieces(PieceQueue *q) {
    for (;;) {
#ifdef HAVE_THREADS
        size_t i = atomic_fetch_add(&q->next, 1);
#else
        size_t i = q->next++;
#endif
        if (i >= (size_t)q->pieces) return;
        q->fn(q->args + i * q->size);
    }
}

#ifdef HAVE_THREADS
static void *piece_worker(void *q) {
    work_pieces(q);
    return NULL;
}
#endif

/* fn(args + i * size) for every i in [0, pieces), on up to `threads` threads */
static void run_pieces(piece_fn fn, void *args, size_t size, Py_ssize_t pieces, int threads) {
    PieceQueue q;
    q.fn = fn;
    q.args = args;
    q.size = size;
    q.pieces = pieces;
#ifdef HAVE_THREADS
    atomic_init(&q.next, 0);
    pthread_t ids[THREADS_MAX];
    int started = 0;
    if (threads > THREADS_MAX) threads = THREADS_MAX;
    for (int t = 1; t < threads && t < pieces; t++)
        if (pthread_create(&ids[started], NULL, piece_worker, &q) == 0) started++;
    work_pieces(&q);
    for (int t = 0; t < started; t++) pthread_join(ids[t], NULL);
#else
    (void)threads;
    q.next = 0;
    work_pieces(&q);
#endif
}

/* How many pieces `n` items make, each at least `min_piece` items (at most PIECES_MAX; 1 when
 * there is one thread, so a pinned load cuts nothing). */
static Py_ssize_t piece_count(int threads, Py_ssize_t n, Py_ssize_t min_piece) {
    if (threads <= 1 || min_piece < 1) return 1;
    Py_ssize_t fit = n / min_piece;
    return fit < 1 ? 1 : (fit < PIECES_MAX ? fit : PIECES_MAX);
}

/* ---------------------------------------------------------------------------------------- */
/* Key sort: indices that put rows in the order of their INT64 key columns, stable.
 *
 * Radix sort of (key, index) pairs, every pass a stable scatter, so rows with equal keys keep
 * their input order. Many rows: one pass on the highest 11-bit digit that differs between rows,
 * then each bucket, small enough to stay in cache, by 8-bit LSD passes (insertion when tiny).
 * Few rows: 11-bit LSD passes. Keys of several columns: the first column, then runs of equal
 * first keys by the others (insertion), or when runs are long, each column in turn from the last.
 * Each signed value is mapped to an unsigned one of the same order (sign bit flipped; all bits
 * flipped again for a DESC column). A digit that is the same for every row is skipped. */

#define RADIX_BITS 11
#define RADIX_SIZE (1 << RADIX_BITS)
#define RADIX_PASSES 6 /* ceil(64 / 11) */

typedef struct {
    Py_buffer data;
    Py_ssize_t offset;
    int desc;
} KeyColumn;

static inline uint64_t key_at(const KeyColumn *c, Py_ssize_t i) {
    int64_t v;
    memcpy(&v, (const char *)c->data.buf + 8 * (c->offset + i), 8);
    uint64_t u = (uint64_t)v ^ 0x8000000000000000ULL;
    return c->desc ? ~u : u;
}

/* One stable scatter of (key, index) pairs by the digit (key >> shift) & mask into to_keys /
 * to_idx; next[d] is where digit d's next pair goes. */
static inline void scatter_pairs(const uint64_t *keys, const uint64_t *idx, uint64_t *to_keys,
                                 uint64_t *to_idx, Py_ssize_t n, int shift, uint64_t mask,
                                 uint32_t *next) {
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t k = keys[i];
        uint32_t pos = next[(k >> shift) & mask]++;
        to_keys[pos] = k;
        to_idx[pos] = idx[i];
    }
}

static inline void swap_pairs(uint64_t **keys, uint64_t **idx, uint64_t **other_keys,
                              uint64_t **other_idx) {
    uint64_t *t = *keys;
    *keys = *other_keys;
    *other_keys = t;
    t = *idx;
    *idx = *other_idx;
    *other_idx = t;
}

/* keys/idx hold the rows in their current order; tmp_keys/tmp_idx are scratch of n entries.
 * Returns 1 when the result ended up in the scratch arrays. */
static int radix_sort_pairs(uint64_t *keys, uint64_t *idx, uint64_t *tmp_keys, uint64_t *tmp_idx,
                            Py_ssize_t n, uint32_t (*counts)[RADIX_SIZE]) {
    memset(counts, 0, sizeof(uint32_t) * RADIX_PASSES * RADIX_SIZE);
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t k = keys[i];
        for (int d = 0; d < RADIX_PASSES; d++) counts[d][(k >> (d * RADIX_BITS)) & (RADIX_SIZE - 1)]++;
    }
    int swapped = 0;
    for (int d = 0; d < RADIX_PASSES; d++) {
        uint32_t *count = counts[d];
        uint64_t first = (keys[0] >> (d * RADIX_BITS)) & (RADIX_SIZE - 1);
        if (count[first] == (uint32_t)n) continue; /* one digit value for every row */
        uint32_t sum = 0;
        for (int b = 0; b < RADIX_SIZE; b++) {
            uint32_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        scatter_pairs(keys, idx, tmp_keys, tmp_idx, n, d * RADIX_BITS, RADIX_SIZE - 1, count);
        swap_pairs(&keys, &idx, &tmp_keys, &tmp_idx);
        swapped ^= 1;
    }
    return swapped;
}

/* Bucket sizes under which a bucket of the top digit is sorted by insertion, and over which
 * the whole sort stays LSD (too few rows per bucket to pay for the bucket pass). */
#define SMALL_BUCKET 32
#define MSD_MIN_ROWS 65536

/* (keys, idx) of one bucket, all sharing the digits above bit `bits`, sorted by their low
 * `bits` bits with 8-bit LSD passes between the bucket's two halves; the result ends in
 * (keys, idx). Small buckets by insertion. Stable. */
static void sort_bucket(uint64_t *keys, uint64_t *idx, uint64_t *tk, uint64_t *ti, Py_ssize_t m,
                        int bits) {
    if (m <= SMALL_BUCKET) {
        for (Py_ssize_t i = 1; i < m; i++) {
            uint64_t k = keys[i], v = idx[i];
            Py_ssize_t j = i;
            while (j > 0 && keys[j - 1] > k) {
                keys[j] = keys[j - 1];
                idx[j] = idx[j - 1];
                j--;
            }
            keys[j] = k;
            idx[j] = v;
        }
        return;
    }
    int passes = (bits + 7) / 8;
    uint32_t count[8][256];
    memset(count, 0, sizeof(uint32_t) * 256 * (size_t)passes);
    for (Py_ssize_t i = 0; i < m; i++) {
        uint64_t k = keys[i];
        for (int d = 0; d < passes; d++) count[d][(k >> (8 * d)) & 255]++;
    }
    uint64_t *sk = keys, *si = idx, *dk = tk, *di = ti;
    for (int d = 0; d < passes; d++) {
        uint32_t *c = count[d];
        if (c[(sk[0] >> (8 * d)) & 255] == (uint32_t)m) continue;
        uint32_t sum = 0;
        for (int b = 0; b < 256; b++) {
            uint32_t x = c[b];
            c[b] = sum;
            sum += x;
        }
        scatter_pairs(sk, si, dk, di, m, 8 * d, 255, c);
        swap_pairs(&sk, &si, &dk, &di);
    }
    if (sk != keys) {
        memcpy(keys, sk, (size_t)m * 8);
        memcpy(idx, si, (size_t)m * 8);
    }
}

/* (keys, idx) sorted by key, stable, the result in (keys, idx); tmp_keys/tmp_idx are scratch
 * of n entries. Many rows: one scatter on the highest digit that differs between rows, so each
 * bucket then sorts in cache (sort_bucket); few rows: LSD over every digit. */
static void sort_pairs(uint64_t *keys, uint64_t *idx, uint64_t *tmp_keys, uint64_t *tmp_idx,
                       Py_ssize_t n, uint32_t (*counts)[RADIX_SIZE]) {
    if (n < MSD_MIN_ROWS) {
        if (radix_sort_pairs(keys, idx, tmp_keys, tmp_idx, n, counts)) {
            memcpy(keys, tmp_keys, (size_t)n * 8);
            memcpy(idx, tmp_idx, (size_t)n * 8);
        }
        return;
    }
    memset(counts, 0, sizeof(uint32_t) * RADIX_SIZE);
    int top = RADIX_PASSES - 1;
    int shift = top * RADIX_BITS;
    for (Py_ssize_t i = 0; i < n; i++) counts[0][keys[i] >> shift]++;
    /* the top digit has 64 - 55 = 9 bits; lower digits are found the same way when the top
     * one is the same for every row (small or sequential ids) */
    while (counts[0][(keys[0] >> shift) & (RADIX_SIZE - 1)] == (uint32_t)n) {
        if (top == 0) return; /* every key equal: the input order is the sorted order */
        top--;
        shift = top * RADIX_BITS;
        memset(counts, 0, sizeof(uint32_t) * RADIX_SIZE);
        for (Py_ssize_t i = 0; i < n; i++) counts[0][(keys[i] >> shift) & (RADIX_SIZE - 1)]++;
    }
    uint32_t *start = counts[1], *next = counts[0];
    uint32_t sum = 0;
    for (int b = 0; b < RADIX_SIZE; b++) {
        start[b] = sum;
        sum += next[b];
        next[b] = start[b];
    }
    scatter_pairs(keys, idx, tmp_keys, tmp_idx, n, shift, RADIX_SIZE - 1, next);
    /* each bucket sorted by the digits below `shift`, from the scratch back into keys/idx */
    for (int b = 0; b < RADIX_SIZE; b++) {
        Py_ssize_t lo = start[b], m = (Py_ssize_t)next[b] - lo;
        if (m <= 0) continue;
        if (shift == 0 || m == 1) {
            memcpy(keys + lo, tmp_keys + lo, (size_t)m * 8);
            memcpy(idx + lo, tmp_idx + lo, (size_t)m * 8);
            continue;
        }
        sort_bucket(tmp_keys + lo, tmp_idx + lo, keys + lo, idx + lo, m, shift);
        memcpy(keys + lo, tmp_keys + lo, (size_t)m * 8);
        memcpy(idx + lo, tmp_idx + lo, (size_t)m * 8);
    }
}

#define RUN_MAX 64
#define TAKE_AHEAD 8 /* rows a random-order read is fetched ahead (the takes, the gathers) */

/* Row a (second key column value sa) before row b (sb) in the order of key columns 1..k-1,
 * then input position (stable); *same set when every key column is equal. */
static inline int row_before(const KeyColumn *cols, Py_ssize_t k, uint64_t sa, uint64_t a,
                             uint64_t sb, uint64_t b) {
    if (sa != sb) return sa < sb;
    for (Py_ssize_t j = 2; j < k; j++) {
        uint64_t x = key_at(&cols[j], (Py_ssize_t)a), y = key_at(&cols[j], (Py_ssize_t)b);
        if (x != y) return x < y;
    }
    return a < b;
}

static inline int same_key(const KeyColumn *cols, Py_ssize_t k, uint64_t a, uint64_t b) {
    for (Py_ssize_t j = 2; j < k; j++)
        if (key_at(&cols[j], (Py_ssize_t)a) != key_at(&cols[j], (Py_ssize_t)b)) return 0;
    return 1;
}

/* keys/idx sorted by the first column (k >= 2): orders each run of equal first keys by the
 * other columns, the second column's values gathered once into `second` (scratch of n) in
 * that order so the runs sort in cache; clears *distinct when two rows have the same key.
 * 0 (idx left in first-column order) when a run is longer than RUN_MAX. */
static int sort_runs(const KeyColumn *cols, Py_ssize_t k, const uint64_t *keys, uint64_t *idx,
                     uint64_t *second, Py_ssize_t n, int *distinct) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i + TAKE_AHEAD < n)
            PREFETCH((const char *)cols[1].data.buf +
                               8 * (cols[1].offset + (Py_ssize_t)idx[i + TAKE_AHEAD]));
        second[i] = key_at(&cols[1], (Py_ssize_t)idx[i]);
    }
    for (Py_ssize_t start = 0; start < n;) {
        Py_ssize_t end = start + 1;
        while (end < n && keys[end] == keys[start]) end++;
        if (end - start > RUN_MAX) return 0;
        for (Py_ssize_t i = start + 1; i < end; i++) {
            uint64_t s2 = second[i], v = idx[i];
            Py_ssize_t j = i;
            while (j > start && row_before(cols, k, s2, v, second[j - 1], idx[j - 1])) {
                second[j] = second[j - 1];
                idx[j] = idx[j - 1];
                j--;
            }
            second[j] = s2;
            idx[j] = v;
        }
        for (Py_ssize_t i = start + 1; i < end && *distinct; i++)
            if (second[i] == second[i - 1] && same_key(cols, k, idx[i], idx[i - 1])) *distinct = 0;
        start = end;
    }
    return 1;
}

static PyObject *py_sort_int64_keys(PyObject *self, PyObject *args) {
    PyObject *seq, *alloc, *result = NULL;
    Py_ssize_t n;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnO", &seq, &n, &alloc)) return NULL;
    if (n < 0 || (uint64_t)n >= 0xffffffffULL)
        return PyErr_Format(PyExc_ValueError, "row count out of range for the key sort");
    PyObject *fast = as_tuple(seq, "keys must be a sequence");
    if (!fast) return NULL;
    Py_ssize_t k = PyTuple_Size(fast), got = 0;
    KeyColumn *cols = PyMem_Calloc(k ? (size_t)k : 1, sizeof(KeyColumn));
    PyObject *out_obj = NULL, *scratch_obj = NULL;
    Py_buffer out, scratch;
    int have_out = 0, have_scratch = 0;
    uint32_t(*counts)[RADIX_SIZE] = NULL;
    int distinct = 0;
    if (!cols) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < k; got++) {
        PyObject *data;
        KeyColumn *c = &cols[got];
        if (!PyArg_ParseTuple(PyTuple_GetItem(fast, got), "Oni", &data, &c->offset,
                              &c->desc))
            goto done;
        if (PyObject_GetBuffer(data, &c->data, PyBUF_SIMPLE) < 0) goto done;
        if (c->offset < 0 || need(&c->data, (c->offset + n) * 8, "key", got)) {
            if (c->offset < 0) PyErr_Format(PyExc_ValueError, "key %zd: negative offset", got);
            PyBuffer_Release(&c->data);
            goto done;
        }
    }
    /* out: the indices (n uint64); scratch: keys, tmp keys, tmp indices (3n uint64). */
    out_obj = allocate(alloc, (n ? n : 1) * 8, &out, "indices");
    if (!out_obj) goto done;
    have_out = 1;
    scratch_obj = allocate(alloc, (n ? n : 1) * 24, &scratch, "scratch");
    if (!scratch_obj) goto done;
    have_scratch = 1;
    counts = PyMem_Malloc(sizeof(uint32_t) * RADIX_PASSES * RADIX_SIZE);
    if (!counts) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS;
    uint64_t *idx = out.buf;
    uint64_t *keys = scratch.buf, *tmp_keys = keys + n, *tmp_idx = keys + 2 * n;
    for (Py_ssize_t i = 0; i < n; i++) idx[i] = (uint64_t)i;
    /* The first column alone, then the runs of equal first keys put in order of the other
     * columns by insertion sort (ids: runs of a few rows); when a run is long, the full LSD
     * sort over all columns instead. */
    int done_by_runs = 0;
    distinct = k > 0 || n <= 1;
    if (n > 1 && k > 0) {
        for (Py_ssize_t i = 0; i < n; i++) keys[i] = key_at(&cols[0], i);
        sort_pairs(keys, idx, tmp_keys, tmp_idx, n, counts);
        for (Py_ssize_t i = 1; i < n && distinct; i++) distinct = keys[i] != keys[i - 1];
        /* distinct first keys: the other columns change nothing */
        done_by_runs = k == 1 || distinct;
        if (!done_by_runs) {
            distinct = 1;
            done_by_runs = sort_runs(cols, k, keys, idx, tmp_keys, n, &distinct);
        }
    }
    if (!done_by_runs) distinct = 0; /* not known: the caller searches */
    if (!done_by_runs)
        for (Py_ssize_t i = 0; i < n; i++) idx[i] = (uint64_t)i;
    for (Py_ssize_t j = k - 1; j >= 0 && n > 1 && !done_by_runs; j--) {
        const KeyColumn *c = &cols[j];
        for (Py_ssize_t i = 0; i < n; i++) keys[i] = key_at(c, (Py_ssize_t)idx[i]);
        sort_pairs(keys, idx, tmp_keys, tmp_idx, n, counts);
    }
    Py_END_ALLOW_THREADS;
    result = Py_BuildValue("(OO)", out_obj, distinct ? Py_True : Py_False);

done:
    PyMem_Free(counts);
    if (have_scratch) PyBuffer_Release(&scratch);
    if (have_out) PyBuffer_Release(&out);
    Py_XDECREF(scratch_obj);
    Py_XDECREF(out_obj);
    for (Py_ssize_t j = 0; j < got; j++) PyBuffer_Release(&cols[j].data);
    PyMem_Free(cols);
    Py_DECREF(fast);
    return result;
}

/* ---------------------------------------------------------------------------------------- */
/* Key bytes: any primary key as one byte string per row whose byte order (memcmp, a shorter
 * string first when it is a prefix) is Spanner's key order, then a stable sort of those bytes.
 *
 * encode_keys(columns, flags, n, allocate) -> (offsets, data, offset_width)
 *     columns are encode_rows descriptors (STRING for STRING / BYTES / TIMESTAMP text, INT64,
 *     FLOAT64, FLOAT32, BOOL, NUMERIC, DATE); flags holds one byte per column, 1 for DESC.
 *     Each part:
 *       a class byte when the column has NULLs, and always for floats: NULL, then NaN, then a
 *         value (a NULL or NaN part has no more bytes);
 *       INT64 / DATE / NUMERIC: the two's complement value big-endian with the sign bit
 *         flipped (8, 4, 16 bytes); BOOL one byte 0 / 1;
 *       FLOAT64 / FLOAT32 (widened, exact): the double's bits big-endian, all flipped when
 *         negative, else the sign bit set; -0.0 is written as 0.0, so the two are one key;
 *       STRING / BYTES: the bytes with each 0x00 written 0x00 0xFF, then 0x00 0x00, so no
 *         value's bytes are a prefix of another's and a prefix sorts first;
 *     and a DESC part has all its bytes inverted, class byte and terminator included. Every
 *     part ends where its bytes say, so no key's bytes are a proper prefix of another key's
 *     and equal keys (NULL = NULL, NaN = NaN, -0.0 = 0.0) have equal bytes.
 *
 * sort_binary(descriptor, n, allocate) -> (n uint64 indices, whether every row is distinct)
 *     A stable sort of a binary column without NULLs (a STRING or CELLS descriptor) in byte
 *     order: the first 8 bytes of each row as a big-endian word (zero-padded) radix-sorted by
 *     sort_pairs, then each run of equal words settled: the rows that end within the bytes
 *     seen go first, shorter first (a prefix sorts before what it prefixes), and the others
 *     are sorted on their next 8 bytes the same way, or by insertion when there are few.
 *     Pending runs go on a work list (malloc: it grows without the GIL), not the C stack, so
 *     long shared prefixes recurse nowhere. The GIL is released while the rows are encoded
 *     and sorted. */

#if defined(__GNUC__) || defined(__clang__)
#define BSWAP64(x) __builtin_bswap64(x)
#else
static inline uint64_t BSWAP64(uint64_t x) {
    uint64_t r = 0;
    for (int i = 0; i < 8; i++) r = (r << 8) | ((x >> (8 * i)) & 0xff);
    return r;
}
#endif

/* class bytes (ASC): NULL first, then NaN, then a value */
#define KEY_CLASS_NULL 0x00
#define KEY_CLASS_NAN 0x01
#define KEY_CLASS_VALUE 0x02

static inline int key_has_class(const Column *c) {
    return c->has_validity || c->kind == KIND_FLOAT64 || c->kind == KIND_FLOAT32;
}

static inline char *put_be64(char *p, uint64_t v) {
    v = BSWAP64(v);
    memcpy(p, &v, 8);
    return p + 8;
}

/* The most key bytes column c adds to n rows; -1 for a kind keys are not made of. */
static int64_t key_bound(const Column *c, Py_ssize_t n) {
    int64_t cls = key_has_class(c) ? 1 : 0;
    switch (c->kind) {
    case KIND_STRING:
    case KIND_CELLS:
    case KIND_BYTES: {
        int64_t lo = offset_at(c, 0), hi = offset_at(c, n), zeros = 0;
        const uint8_t *d = (const uint8_t *)c->data.buf;
        for (int64_t i = lo; i < hi; i++) zeros += d[i] == 0;
        return (hi - lo) + zeros + (2 + cls) * (int64_t)n;
    }
    case KIND_INT64:
    case KIND_FLOAT64:
    case KIND_FLOAT32:
        return (8 + cls) * (int64_t)n;
    case KIND_BOOL:
        return (1 + cls) * (int64_t)n;
    case KIND_NUMERIC:
        return (16 + cls) * (int64_t)n;
    case KIND_DATE:
        return (4 + cls) * (int64_t)n;
    }
    return -1;
}

/* Strings up to this long are copied byte by byte (escaping as they go); longer ones are
 * searched for 0x00 and copied whole when there is none. */
#define KEY_SHORT_STRING 32

/* Row i's part of column c at p, every byte XORed with inv (0x00 for ASC, 0xFF for DESC);
 * returns the end. */
static inline char *write_key_part(const Column *c, Py_ssize_t i, uint8_t inv, char *p) {
    uint64_t inv64 = inv ? ~0ULL : 0;
    int cls = key_has_class(c);
    if (!is_valid(c, i)) {
        *p++ = (char)(KEY_CLASS_NULL ^ inv);
        return p;
    }
    if (cls && c->kind != KIND_FLOAT64 && c->kind != KIND_FLOAT32)
        *p++ = (char)(KEY_CLASS_VALUE ^ inv);
    switch (c->kind) {
    case KIND_STRING:
    case KIND_CELLS:
    case KIND_BYTES: {
        int64_t s = offset_at(c, i), len = offset_at(c, i + 1) - s;
        const uint8_t *src = (const uint8_t *)c->data.buf + s;
        if (len > KEY_SHORT_STRING && !memchr(src, 0, (size_t)len)) {
            memcpy(p, src, (size_t)len);
            if (inv)
                for (int64_t k = 0; k < len; k++) p[k] = (char)~p[k];
            p += len;
        } else {
            for (int64_t k = 0; k < len; k++) {
                uint8_t byte = src[k];
                *p++ = (char)(byte ^ inv);
                if (byte == 0) *p++ = (char)(0xff ^ inv);
            }
        }
        p[0] = (char)inv;
        p[1] = (char)inv;
        return p + 2;
    }
    case KIND_INT64:
        return put_be64(p, ((uint64_t)int64_at(c, i) ^ 0x8000000000000000ULL) ^ inv64);
    case KIND_DATE: {
        uint32_t u = ((uint32_t)int32_at(c, i) ^ 0x80000000u) ^ (uint32_t)inv64;
        p[0] = (char)(u >> 24);
        p[1] = (char)(u >> 16);
        p[2] = (char)(u >> 8);
        p[3] = (char)u;
        return p + 4;
    }
    case KIND_BOOL: {
        Py_ssize_t b = c->offset + i;
        *p++ = (char)(((((const uint8_t *)c->data.buf)[b >> 3] >> (b & 7)) & 1) ^ inv);
        return p;
    }
    case KIND_NUMERIC: {
        const char *src = (const char *)c->data.buf + 16 * (c->offset + i);
        uint64_t lo, hi;
        memcpy(&lo, src, 8);
        memcpy(&hi, src + 8, 8);
        p = put_be64(p, (hi ^ 0x8000000000000000ULL) ^ inv64);
        return put_be64(p, lo ^ inv64);
    }
    case KIND_FLOAT64:
    case KIND_FLOAT32: {
        double d = float_at(c, i);
        if (d != d) {
            *p++ = (char)(KEY_CLASS_NAN ^ inv);
            return p;
        }
        *p++ = (char)(KEY_CLASS_VALUE ^ inv);
        if (d == 0) d = 0.0; /* -0.0 and 0.0 are one key */
        uint64_t u;
        memcpy(&u, &d, 8);
        u = (u >> 63) ? ~u : u | 0x8000000000000000ULL;
        return put_be64(p, u ^ inv64);
    }
    }
    return p;
}

static PyObject *py_encode_keys(PyObject *self, PyObject *args) {
    PyObject *seq, *alloc, *result = NULL, *off_obj = NULL, *data_obj = NULL;
    const char *flags;
    Py_ssize_t nflags, n, k = 0;
    Py_buffer off, data;
    int have_buffers = 0, width = 4;
    (void)self;
    if (!PyArg_ParseTuple(args, "Oy#nO", &seq, &flags, &nflags, &n, &alloc)) return NULL;
    if (n < 0) return PyErr_Format(PyExc_ValueError, "negative row count");
    Column *cols = parse_columns(seq, n, &k);
    if (!cols) return NULL;
    if (nflags != k) {
        PyErr_Format(PyExc_ValueError, "%zd flags for %zd key columns", nflags, k);
        goto done;
    }
    int64_t total = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        int64_t bound = key_bound(&cols[j], n);
        if (bound < 0) {
            PyErr_Format(PyExc_ValueError, "column %zd: kind %d is no key kind", j, cols[j].kind);
            goto done;
        }
        total += bound;
    }
    if (allocate_binary(alloc, n, total, &width, &off_obj, &off, &data_obj, &data)) goto done;
    have_buffers = 1;
    Py_BEGIN_ALLOW_THREADS;
    char *base = data.buf, *p = base;
    for (Py_ssize_t i = 0; i < n; i++) {
        put_offset(off.buf, width, i, p - base);
        for (Py_ssize_t j = 0; j < k; j++) p = write_key_part(&cols[j], i, flags[j] ? 0xff : 0, p);
    }
    put_offset(off.buf, width, n, p - base);
    Py_END_ALLOW_THREADS;
    result = Py_BuildValue("(OOi)", off_obj, data_obj, width);

done:
    if (have_buffers) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&off);
    }
    Py_XDECREF(data_obj);
    Py_XDECREF(off_obj);
    release_columns(cols, k);
    return result;
}

/* Runs of rows still to settle: [lo, hi) are equal (zero-padded) in their first depth bytes. */
typedef struct {
    Py_ssize_t lo, hi;
    int64_t depth;
} KeyRun;

typedef struct {
    const Column *c;
    uint64_t *words, *idx, *tmp_words, *tmp_idx;
    uint32_t (*counts)[RADIX_SIZE];
    KeyRun *runs;
    Py_ssize_t nruns, cap;
    int distinct, oom;
} ByteSort;

static inline const uint8_t *row_bytes(const Column *c, uint64_t i, int64_t *len) {
    int64_t s = offset_at(c, (Py_ssize_t)i);
    *len = offset_at(c, (Py_ssize_t)i + 1) - s;
    return (const uint8_t *)c->data.buf + s;
}

/* Rows a and b, equal (zero-padded) in their first depth bytes, compared in byte order: on
 * the bytes both have past depth, then the shorter first (it is a prefix of the other). */
static inline int compare_from(const Column *c, uint64_t a, uint64_t b, int64_t depth) {
    int64_t la, lb;
    const uint8_t *pa = row_bytes(c, a, &la), *pb = row_bytes(c, b, &lb);
    int64_t both = (la < lb ? la : lb) - depth;
    int r = both > 0 ? memcmp(pa + depth, pb + depth, (size_t)both) : 0;
    if (r) return r;
    return (la > lb) - (la < lb);
}

static void push_run(ByteSort *s, Py_ssize_t lo, Py_ssize_t hi, int64_t depth) {
    if (s->nruns == s->cap) {
        Py_ssize_t cap = s->cap ? 2 * s->cap : 64;
        KeyRun *runs = realloc(s->runs, (size_t)cap * sizeof(KeyRun));
        if (!runs) {
            s->oom = 1;
            return;
        }
        s->runs = runs;
        s->cap = cap;
    }
    s->runs[s->nruns].lo = lo;
    s->runs[s->nruns].hi = hi;
    s->runs[s->nruns].depth = depth;
    s->nruns++;
}

#define KEY_INSERTION_MAX 24

/* Rows [lo, hi) of idx, equal in their first depth bytes (zero-padded), put in byte order;
 * runs that need more bytes looked at go on the work list. One pass reads each row's length
 * and its next word (the rows are in random order here, so each is fetched ahead). */
static void settle_run(ByteSort *s, Py_ssize_t lo, Py_ssize_t hi, int64_t depth) {
    const Column *c = s->c;
    uint64_t *idx = s->idx, *w = s->words;
    /* Rows that end within the bytes seen: each is a prefix of every longer row here, so they
     * go first, by length (equal lengths are equal rows). A row here is longer than
     * depth - 8 (it continued past the previous word), so 8 lengths at most: bucket
     * len - depth + 7; the rows that go on are bucket 8. */
    uint32_t count[9] = {0};
    for (Py_ssize_t i = lo; i < hi; i++) {
        if (i + TAKE_AHEAD < hi) {
            int64_t ahead_len;
            PREFETCH(row_bytes(c, idx[i + TAKE_AHEAD], &ahead_len) + depth);
        }
        int64_t len;
        const uint8_t *p = row_bytes(c, idx[i], &len);
        int64_t left = len - depth, b = left > 0 ? 8 : left + 7;
        count[b < 0 ? 0 : b]++;
        if (left >= 8) {
            uint64_t v;
            memcpy(&v, p + depth, 8);
            w[i] = BSWAP64(v);
        } else {
            uint64_t v = 0;
            for (int64_t k = 0; k < left; k++) v |= (uint64_t)p[depth + k] << (56 - 8 * k);
            w[i] = v;
        }
    }
    Py_ssize_t ended = (hi - lo) - (Py_ssize_t)count[8];
    if (ended) {
        uint32_t next[9], sum = 0;
        for (int b = 0; b < 9; b++) {
            if (b < 8 && count[b] > 1) s->distinct = 0;
            next[b] = sum;
            sum += count[b];
        }
        for (Py_ssize_t i = lo; i < hi; i++) {
            int64_t len;
            (void)row_bytes(c, idx[i], &len);
            int64_t b = len > depth ? 8 : len - depth + 7;
            Py_ssize_t to = lo + next[b < 0 ? 0 : b]++;
            s->tmp_idx[to] = idx[i];
            s->tmp_words[to] = w[i];
        }
        memcpy(idx + lo, s->tmp_idx + lo, (size_t)(hi - lo) * 8);
        memcpy(w + lo, s->tmp_words + lo, (size_t)(hi - lo) * 8);
    }
    lo += ended;
    Py_ssize_t m = hi - lo;
    if (m <= 1) return;
    if (m <= KEY_INSERTION_MAX) {
        /* by the word, then (rarely) by the bytes after it */
        for (Py_ssize_t i = lo + 1; i < hi; i++) {
            uint64_t v = idx[i], x = w[i];
            Py_ssize_t j = i;
            while (j > lo && (w[j - 1] > x ||
                              (w[j - 1] == x && compare_from(c, idx[j - 1], v, depth + 8) > 0))) {
                idx[j] = idx[j - 1];
                w[j] = w[j - 1];
                j--;
            }
            idx[j] = v;
            w[j] = x;
        }
        for (Py_ssize_t i = lo + 1; i < hi && s->distinct; i++)
            if (w[i] == w[i - 1] && compare_from(c, idx[i - 1], idx[i], depth + 8) == 0)
                s->distinct = 0;
        return;
    }
    /* a run under the bucket pass's size: 8-bit LSD passes (small tables, digits every row
     * shares skipped), not sort_pairs's 11-bit ones */
    if (m < MSD_MIN_ROWS)
        sort_bucket(w + lo, idx + lo, s->tmp_words + lo, s->tmp_idx + lo, m, 64);
    else
        sort_pairs(w + lo, idx + lo, s->tmp_words + lo, s->tmp_idx + lo, m, s->counts);
    for (Py_ssize_t i = lo; i < hi;) {
        Py_ssize_t j = i + 1;
        while (j < hi && w[j] == w[i]) j++;
        if (j - i > 1) push_run(s, i, j, depth + 8);
        i = j;
    }
}

static PyObject *py_sort_binary(PyObject *self, PyObject *args) {
    PyObject *desc, *alloc, *result = NULL, *out_obj = NULL, *scratch_obj = NULL;
    Py_ssize_t n, k = 0;
    Py_buffer out, scratch;
    int have_out = 0, have_scratch = 0;
    ByteSort s;
    memset(&s, 0, sizeof s);
    (void)self;
    if (!PyArg_ParseTuple(args, "OnO", &desc, &n, &alloc)) return NULL;
    if (n < 0 || (uint64_t)n >= 0xffffffffULL)
        return PyErr_Format(PyExc_ValueError, "row count out of range for the key sort");
    PyObject *one = PyTuple_Pack(1, desc);
    if (!one) return NULL;
    Column *cols = parse_columns(one, n, &k);
    Py_DECREF(one);
    if (!cols) return NULL;
    if (cols[0].has_validity ||
        (cols[0].kind != KIND_STRING && cols[0].kind != KIND_CELLS && cols[0].kind != KIND_BYTES)) {
        PyErr_SetString(PyExc_ValueError, "sort_binary needs a binary column without NULLs");
        goto done;
    }
    /* out: the indices (n uint64); scratch: words, tmp words, tmp indices (3n uint64) */
    out_obj = allocate(alloc, (n ? n : 1) * 8, &out, "indices");
    if (!out_obj) goto done;
    have_out = 1;
    scratch_obj = allocate(alloc, (n ? n : 1) * 24, &scratch, "scratch");
    if (!scratch_obj) goto done;
    have_scratch = 1;
    s.counts = PyMem_Malloc(sizeof(uint32_t) * RADIX_PASSES * RADIX_SIZE);
    if (!s.counts) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS;
    s.c = &cols[0];
    s.idx = out.buf;
    s.words = scratch.buf;
    s.tmp_words = s.words + n;
    s.tmp_idx = s.words + 2 * n;
    s.distinct = 1;
    for (Py_ssize_t i = 0; i < n; i++) s.idx[i] = (uint64_t)i;
    if (n > 1) push_run(&s, 0, n, 0);
    while (s.nruns && !s.oom) {
        KeyRun r = s.runs[--s.nruns];
        settle_run(&s, r.lo, r.hi, r.depth);
    }
    Py_END_ALLOW_THREADS;
    if (s.oom) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("(OO)", out_obj, s.distinct ? Py_True : Py_False);

done:
    free(s.runs);
    PyMem_Free(s.counts);
    if (have_scratch) PyBuffer_Release(&scratch);
    if (have_out) PyBuffer_Release(&out);
    Py_XDECREF(scratch_obj);
    Py_XDECREF(out_obj);
    release_columns(cols, k);
    return result;
}

/* The one string column of (descriptor, n, allocate) arguments; NULL with an exception set. */
static Column *one_string_column(PyObject *args, Py_ssize_t *n, PyObject **alloc, const char *what) {
    PyObject *descriptor;
    Py_ssize_t k = 0;
    if (!PyArg_ParseTuple(args, "OnO", &descriptor, n, alloc)) return NULL;
    if (*n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative row count");
        return NULL;
    }
    PyObject *one = PyTuple_Pack(1, descriptor);
    if (!one) return NULL;
    Column *cols = parse_columns(one, *n, &k);
    Py_DECREF(one);
    if (cols && cols[0].kind != KIND_STRING) {
        PyErr_Format(PyExc_ValueError, "%s text must be a string column", what);
        release_columns(cols, k);
        return NULL;
    }
    return cols;
}

/* ---------------------------------------------------------------------------------------- */
/* TIMESTAMP text: "YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z" to the canonical "...SS.fffffffffZ".
 *
 * Only this one strict form is handled, for years 0001-9999 with every field in range and the
 * calendar checked; anything else makes the whole column go to loader/convert's general
 * path (the function returns None), which handles every other form and reports bad values. */

#define TS_TEXT 30

static inline int two_digits(const unsigned char *s, int *v) {
    unsigned a = (unsigned)s[0] - '0', b = (unsigned)s[1] - '0';
    *v = (int)(a * 10 + b);
    return a <= 9 && b <= 9;
}

static inline int days_in_month(int y, int m) {
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))) return 29;
    return dim[m - 1];
}

/* ---------------------------------------------------------------------------------------- */
/* INT64 text "-?D{1,19}" and DATE text "YYYY-MM-DD" (years 0001-9999, the calendar checked) to
 * their values, exactly as Arrow's casts give them. Any other form, or a value out of range,
 * returns None: the column goes to loader/convert's Arrow cast, which takes the other forms
 * it accepts and reports bad values. NULL rows are left 0. */

/* The value of 8 ASCII digits at p (0 when any byte is not a digit): one load, the digits
 * checked and combined in pairs, fours and eights by multiplication (little-endian). */
static inline int eight_digits(const unsigned char *p, uint64_t *value) {
    uint64_t x;
    memcpy(&x, p, 8);
    if (((x & 0xF0F0F0F0F0F0F0F0ULL) |
         (((x + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) != 0x3333333333333333ULL)
        return 0;
    x -= 0x3030303030303030ULL;
    x = x * 10 + (x >> 8);
    x = (((x & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
         (((x >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >>
        32;
    *value = x;
    return 1;
}

/* The value of plain INT64 text into out (8 bytes); 0 when not "-?D{1,19}" in range. */
static inline int plain_int64(const unsigned char *p, int64_t len, char *out) {
    const unsigned char *end = p + len;
    int neg = p < end && *p == '-';
    p += neg;
    if (end - p < 1 || end - p > 19) return 0;
    uint64_t v = 0;
    unsigned bad = 0;
    for (Py_ssize_t lead = (end - p) % 8; lead > 0; lead--, p++) {
        unsigned d = (unsigned)*p - '0';
        bad |= d > 9;
        v = v * 10 + d;
    }
    for (; p < end; p += 8) { /* 19 digits never wrap a uint64 */
        uint64_t eight = 0;
        bad |= !eight_digits(p, &eight);
        v = v * 100000000ULL + eight;
    }
    if (bad || v > (uint64_t)INT64_MAX + (uint64_t)neg) return 0;
    uint64_t u = neg ? (uint64_t)0 - v : v;
    memcpy(out, &u, 8);
    return 1;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static inline int32_t days_from_civil(int y, int m, int d) {
    y -= m <= 2;
    int era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (unsigned)((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1);
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return (int32_t)(era * 146097 + (int)doe - 719468);
}

/* The days of plain DATE text into out (4 bytes); 0 when not "YYYY-MM-DD" in 0001-9999. */
static inline int plain_date(const unsigned char *s, int64_t len, char *out) {
    int y1, y2, mo, d;
    if (len != 10 || s[4] != '-' || s[7] != '-' || !two_digits(s, &y1) ||
        !two_digits(s + 2, &y2) || !two_digits(s + 5, &mo) || !two_digits(s + 8, &d))
        return 0;
    int y = y1 * 100 + y2;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo)) return 0;
    int32_t days = days_from_civil(y, mo, d);
    memcpy(out, &days, 4);
    return 1;
}

/* A string column's values, each parsed by `parse` into `width` bytes (NULL rows 0): the data
 * buffer, or None as soon as one value is not in the parser's plain form. */
static inline PyObject *plain_values(PyObject *args, const char *what, int width,
                                     int (*parse)(const unsigned char *, int64_t, char *)) {
    PyObject *alloc, *result = NULL;
    Py_ssize_t n, k = 1;
    Column *cols = one_string_column(args, &n, &alloc, what);
    if (!cols) return NULL;
    const Column *c = &cols[0];
    Py_buffer data;
    int ok = 1;
    PyObject *data_obj = allocate(alloc, (n ? n : 1) * width, &data, "data");
    if (!data_obj) goto done;
    Py_BEGIN_ALLOW_THREADS;
    const unsigned char *text = c->data.buf;
    char *out = data.buf;
    memset(out, 0, (size_t)(n * width));
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        if (!is_valid(c, i)) continue;
        int64_t a = offset_at(c, i), b = offset_at(c, i + 1);
        ok = parse(text + a, b - a, out + (Py_ssize_t)width * i);
    }
    Py_END_ALLOW_THREADS;
    result = ok ? data_obj : Py_None;
    Py_INCREF(result);
    PyBuffer_Release(&data);
    Py_DECREF(data_obj);

done:
    release_columns(cols, k);
    return result;
}

static PyObject *py_plain_int64s(PyObject *self, PyObject *args) {
    (void)self;
    return plain_values(args, "INT64", 8, plain_int64);
}

static PyObject *py_plain_dates(PyObject *self, PyObject *args) {
    (void)self;
    return plain_values(args, "DATE", 4, plain_date);
}

/* Writes the canonical text of s (len bytes) to out; 0 when s is not in the strict form. */
static inline int zulu_timestamp(const unsigned char *s, int64_t len, char *out) {
    int y1, y2, mo, d, h, mi, se;
    if (len != 20 && (len < 22 || len > 30)) return 0;
    if (s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' ||
        s[len - 1] != 'Z')
        return 0;
    if (!two_digits(s, &y1) || !two_digits(s + 2, &y2) || !two_digits(s + 5, &mo) ||
        !two_digits(s + 8, &d) || !two_digits(s + 11, &h) || !two_digits(s + 14, &mi) ||
        !two_digits(s + 17, &se))
        return 0;
    int y = y1 * 100 + y2;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 ||
        se > 59)
        return 0;
    memcpy(out, s, 19);
    out[19] = '.';
    int digits = 0;
    if (len > 20) {
        if (s[19] != '.') return 0;
        digits = (int)len - 21;
        for (int k = 0; k < digits; k++) {
            unsigned c = (unsigned)s[20 + k] - '0';
            if (c > 9) return 0;
            out[20 + k] = (char)s[20 + k];
        }
    }
    for (int k = digits; k < 9; k++) out[20 + k] = '0';
    out[29] = 'Z';
    return 1;
}

static PyObject *py_zulu_timestamps(PyObject *self, PyObject *args) {
    PyObject *alloc, *result = NULL;
    Py_ssize_t n, k = 1;
    (void)self;
    Column *cols = one_string_column(args, &n, &alloc, "TIMESTAMP");
    if (!cols) return NULL;
    const Column *c = &cols[0];
    PyObject *off_obj = NULL, *data_obj = NULL;
    Py_buffer off, data;
    int have_off = 0, have_data = 0, ok = 1;
    if ((int64_t)n * TS_TEXT > INT32_MAX) { /* a block never is; let the general path decide */
        ok = 0;
        goto done;
    }
    off_obj = allocate(alloc, (n + 1) * 4, &off, "offsets");
    if (!off_obj) goto done;
    have_off = 1;
    data_obj = allocate(alloc, (n ? n : 1) * TS_TEXT, &data, "data");
    if (!data_obj) goto done;
    have_data = 1;
    Py_BEGIN_ALLOW_THREADS;
    int32_t *out_off = off.buf;
    char *out = data.buf;
    int32_t pos = 0;
    const unsigned char *text = c->data.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        out_off[i] = pos;
        if (!is_valid(c, i)) continue;
        int64_t a = offset_at(c, i), b = offset_at(c, i + 1);
        if (!zulu_timestamp(text + a, b - a, out + pos)) {
            ok = 0;
            break;
        }
        pos += TS_TEXT;
    }
    out_off[n] = pos;
    Py_END_ALLOW_THREADS;
    if (ok)
        result = Py_BuildValue("(OO)", off_obj, data_obj);

done:
    if (!ok && !PyErr_Occurred()) {
        result = Py_None;
        Py_INCREF(result);
    }
    if (have_data) PyBuffer_Release(&data);
    if (have_off) PyBuffer_Release(&off);
    Py_XDECREF(data_obj);
    Py_XDECREF(off_obj);
    release_columns(cols, k);
    return result;
}

/* ---------------------------------------------------------------------------------------- */
/* Take: the elements of binary chunks at global indices (chunk 0's rows first, then chunk 1's,
 * ...), into one binary array; a single copy of the rows instead of combining the chunks and
 * then taking from the result. */

/* The chunk holding global row ix (starts: each chunk's first row, then the total). */
static inline Py_ssize_t chunk_of(const int64_t *starts, Py_ssize_t nchunks, uint64_t ix) {
    Py_ssize_t lo = 0, hi = nchunks - 1;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi + 1) / 2;
        if (starts[mid] <= (int64_t)ix)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* What a take reads: the chunks, where each starts, and the indices. */
typedef struct {
    const Column *cols;
    const int64_t *starts;
    Py_ssize_t nchunks;
    const uint64_t *ix;
    uint64_t rows;
} TakeSource;

/* The bytes of rows ix[lo..hi); *bad = the first index out of range, else left alone. */
static int64_t take_count(const TakeSource *t, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t *bad) {
    const uint64_t *ix = t->ix;
    int64_t total = 0;
    for (Py_ssize_t i = lo; i < hi; i++) {
        if (ix[i] >= t->rows) {
            *bad = i;
            break;
        }
        if (i + TAKE_AHEAD < hi && ix[i + TAKE_AHEAD] < t->rows) {
            Py_ssize_t c1 = chunk_of(t->starts, t->nchunks, ix[i + TAKE_AHEAD]);
            const Column *cc = &t->cols[c1];
            Py_ssize_t r1 = cc->offset + (Py_ssize_t)((int64_t)ix[i + TAKE_AHEAD] - t->starts[c1]);
            PREFETCH((const char *)cc->offsets.buf + (Py_ssize_t)cc->offset_width * r1);
        }
        Py_ssize_t c = chunk_of(t->starts, t->nchunks, ix[i]);
        Py_ssize_t r = (Py_ssize_t)((int64_t)ix[i] - t->starts[c]);
        total += offset_at(&t->cols[c], r + 1) - offset_at(&t->cols[c], r);
    }
    return total;
}

/* Rows ix[lo..hi) copied to base + at on, offsets[lo..hi) set; stops (*overflow = 1) before a
 * row would end past limit, and at an index out of range (*bad). exact_end: write no byte past
 * limit (else the last rows may spill into the SLACK). Returns the end position. */
static int64_t take_copy(const TakeSource *t, Py_ssize_t lo, Py_ssize_t hi, char *base,
                         int64_t at, int64_t limit, int exact_end, void *offsets, int width,
                         int *overflow, Py_ssize_t *bad) {
    const uint64_t *ix = t->ix;
    const Column *cols = t->cols;
    char *p = base + at;
    for (Py_ssize_t i = lo; i < hi; i++) {
        if (ix[i] >= t->rows) {
            *bad = i;
            break;
        }
        put_offset(offsets, width, i, p - base);
        /* the rows are read in random order: fetch the offsets two steps ahead and the
         * bytes one step ahead (TAKE_AHEAD rows each), so the copies do not wait on memory */
        if (i + 2 * TAKE_AHEAD < hi && ix[i + 2 * TAKE_AHEAD] < t->rows) {
            Py_ssize_t c2 = chunk_of(t->starts, t->nchunks, ix[i + 2 * TAKE_AHEAD]);
            const Column *cc = &cols[c2];
            Py_ssize_t r2 =
                cc->offset + (Py_ssize_t)((int64_t)ix[i + 2 * TAKE_AHEAD] - t->starts[c2]);
            PREFETCH((const char *)cc->offsets.buf + (Py_ssize_t)cc->offset_width * r2);
        }
        if (i + TAKE_AHEAD < hi && ix[i + TAKE_AHEAD] < t->rows) {
            Py_ssize_t c1 = chunk_of(t->starts, t->nchunks, ix[i + TAKE_AHEAD]);
            Py_ssize_t r1 = (Py_ssize_t)((int64_t)ix[i + TAKE_AHEAD] - t->starts[c1]);
            const char *src = (const char *)cols[c1].data.buf + offset_at(&cols[c1], r1);
            PREFETCH(src);
            PREFETCH(src + 64);
        }
        Py_ssize_t c = chunk_of(t->starts, t->nchunks, ix[i]);
        Py_ssize_t r = (Py_ssize_t)((int64_t)ix[i] - t->starts[c]);
        int64_t a = offset_at(&cols[c], r), len = offset_at(&cols[c], r + 1) - a;
        if ((p - base) + len > limit) {
            *overflow = 1;
            break;
        }
        const char *data = cols[c].data.buf;
        /* copy_payload may write up to 16 bytes from p, past a short row into the next row's
         * place or the slack; a part on threads must not reach past its end, the next part
         * being another thread's */
        if (exact_end && (p - base) + 16 > limit)
            memcpy(p, data + a, (size_t)len);
        else
            copy_payload(p, data + a, len, data + cols[c].data.len);
        p += len;
    }
    return p - base;
}

/* One part of a take on threads: its range of indices, counted, then copied to where the
 * parts before it end. */
typedef struct {
    const TakeSource *src;
    Py_ssize_t lo, hi, bad;
    int64_t bytes, at;
    char *base;
    void *offsets;
    int width, overflow;
} TakePart;

static void take_count_part(void *arg) {
    TakePart *part = arg;
    part->bytes = take_count(part->src, part->lo, part->hi, &part->bad);
}

static void take_copy_part(void *arg) {
    TakePart *part = arg;
    take_copy(part->src, part->lo, part->hi, part->base, part->at, part->at + part->bytes, 1,
              part->offsets, part->width, &part->overflow, &part->bad);
}

/* rows a part of a take on threads has at least (a thread's start costs ~10-50 us, a row's copy
 * a few ns); min_part, for the tests, sets another */
#define TAKE_PART_MIN 16384

static PyObject *py_take_binary(PyObject *self, PyObject *args) {
    PyObject *seq, *indices_obj, *alloc, *result = NULL;
    Py_ssize_t m, k = 0;
    int threads = 1;
    Py_ssize_t min_part = TAKE_PART_MIN;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOnO|in", &seq, &indices_obj, &m, &alloc, &threads, &min_part))
        return NULL;
    if (m < 0) return PyErr_Format(PyExc_ValueError, "negative index count");
    /* chunk lengths: each descriptor is (kind, None, data, offsets, offset, width, length) */
    PyObject *fast = as_tuple(seq, "chunks must be a sequence");
    if (!fast) return NULL;
    Py_ssize_t nchunks = PyTuple_Size(fast);
    Column *cols = PyMem_Calloc(nchunks ? (size_t)nchunks : 1, sizeof(Column));
    int64_t *starts = PyMem_Calloc((size_t)nchunks + 1, sizeof(int64_t));
    PyObject *off_obj = NULL, *data_obj = NULL;
    Py_buffer idx, off, data;
    int have_idx = 0, have_off = 0, have_data = 0;
    if (!cols || !starts) {
        PyErr_NoMemory();
        goto done;
    }
    for (; k < nchunks; k++) {
        PyObject *validity, *d, *o;
        Py_ssize_t len;
        Column *c = &cols[k];
        if (!PyArg_ParseTuple(PyTuple_GetItem(fast, k), "iOOOnin", &c->kind, &validity,
                              &d, &o, &c->offset, &c->offset_width, &len))
            goto done;
        if (validity != Py_None || c->kind != KIND_CELLS || len < 0) {
            PyErr_Format(PyExc_ValueError, "chunk %zd: not a binary chunk without NULLs", k);
            goto done;
        }
        if (get_buffer(d, &c->data, &c->has_data)) goto done;
        if (get_buffer(o, &c->offsets, &c->has_offsets)) goto done;
        if (!c->has_data || check_column(c, len, k)) goto done;
        starts[k + 1] = starts[k] + len;
    }
    if (PyObject_GetBuffer(indices_obj, &idx, PyBUF_SIMPLE) < 0) goto done;
    have_idx = 1;
    if (idx.len < m * 8) {
        PyErr_SetString(PyExc_ValueError, "indices buffer too short");
        goto done;
    }
    int64_t total = 0, rows = starts[nchunks];
    TakeSource src = {cols, starts, nchunks, idx.buf, (uint64_t)rows};
    Py_ssize_t bad = -1;
    int width = 4;
    Py_ssize_t parts = piece_count(threads, m, min_part);
    if (parts > 1) {
        /* On threads: each part counts its rows' bytes, then copies them to where the parts
         * before it end (an exact size, so no part can overflow into the next). */
        TakePart part[PIECES_MAX];
        memset(part, 0, sizeof part);
        for (Py_ssize_t j = 0; j < parts; j++) {
            part[j].src = &src;
            part[j].lo = m * j / parts;
            part[j].hi = m * (j + 1) / parts;
            part[j].bad = -1;
        }
        Py_BEGIN_ALLOW_THREADS;
        run_pieces(take_count_part, part, sizeof part[0], parts, threads);
        Py_END_ALLOW_THREADS;
        for (Py_ssize_t j = 0; j < parts && bad < 0; j++) bad = part[j].bad;
        if (bad >= 0) {
            PyErr_Format(PyExc_IndexError, "index %zd out of range", bad);
            goto done;
        }
        for (Py_ssize_t j = 0; j < parts; j++) {
            part[j].at = total;
            total += part[j].bytes;
        }
        if (allocate_binary(alloc, m, total, &width, &off_obj, &off, &data_obj, &data))
            goto done;
        have_off = have_data = 1;
        for (Py_ssize_t j = 0; j < parts; j++) {
            part[j].base = data.buf;
            part[j].offsets = off.buf;
            part[j].width = width;
        }
        Py_BEGIN_ALLOW_THREADS;
        run_pieces(take_copy_part, part, sizeof part[0], parts, threads);
        put_offset(off.buf, width, m, total);
        Py_END_ALLOW_THREADS;
        result = Py_BuildValue("(OOi)", off_obj, data_obj, width);
        goto done;
    }
    /* Taking most of the rows (the flush's sorted order): one pass into a buffer the size of
     * every row, which holds any set of distinct rows; only repeated indices can overflow it,
     * and then the exact size is counted first as for a smaller take. */
    int one_pass = m > 0 && m >= rows / 2;
    if (one_pass)
        for (Py_ssize_t j = 0; j < nchunks; j++)
            total += offset_at(&cols[j], starts[j + 1] - starts[j]) - offset_at(&cols[j], 0);
    for (;;) {
        if (!one_pass) {
            Py_BEGIN_ALLOW_THREADS;
            total = take_count(&src, 0, m, &bad);
            Py_END_ALLOW_THREADS;
        }
        if (bad >= 0) {
            PyErr_Format(PyExc_IndexError, "index %zd out of range", bad);
            goto done;
        }
        if (allocate_binary(alloc, m, total, &width, &off_obj, &off, &data_obj, &data)) goto done;
        have_off = have_data = 1;
        int overflow = 0;
        Py_BEGIN_ALLOW_THREADS;
        int64_t end = take_copy(&src, 0, m, data.buf, 0, total, 0, off.buf, width, &overflow, &bad);
        if (!overflow && bad < 0) put_offset(off.buf, width, m, end);
        Py_END_ALLOW_THREADS;
        if (!overflow) break;
        /* repeated indices: count the exact size, then take again */
        PyBuffer_Release(&data);
        PyBuffer_Release(&off);
        have_off = have_data = 0;
        Py_CLEAR(data_obj);
        Py_CLEAR(off_obj);
        one_pass = 0;
    }
    if (bad >= 0) {
        PyErr_Format(PyExc_IndexError, "index %zd out of range", bad);
        goto done;
    }
    result = Py_BuildValue("(OOi)", off_obj, data_obj, width);

done:
    if (have_data) PyBuffer_Release(&data);
    if (have_off) PyBuffer_Release(&off);
    if (have_idx) PyBuffer_Release(&idx);
    Py_XDECREF(data_obj);
    Py_XDECREF(off_obj);
    if (cols) release_columns(cols, k < nchunks ? k + 1 : k);
    PyMem_Free(starts);
    Py_DECREF(fast);
    return result;
}

/* ---------------------------------------------------------------------------------------- */
/* Byte search: whether bytes [start, stop) of a buffer hold either of two byte values (the
 * parser's test for line breaks in a column). 64 bytes a step, a loop the compiler vectorises. */

static int has_either(const uint8_t *p, Py_ssize_t n, uint8_t a, uint8_t b) {
    Py_ssize_t i = 0;
    for (; i + 64 <= n; i += 64) {
        unsigned hit = 0;
        for (int j = 0; j < 64; j++) hit |= (unsigned)(p[i + j] == a) | (unsigned)(p[i + j] == b);
        if (hit) return 1;
    }
    for (; i < n; i++)
        if (p[i] == a || p[i] == b) return 1;
    return 0;
}

static PyObject *py_has_either(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t start, stop;
    int a, b, found;
    Py_buffer buf;
    (void)self;
    if (!PyArg_ParseTuple(args, "Onnii", &obj, &start, &stop, &a, &b)) return NULL;
    if (a < 0 || a > 255 || b < 0 || b > 255)
        return PyErr_Format(PyExc_ValueError, "byte values must be 0..255");
    if (PyObject_GetBuffer(obj, &buf, PyBUF_SIMPLE) < 0) return NULL;
    if (start < 0 || stop < start || stop > buf.len) {
        PyBuffer_Release(&buf);
        return PyErr_Format(PyExc_ValueError, "range %zd..%zd outside a buffer of %zd bytes",
                            start, stop, buf.len);
    }
    Py_BEGIN_ALLOW_THREADS;
    found = has_either((const uint8_t *)buf.buf + start, stop - start, (uint8_t)a, (uint8_t)b);
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&buf);
    return PyBool_FromLong(found);
}

/* ---------------------------------------------------------------------------------------- */
/* NUMERIC text: "-?D+(.D{1,9})?" with at most 29 integer digits to decimal128(38, 9), exactly.
 * Any other form (exponents, '+', spaces, more fraction digits) returns None: the column goes
 * to loader/convert's Arrow cast, which handles those and reports bad values. */

/* The decimal128(38, 9) value of plain NUMERIC text into out (16 bytes); 0 when not plain. */
static inline int plain_numeric(const unsigned char *p, int64_t len, char *out) {
    const unsigned char *end = p + len;
    int neg = p < end && *p == '-';
    p += neg;
    const unsigned char *digits = p;
    uint64_t hi_part = 0, lo_part = 0; /* the integer part as hi * 10**18 + lo */
    while (p < end && (unsigned)(*p - '0') <= 9) {
        if (p - digits >= 18) hi_part = hi_part * 10 + lo_part / 100000000000000000ULL,
                              lo_part %= 100000000000000000ULL;
        lo_part = lo_part * 10 + (uint64_t)(*p - '0');
        p++;
    }
    Py_ssize_t int_digits = p - digits;
    uint64_t frac = 0;
    int frac_digits = 0;
    if (p < end && *p == '.') {
        p++;
        while (p < end && (unsigned)(*p - '0') <= 9 && frac_digits < 10) {
            frac = frac * 10 + (uint64_t)(*p - '0');
            frac_digits++;
            p++;
        }
        if (frac_digits == 0 || frac_digits > 9) return 0;
    }
    if (p != end || int_digits == 0 || int_digits > 29) return 0;
    for (int f = frac_digits; f < 9; f++) frac *= 10;
    u128 v = u128_muladd(u128_muladd(u128_make(0, hi_part), 1000000000000000000ULL, lo_part), E9,
                         frac);
    if (neg) v = u128_neg(v);
    uint64_t lo = u128_lo(v), hi = u128_hi(v);
    memcpy(out, &lo, 8);
    memcpy(out + 8, &hi, 8);
    return 1;
}

static PyObject *py_plain_numerics(PyObject *self, PyObject *args) {
    (void)self;
    return plain_values(args, "NUMERIC", 16, plain_numeric);
}

/* ---------------------------------------------------------------------------------------- */
/* Columns typed without a per-value Python loop (issue #18): BYTES base64 text decoded, and
 * TIMESTAMP text with any RFC 3339 offset to the canonical text. Like the plain_* parsers,
 * each returns None as soon as one value is not in its form: loader/convert's general path
 * then handles the column and reports the bad values. NULL rows are empty. */

/* The 6-bit value of each byte as a standard base64 digit; -1 for any other byte. */
static const int8_t B64_VALUE[256] = {
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1, -1, 63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
    -1,  0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14,
    15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, -1,
    -1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
    41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

/* The bytes of padded base64 text s (len bytes) into out; their count, or -1 when s is not
 * "(Q{4})*(Q{2}==|Q{3}=)?" over the standard alphabet Q. As the numpy decoder, the bits a
 * padded last group does not use are ignored ("QR==" is "A"). */
static inline int64_t base64_decode(const unsigned char *s, int64_t len, unsigned char *out) {
    if (len % 4) return -1;
    unsigned char *o = out;
    for (int64_t k = 0; k < len; k += 4) {
        int a = B64_VALUE[s[k]], b = B64_VALUE[s[k + 1]];
        int c = B64_VALUE[s[k + 2]], d = B64_VALUE[s[k + 3]];
        if ((a | b | c | d) >= 0) {
            uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
            o[0] = (unsigned char)(v >> 16);
            o[1] = (unsigned char)(v >> 8);
            o[2] = (unsigned char)v;
            o += 3;
            continue;
        }
        if (k + 4 != len || (a | b) < 0 || s[k + 3] != '=') return -1; /* padding ends it */
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12;
        *o++ = (unsigned char)(v >> 16);
        if (s[k + 2] != '=') {
            if (c < 0) return -1;
            v |= (uint32_t)c << 6;
            *o++ = (unsigned char)(v >> 8);
        }
    }
    return o - out;
}

/* TIMESTAMP text "YYYY-MM-DD[Tt ]HH:MM:SS[.f{1,9}][ws](Z|z|UTC|[+-]HH[[:]MM])?" (ws: any run of
 * \t \n \f \r and space, as RE2's \s), no offset only when naive_ok (UTC is the time zone),
 * to the canonical "YYYY-MM-DDTHH:MM:SS.fffffffffZ" of the instant, in 0001-9999; 0 otherwise. */
static inline int is_re2_space(unsigned c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

static inline int offset_timestamp(const unsigned char *s, int64_t len, int naive_ok, char *out) {
    int y1, y2, mo, d, h, mi, se;
    if (len < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        s[13] != ':' || s[16] != ':')
        return 0;
    if (!two_digits(s, &y1) || !two_digits(s + 2, &y2) || !two_digits(s + 5, &mo) ||
        !two_digits(s + 8, &d) || !two_digits(s + 11, &h) || !two_digits(s + 14, &mi) ||
        !two_digits(s + 17, &se))
        return 0;
    int y = y1 * 100 + y2;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 ||
        se > 59)
        return 0;
    const unsigned char *p = s + 19, *end = s + len;
    char frac[9];
    memset(frac, '0', 9);
    if (p < end && *p == '.') {
        int k = 0;
        for (p++; p < end && (unsigned)(*p - '0') <= 9 && k < 9; p++) frac[k++] = (char)*p;
        if (k == 0) return 0;
    }
    while (p < end && is_re2_space(*p)) p++;
    int64_t shift = 0;
    if (p == end) {
        if (!naive_ok) return 0;
    } else if ((*p == 'Z' || *p == 'z') && end - p == 1) {
        p++;
    } else if (end - p == 3 && p[0] == 'U' && p[1] == 'T' && p[2] == 'C') {
        p += 3;
    } else if (*p == '+' || *p == '-') {
        int oh, om = 0;
        if (end - p < 3 || !two_digits(p + 1, &oh) || oh > 23) return 0;
        const unsigned char *q = p + 3;
        if (q < end) {
            q += *q == ':';
            if (end - q != 2 || !two_digits(q, &om) || om > 59) return 0;
            q += 2;
        }
        shift = (*p == '-' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
        p = q;
    } else {
        return 0;
    }
    if (p != end) return 0;
    memcpy(out + 20, frac, 9);
    out[19] = '.';
    out[29] = 'Z';
    if (shift == 0) { /* the instant as written: copy it */
        memcpy(out, s, 19);
        out[10] = 'T';
        return 1;
    }
    int64_t secs = (int64_t)days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - shift;
    if (secs < (int64_t)DATE_MIN * 86400 || secs >= ((int64_t)DATE_MAX + 1) * 86400) return 0;
    int64_t days = (secs - (int64_t)DATE_MIN * 86400) / 86400 + DATE_MIN; /* floor: secs >= min */
    int64_t tod = secs - days * 86400;
    civil_date(days, out);
    out[10] = 'T';
    out[11] = (char)('0' + tod / 36000);
    out[12] = (char)('0' + tod / 3600 % 10);
    out[13] = ':';
    out[14] = (char)('0' + tod / 600 % 6);
    out[15] = (char)('0' + tod / 60 % 10);
    out[16] = ':';
    out[17] = (char)('0' + tod % 60 / 10);
    out[18] = (char)('0' + tod % 10);
    return 1;
}

/* (offsets, data) of a binary result of n rows from one string column, each value written by
 * `write` (its byte count, or -1 for a value not in the form: then None); data holds at most
 * bound bytes. */
typedef int64_t (*value_writer)(const unsigned char *, int64_t, int, char *);

static PyObject *binary_values(PyObject *args, const char *what, int flag, value_writer write,
                               int64_t (*bound)(const Column *, Py_ssize_t)) {
    PyObject *alloc, *result = NULL;
    Py_ssize_t n, k = 1;
    Column *cols = one_string_column(args, &n, &alloc, what);
    if (!cols) return NULL;
    const Column *c = &cols[0];
    PyObject *off_obj = NULL, *data_obj = NULL;
    Py_buffer off, data;
    int have_off = 0, have_data = 0, ok = 1;
    int64_t most = bound(c, n);
    if (most > INT32_MAX) { /* a block never is; let the general path decide */
        ok = 0;
        goto done;
    }
    off_obj = allocate(alloc, (n + 1) * 4, &off, "offsets");
    if (!off_obj) goto done;
    have_off = 1;
    data_obj = allocate(alloc, (Py_ssize_t)(most ? most : 1), &data, "data");
    if (!data_obj) goto done;
    have_data = 1;
    Py_BEGIN_ALLOW_THREADS;
    int32_t *out_off = off.buf;
    char *out = data.buf;
    int64_t pos = 0;
    const unsigned char *text = c->data.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        out_off[i] = (int32_t)pos;
        if (!is_valid(c, i)) continue;
        int64_t a = offset_at(c, i), b = offset_at(c, i + 1);
        int64_t wrote = write(text + a, b - a, flag, out + pos);
        if (wrote < 0) {
            ok = 0;
            break;
        }
        pos += wrote;
    }
    out_off[n] = (int32_t)pos;
    Py_END_ALLOW_THREADS;
    if (ok) result = Py_BuildValue("(OO)", off_obj, data_obj);

done:
    if (!ok && !PyErr_Occurred()) {
        result = Py_None;
        Py_INCREF(result);
    }
    if (have_data) PyBuffer_Release(&data);
    if (have_off) PyBuffer_Release(&off);
    Py_XDECREF(data_obj);
    Py_XDECREF(off_obj);
    release_columns(cols, k);
    return result;
}

static int64_t write_base64(const unsigned char *s, int64_t len, int flag, char *out) {
    (void)flag;
    return base64_decode(s, len, (unsigned char *)out);
}

static int64_t base64_bound(const Column *c, Py_ssize_t n) {
    return (offset_at(c, n) - offset_at(c, 0)) / 4 * 3;
}

static int64_t write_timestamp(const unsigned char *s, int64_t len, int naive_ok, char *out) {
    return offset_timestamp(s, len, naive_ok, out) ? TS_TEXT : -1;
}

static int64_t timestamp_bound(const Column *c, Py_ssize_t n) {
    (void)c;
    return (int64_t)n * TS_TEXT;
}

static PyObject *py_base64_values(PyObject *self, PyObject *args) {
    (void)self;
    return binary_values(args, "BYTES", 0, write_base64, base64_bound);
}

static PyObject *py_offset_timestamps(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *descriptor, *alloc;
    Py_ssize_t n;
    int naive_ok;
    if (!PyArg_ParseTuple(args, "OnOp", &descriptor, &n, &alloc, &naive_ok)) return NULL;
    PyObject *rest = Py_BuildValue("(OnO)", descriptor, n, alloc);
    if (!rest) return NULL;
    PyObject *result = binary_values(rest, "TIMESTAMP", naive_ok, write_timestamp, timestamp_bound);
    Py_DECREF(rest);
    return result;
}

/* ---------------------------------------------------------------------------------------- */
/* JSON text (issue #18): a validator that answers "valid" only where Python's json.loads, as
 * loader/convert calls it, surely accepts (RFC 8259; no NaN / Infinity; numbers Spanner keeps
 * exactly (json_number_kept); at most 80 levels deep), and a splitter of flat JSON arrays into
 * element texts for ARRAY<T> (numbers of at most 200 digits and a 2-digit exponent, which a
 * double always holds, converted as T). Whatever they do not vouch for
 * goes to loader/convert's reference path (json.loads per distinct value). */

#define JSON_DEPTH 80 /* GoogleSQL JSON's levels: deeper goes to the reference, which refuses it */
#define JSON_DIGITS 200

static inline const unsigned char *json_ws(const unsigned char *p, const unsigned char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static inline int hex4(const unsigned char *p, unsigned *v) {
    unsigned x = 0;
    for (int k = 0; k < 4; k++) {
        unsigned c = p[k], d;
        if (c - '0' <= 9)
            d = c - '0';
        else if ((c | 0x20) - 'a' <= 5)
            d = (c | 0x20) - 'a' + 10;
        else
            return 0;
        x = x << 4 | d;
    }
    *v = x;
    return 1;
}

/* After the opening quote: the end of the string (past its closing quote), or NULL. When out
 * is given, the string's text is written there (escapes undone, UTF-8) and *len set; then a
 * \u escape of a lone surrogate fails, since the text could not be UTF-8. */
static const unsigned char *json_string(const unsigned char *p, const unsigned char *end,
                                        unsigned char *out, int64_t *len) {
    unsigned char *o = out;
    while (p < end) {
        unsigned c = *p;
        if (c == '"') {
            if (out) *len = o - out;
            return p + 1;
        }
        if (c < 0x20) return NULL; /* json.loads is strict about control characters */
        if (c != '\\') {
            if (out) *o++ = (unsigned char)c;
            p++;
            continue;
        }
        if (end - p < 2) return NULL;
        unsigned e = p[1], cp;
        p += 2;
        switch (e) {
        case '"': case '\\': case '/': cp = e; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (end - p < 4 || !hex4(p, &cp)) return NULL;
            p += 4;
            if (!out) continue; /* json.loads takes any \uXXXX, lone surrogates too */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return NULL;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return NULL;
            }
            break;
        default:
            return NULL;
        }
        if (!out) continue;
        if (cp < 0x80) {
            *o++ = (unsigned char)cp;
        } else if (cp < 0x800) {
            *o++ = (unsigned char)(0xC0 | cp >> 6);
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            *o++ = (unsigned char)(0xE0 | cp >> 12);
            *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        } else {
            *o++ = (unsigned char)(0xF0 | cp >> 18);
            *o++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        }
    }
    return NULL;
}

/* A number "-?(0|[1-9]D*)(.D+)?([eE][+-]?D+)?" a double surely holds: its end, or NULL. */
static const unsigned char *json_number(const unsigned char *p, const unsigned char *end) {
    const unsigned char *start = p;
    p += p < end && *p == '-';
    if (p >= end || (unsigned)(*p - '0') > 9) return NULL;
    if (*p == '0') {
        p++;
    } else {
        while (p < end && (unsigned)(*p - '0') <= 9) p++;
    }
    if (p < end && *p == '.') {
        const unsigned char *f = ++p;
        while (p < end && (unsigned)(*p - '0') <= 9) p++;
        if (p == f) return NULL;
    }
    if (p - start > JSON_DIGITS) return NULL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        p += p < end && (*p == '+' || *p == '-');
        const unsigned char *x = p;
        while (p < end && (unsigned)(*p - '0') <= 9) p++;
        if (p == x || p - x > 2) return NULL;
    }
    return p;
}

/* A number of a JSON document that Spanner surely keeps (its JSON type keeps an integer in
 * [INT64_MIN, UINT64_MAX], and a double whose text round-trips; it refuses any other): an
 * integer in that range; else at most 15 digits after the
 * leading zeros (DBL_DIG: such a decimal survives a double) with a 2-digit exponent. Its end,
 * or NULL (loader/convert's reference decides). */
static const unsigned char *json_number_kept(const unsigned char *p, const unsigned char *end) {
    const unsigned char *q = json_number(p, end);
    if (!q) return NULL;
    const unsigned char *d = p + (*p == '-');
    int digits = 0, significant = 0, integer = 1;
    for (const unsigned char *r = d; r < q; r++) {
        if (*r == '.' || *r == 'e' || *r == 'E') {
            if (*r != '.') break;
            integer = 0;
            continue;
        }
        digits++;
        significant += significant || *r != '0';
    }
    if (integer && q - d == digits) {
        if (digits <= 18 || (digits == 19 && *p != '-')) return q;
        if (digits == 19) return memcmp(d, "9223372036854775808", 19) <= 0 ? q : NULL;
        return *p != '-' && digits == 20 && memcmp(d, "18446744073709551615", 20) <= 0 ? q : NULL;
    }
    return significant <= 15 ? q : NULL;
}

static inline const unsigned char *json_word(const unsigned char *p, const unsigned char *end,
                                             const char *word, int len) {
    return end - p >= len && memcmp(p, word, (size_t)len) == 0 ? p + len : NULL;
}

/* One value at p (no leading whitespace): its end, or NULL. */
static const unsigned char *json_value(const unsigned char *p, const unsigned char *end,
                                       int depth) {
    if (p >= end) return NULL;
    switch (*p) {
    case '"':
        return json_string(p + 1, end, NULL, NULL);
    case 't':
        return json_word(p, end, "true", 4);
    case 'f':
        return json_word(p, end, "false", 5);
    case 'n':
        return json_word(p, end, "null", 4);
    case '[':
    case '{': {
        int object = *p == '{';
        char close = object ? '}' : ']';
        if (depth >= JSON_DEPTH) return NULL;
        p = json_ws(p + 1, end);
        if (p < end && *p == close) return p + 1;
        for (;;) {
            if (object) {
                if (p >= end || *p != '"' || !(p = json_string(p + 1, end, NULL, NULL)))
                    return NULL;
                p = json_ws(p, end);
                if (p >= end || *p != ':') return NULL;
                p = json_ws(p + 1, end);
            }
            if (!(p = json_value(p, end, depth + 1))) return NULL;
            p = json_ws(p, end);
            if (p >= end) return NULL;
            if (*p == close) return p + 1;
            if (*p != ',') return NULL;
            p = json_ws(p + 1, end);
        }
    }
    default:
        return json_number_kept(p, end);
    }
}

/* json_checks(column, n, allocate) -> n bytes, 1 where the value needs json.loads's word. */
static PyObject *py_json_checks(PyObject *self, PyObject *args) {
    PyObject *alloc, *result = NULL;
    Py_ssize_t n, k = 1;
    (void)self;
    Column *cols = one_string_column(args, &n, &alloc, "JSON");
    if (!cols) return NULL;
    const Column *c = &cols[0];
    Py_buffer flags;
    PyObject *obj = allocate(alloc, n ? n : 1, &flags, "flags");
    if (obj) {
        Py_BEGIN_ALLOW_THREADS;
        const unsigned char *text = c->data.buf;
        unsigned char *out = flags.buf;
        for (Py_ssize_t i = 0; i < n; i++) {
            out[i] = 0;
            if (!is_valid(c, i)) continue;
            const unsigned char *p = text + offset_at(c, i), *end = text + offset_at(c, i + 1);
            p = json_value(json_ws(p, end), end, 0);
            out[i] = !p || json_ws(p, end) != end;
        }
        Py_END_ALLOW_THREADS;
        PyBuffer_Release(&flags);
        result = obj;
    }
    release_columns(cols, k);
    return result;
}

/* One element of a flat array at p: its text into out (string contents, or a number, true or
 * false as written; nothing for null, with *is_null set); the end, or NULL for anything else
 * (nested values, NaN, lone surrogates: the reference path's business). */
static const unsigned char *array_element(const unsigned char *p, const unsigned char *end,
                                          unsigned char *out, int64_t *len, int *is_null) {
    const unsigned char *q;
    *is_null = 0;
    if (p >= end) return NULL;
    if (*p == '"') return json_string(p + 1, end, out, len);
    if (*p == 'n') {
        *is_null = 1;
        *len = 0;
        return json_word(p, end, "null", 4);
    }
    if (*p == 't')
        q = json_word(p, end, "true", 4);
    else if (*p == 'f')
        q = json_word(p, end, "false", 5);
    else
        q = json_number(p, end);
    if (!q) return NULL;
    *len = q - p;
    memcpy(out, p, (size_t)*len);
    return q;
}

/* The elements of one array value, [p, end): each one's text appended at data + *pos, its
 * start at elems[*m] and its validity bit set unless it is null; 0 for a value the splitter
 * does not vouch for (the reference path's business). */
typedef int (*array_splitter)(const unsigned char *p, const unsigned char *end,
                              unsigned char *data, int64_t *pos, int32_t *elems,
                              unsigned char *valid, int64_t *m);

static inline void element_done(unsigned char *valid, int64_t *m, int64_t *pos, int64_t len,
                                int is_null) {
    if (!is_null) valid[*m >> 3] |= (unsigned char)(1u << (*m & 7));
    *pos += len;
    (*m)++;
}

/* A flat JSON array: strings, numbers, true, false, null. */
static int json_array_row(const unsigned char *p, const unsigned char *end, unsigned char *data,
                          int64_t *pos, int32_t *elems, unsigned char *valid, int64_t *m) {
    p = json_ws(p, end);
    if (p >= end || *p != '[') return 0;
    p = json_ws(p + 1, end);
    if (p < end && *p == ']') return json_ws(p + 1, end) == end;
    for (;;) {
        int64_t len = 0;
        int is_null;
        elems[*m] = (int32_t)*pos;
        p = array_element(p, end, data + *pos, &len, &is_null);
        if (!p) return 0;
        element_done(valid, m, pos, len, is_null);
        p = json_ws(p, end);
        if (p < end && *p == ']') return json_ws(p + 1, end) == end;
        if (p >= end || *p != ',') return 0;
        p = json_ws(p + 1, end);
    }
}

/* The white space PostgreSQL's array_in skips around elements (loader/convert/pg_array.py). */
static inline int pg_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* PostgreSQL's one-dimensional array text, by loader/convert/pg_array.py's rules (its
 * reference): {a, "b c", NULL, "NULL", x\,y}. A backslash takes the next byte literally (a
 * UTF-8 character's other bytes follow as they are); an unquoted element loses the white space
 * around it, but not an escaped one; an unquoted NULL in any case is null. Bounds, more
 * dimensions and every malformed value are the reference path's, which gives the reason. */
static int pg_array_row(const unsigned char *p, const unsigned char *end, unsigned char *data,
                        int64_t *pos, int32_t *elems, unsigned char *valid, int64_t *m) {
    while (p < end && pg_space(*p)) p++;
    while (end > p && pg_space(end[-1])) end--;
    if (end - p < 2 || *p != '{' || end[-1] != '}') return 0;
    p++;
    end--;
    const unsigned char *q = p;
    while (q < end && pg_space(*q)) q++;
    if (q == end) return 1; /* {} */
    for (;;) {
        while (p < end && pg_space(*p)) p++;
        unsigned char *out = data + *pos;
        int64_t len = 0;
        int is_null = 0;
        elems[*m] = (int32_t)*pos;
        if (p < end && *p == '"') {
            for (p++;; p++) {
                if (p >= end) return 0;
                if (*p == '"') break;
                if (*p == '\\' && ++p >= end) return 0;
                out[len++] = *p;
            }
            p++;
            while (p < end && pg_space(*p)) p++;
        } else {
            int64_t kept = 0; /* up to the last escaped byte, which stays */
            for (; p < end && *p != ','; p++) {
                if (*p == '{' || *p == '}' || *p == '"') return 0;
                if (*p == '\\') {
                    if (++p >= end) return 0;
                    out[len++] = *p;
                    kept = len;
                } else {
                    out[len++] = *p;
                }
            }
            while (len > kept && pg_space(out[len - 1])) len--;
            if (len == 0) return 0;
            is_null = kept == 0 && len == 4 && (out[0] | 0x20) == 'n' && (out[1] | 0x20) == 'u' &&
                      (out[2] | 0x20) == 'l' && (out[3] | 0x20) == 'l';
            if (is_null) len = 0;
        }
        element_done(valid, m, pos, len, is_null);
        if (p >= end) return 1;
        if (*p != ',' || ++p >= end) return 0;
    }
}

/* (list offsets, element offsets, element data, element validity, element count) of a string
 * column whose every value `split` vouches for, or None. NULL rows are empty lists (their
 * validity is the column's). */
static PyObject *split_arrays(PyObject *args, array_splitter split) {
    PyObject *alloc, *result = NULL;
    Py_ssize_t n, k = 1;
    Column *cols = one_string_column(args, &n, &alloc, "ARRAY");
    if (!cols) return NULL;
    const Column *c = &cols[0];
    int64_t bytes = offset_at(c, n) - offset_at(c, 0);
    int64_t most = bytes / 2 + 1; /* an element takes a byte and a comma or bracket */
    PyObject *objs[4] = {NULL, NULL, NULL, NULL};
    Py_buffer views[4];
    int have = 0, ok = 1;
    int64_t m = 0;
    if (bytes > INT32_MAX) {
        ok = 0;
        goto done;
    }
    Py_ssize_t sizes[4] = {(n + 1) * 4, (Py_ssize_t)(most + 1) * 4, (Py_ssize_t)(bytes ? bytes : 1),
                           (Py_ssize_t)((most + 7) / 8 + 1)};
    for (; have < 4; have++) {
        objs[have] = allocate(alloc, sizes[have], &views[have], "buffer");
        if (!objs[have]) goto done;
    }
    Py_BEGIN_ALLOW_THREADS;
    const unsigned char *text = c->data.buf;
    int32_t *lists = views[0].buf, *elems = views[1].buf;
    unsigned char *data = views[2].buf, *valid = views[3].buf;
    memset(valid, 0, (size_t)sizes[3]);
    int64_t pos = 0;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        lists[i] = (int32_t)m;
        if (!is_valid(c, i)) continue;
        ok = split(text + offset_at(c, i), text + offset_at(c, i + 1), data, &pos, elems, valid,
                   &m);
    }
    lists[n] = (int32_t)m;
    elems[m] = (int32_t)pos;
    Py_END_ALLOW_THREADS;
    if (ok) result = Py_BuildValue("(OOOOn)", objs[0], objs[1], objs[2], objs[3], (Py_ssize_t)m);

done:
    if (!ok && !PyErr_Occurred()) {
        result = Py_None;
        Py_INCREF(result);
    }
    for (int j = 0; j < have; j++) {
        PyBuffer_Release(&views[j]);
        Py_DECREF(objs[j]);
    }
    release_columns(cols, k);
    return result;
}

/* json_arrays(column, n, allocate): split_arrays of flat JSON arrays. */
static PyObject *py_json_arrays(PyObject *self, PyObject *args) {
    (void)self;
    return split_arrays(args, json_array_row);
}

/* pg_arrays(column, n, allocate): split_arrays of PostgreSQL's one-dimensional array text. */
static PyObject *py_pg_arrays(PyObject *self, PyObject *args) {
    (void)self;
    return split_arrays(args, pg_array_row);
}

/* ---------------------------------------------------------------------------------------- */
/* BOOL text (issue #18): each value, ASCII-lowercased, one of the words (words: "1true\0"
 * "0false\0"..., the truth then the lowercase word, at most 15 bytes); the bit-packed values,
 * or None as soon as a value is none of them or not ASCII (the reference path's business). */

#define BOOL_WORD 15

static PyObject *py_bool_values(PyObject *self, PyObject *args) {
    PyObject *descriptor, *alloc, *words_obj, *result = NULL;
    Py_ssize_t n, k = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnOO", &descriptor, &n, &alloc, &words_obj)) return NULL;
    char *words;
    Py_ssize_t words_len;
    if (PyBytes_AsStringAndSize(words_obj, &words, &words_len) < 0) return NULL;
    PyObject *rest = Py_BuildValue("(OnO)", descriptor, n, alloc);
    if (!rest) return NULL;
    Column *cols = one_string_column(rest, &n, &alloc, "BOOL");
    Py_DECREF(rest);
    if (!cols) return NULL;
    k = 1;
    const Column *c = &cols[0];
    Py_buffer bits;
    int ok = 1;
    PyObject *obj = allocate(alloc, (n + 7) / 8 + 1, &bits, "data");
    if (!obj) goto done;
    Py_BEGIN_ALLOW_THREADS;
    const unsigned char *text = c->data.buf;
    unsigned char *out = bits.buf;
    memset(out, 0, (size_t)((n + 7) / 8 + 1));
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        if (!is_valid(c, i)) continue;
        int64_t a = offset_at(c, i), len = offset_at(c, i + 1) - a;
        char lower[BOOL_WORD];
        if (len > BOOL_WORD) {
            ok = 0;
            break;
        }
        for (int64_t j = 0; j < len; j++) {
            unsigned ch = text[a + j];
            if (ch >= 0x80) ok = 0;
            lower[j] = (char)(ch - 'A' < 26 ? ch | 0x20 : ch);
        }
        int found = 0;
        for (const char *w = words; ok && !found && w < words + words_len;) {
            size_t wl = strlen(w + 1);
            if ((int64_t)wl == len && memcmp(w + 1, lower, wl) == 0) {
                found = 1;
                if (w[0] == '1') out[i >> 3] |= (unsigned char)(1u << (i & 7));
            }
            w += wl + 2;
        }
        ok = ok && found;
    }
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&bits);
    if (ok) {
        result = obj;
    } else {
        Py_DECREF(obj);
        result = Py_None;
        Py_INCREF(result);
    }

done:
    release_columns(cols, k);
    return result;
}

/* ---------------------------------------------------------------------------------------- */
/* ARRAY cells (issue #18): list_cells(child descriptor, m, relative offsets, validity or None,
 * n, allocate) -> (offsets, data, offset_width), row i's whole cell "0a <len> 32 <len>
 * <element cells>" (NULL rows "0a 02 08 00"): the element cells written once with
 * write_cell, then framed per row. encode.py passes the result to encode_rows as CELLS. */

static PyObject *py_list_cells(PyObject *self, PyObject *args) {
    PyObject *child_desc, *rel_obj, *valid_obj, *alloc, *result = NULL;
    Py_ssize_t m, n, k = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnOOnO", &child_desc, &m, &rel_obj, &valid_obj, &n, &alloc))
        return NULL;
    if (m < 0 || n < 0) return PyErr_Format(PyExc_ValueError, "negative row count");
    PyObject *one = PyTuple_Pack(1, child_desc);
    if (!one) return NULL;
    Column *cols = parse_columns(one, m, &k);
    Py_DECREF(one);
    if (!cols) return NULL;
    const Column *c = &cols[0];
    Py_buffer rel_view, valid_view;
    int has_rel = 0, has_valid = 0, have_off = 0, have_data = 0;
    PyObject *off_obj = NULL, *data_obj = NULL;
    Py_buffer off, data;
    char *cells = NULL;
    int64_t *ends = NULL;
    if (get_buffer(rel_obj, &rel_view, &has_rel) || get_buffer(valid_obj, &valid_view, &has_valid))
        goto done;
    if (!has_rel) {
        PyErr_SetString(PyExc_ValueError, "list offsets missing");
        goto done;
    }
    if (need(&rel_view, (n + 1) * 8, "offsets", 0) ||
        (has_valid && need(&valid_view, n, "validity", 0)))
        goto done;
    const int64_t *rel = rel_view.buf;
    const uint8_t *valid = has_valid ? valid_view.buf : NULL;
    int ordered = rel[0] == 0 && rel[n] <= m;
    for (Py_ssize_t i = 0; i < n && ordered; i++) ordered = rel[i] <= rel[i + 1];
    if (!ordered) {
        PyErr_SetString(PyExc_ValueError, "list offsets out of order or past the elements");
        goto done;
    }
    if (dates_out_of_range(c, m)) {
        PyErr_SetString(PyExc_ValueError, "DATE outside 0001-01-01 .. 9999-12-31");
        goto done;
    }
    cells = PyMem_Malloc((size_t)(cell_bound(c, m) + SLACK));
    ends = PyMem_Malloc((size_t)(m + 1) * sizeof(int64_t));
    if (!cells || !ends) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t total = 0;
    Py_BEGIN_ALLOW_THREADS;
    char *p = cells;
    ends[0] = 0;
    for (Py_ssize_t j = 0; j < m; j++) {
        p = write_cell(c, j, p);
        ends[j + 1] = p - cells;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (valid && !valid[i]) {
            total += 4;
            continue;
        }
        uint64_t plen = (uint64_t)(ends[rel[i + 1]] - ends[rel[i]]);
        uint64_t vlen = 1 + (uint64_t)varint_len(plen) + plen;
        total += 1 + varint_len(vlen) + (int64_t)vlen;
    }
    Py_END_ALLOW_THREADS;
    int width;
    if (allocate_binary(alloc, n, total, &width, &off_obj, &off, &data_obj, &data)) goto done;
    have_off = have_data = 1;
    Py_BEGIN_ALLOW_THREADS;
    char *base = data.buf, *q = base;
    for (Py_ssize_t i = 0; i < n; i++) {
        put_offset(off.buf, width, i, q - base);
        if (valid && !valid[i]) {
            memcpy(q, NULL_CELL, 4);
            q += 4;
            continue;
        }
        int64_t a = ends[rel[i]], b = ends[rel[i + 1]];
        uint64_t plen = (uint64_t)(b - a);
        *q++ = 0x0a;
        q = put_varint(q, 1 + (uint64_t)varint_len(plen) + plen);
        *q++ = 0x32;
        q = put_varint(q, plen);
        memcpy(q, cells + a, (size_t)plen);
        q += plen;
    }
    put_offset(off.buf, width, n, q - base);
    Py_END_ALLOW_THREADS;
    result = Py_BuildValue("(OOi)", off_obj, data_obj, width);

done:
    PyMem_Free(cells);
    PyMem_Free(ends);
    if (have_data) PyBuffer_Release(&data);
    if (have_off) PyBuffer_Release(&off);
    Py_XDECREF(data_obj);
    Py_XDECREF(off_obj);
    if (has_rel) PyBuffer_Release(&rel_view);
    if (has_valid) PyBuffer_Release(&valid_view);
    release_columns(cols, k);
    return result;
}

/* ---------------------------------------------------------------------------------------- */
/* Quote watch: RFC 4180 quoting followed through a stream chunk by chunk, to find a quoted
 * field that runs over a line end and is closed by a quote with text after it (a stray quote:
 * Arrow's reader keeps that text and joins the lines between into one value, without an
 * error). loader/parse/quotes.py has the twin and the meaning of each state.
 *
 * quote_scan(buffer, quote, delim, state, span_nl, escape=-1, doubled=1)
 *     -> (state, span_nl, newlines, open_at, nl_open, close_at, nl_close)
 * state: 0 at a field's start, 1 inside an unquoted field, 2 inside a quoted field, 3 just
 * after a quote inside a quoted field (the next byte decides), 4 and 5 after the escape
 * character (escape >= 0) in an unquoted and a quoted field (the next byte is data). doubled:
 * "" inside a quoted field is one quote (else the second quote is text after the field). span_nl: the open quoted field
 * holds a line end so far. newlines: the chunk's line ends (LFs, and CRs no LF follows; up to
 * close_at when one is found). open_at: where the quoted field open at the end (or the one
 * closed at close_at) opened, -1 when before this chunk; nl_open: line ends before it. close_at: where the text after a closing
 * quote starts, the first such text after a field holding a line end (-1: none; the scan
 * stops there); nl_close: line ends before it. memchr jumps from quote to quote, so input without quotes costs one search. */

/* Line ends in [from, to) of b[0..n): LFs, and CRs no LF follows (a CR alone ends a line, as
 * Arrow's reader reads it). 127 bytes a step into a byte counter, which the compiler
 * vectorises. */
static Py_ssize_t count_ends(const uint8_t *b, Py_ssize_t from, Py_ssize_t to, Py_ssize_t n) {
    Py_ssize_t count = 0, i = from, end = to < n ? to : n - 1; /* b[i + 1] exists below end */
    for (; i + 127 <= end; i += 127) {
        uint8_t c = 0;
        for (int j = 0; j < 127; j++)
            c += (uint8_t)(b[i + j] == '\n') +
                 (uint8_t)((b[i + j] == '\r') & (b[i + j + 1] != '\n'));
        count += c;
    }
    for (; i < to; i++) count += b[i] == '\n' || (b[i] == '\r' && (i + 1 >= n || b[i + 1] != '\n'));
    return count;
}

static int line_end_in(const uint8_t *p, Py_ssize_t n) {
    return n > 0 && has_either(p, n, '\n', '\r');
}

/* Bit j of *q: byte j of p[0..64) is the quote; of *e: a field's end (delimiter, LF, CR). */
static inline void quote_masks(const uint8_t *p, uint8_t quote, uint8_t delim, uint64_t *q,
                               uint64_t *e) {
#if defined(__SSE2__)
    const __m128i vq = _mm_set1_epi8((char)quote), vd = _mm_set1_epi8((char)delim);
    const __m128i vn = _mm_set1_epi8('\n'), vr = _mm_set1_epi8('\r');
    uint64_t mq = 0, me = 0;
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * k));
        __m128i end = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, vd), _mm_cmpeq_epi8(v, vn)),
                                   _mm_cmpeq_epi8(v, vr));
        mq |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vq)) << (16 * k);
        me |= (uint64_t)(uint16_t)_mm_movemask_epi8(end) << (16 * k);
    }
    *q = mq, *e = me;
#else
    uint64_t mq = 0, me = 0;
    for (int j = 0; j < 64; j++) {
        mq |= (uint64_t)(p[j] == quote) << j;
        me |= (uint64_t)(p[j] == delim || p[j] == '\n' || p[j] == '\r') << j;
    }
    *q = mq, *e = me;
#endif
}

static inline uint64_t prefix_xor(uint64_t x) {
    x ^= x << 1, x ^= x << 2, x ^= x << 4, x ^= x << 8, x ^= x << 16, x ^= x << 32;
    return x;
}

static PyObject *py_quote_scan(PyObject *self, PyObject *args) {
    Py_buffer buf;
    int quote, delim, state, span_in, escape = -1, doubled = 1;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*iiii|ii", &buf, &quote, &delim, &state, &span_in, &escape,
                          &doubled))
        return NULL;
    if (quote < 0 || quote > 255 || delim < 0 || delim > 255 || state < 0 || state > 5 ||
        escape < -1 || escape > 255) {
        PyBuffer_Release(&buf);
        return PyErr_Format(PyExc_ValueError, "quote_scan: a byte or state out of range");
    }
    const uint8_t *b = (const uint8_t *)buf.buf;
    const uint8_t qc = (uint8_t)quote, dc = (uint8_t)delim;
    Py_ssize_t n = buf.len, i = 0, open_at = -1, close_at = -1;
    Py_ssize_t newlines, nl_open = 0, nl_close = 0;
    int span_nl = 0;
#define QS_END(c) ((c) == dc || (c) == '\n' || (c) == '\r')
/* whether the quoted field open since open_at (or since before the chunk) holds a line end
 * before byte `to` */
#define QS_SPAN(to) \
    (open_at >= 0 ? line_end_in(b + open_at + 1, (to) - open_at - 1) \
                  : (span_in || line_end_in(b, (to))))
    const int ec = escape; /* -1: none (no byte equals it) */
    /* no quote in the last 64 bytes: look for the next one with memchr (not with an escape
     * character, which may make the byte before a quote data) */
    int quiet = ec < 0;
    Py_BEGIN_ALLOW_THREADS;
    while (i < n) {
        if (quiet && state < 2) {
            const uint8_t *next = memchr(b + i, qc, (size_t)(n - i));
            Py_ssize_t p = next ? next - b : n;
            if (p > i) state = QS_END(b[p - 1]) ? 0 : 1, i = p;
            if (i == n) break;
        }
        if (state < 3 && doubled && i + 64 < n && !(ec >= 0 && memchr(b + i, ec, 64))) {
            /* 64 bytes at once: when every quote opens a field or closes one (the quotes
             * alternate), the state follows from their count; else byte by byte below (and
             * where an escape character is, or quotes are not doubled) */
            uint64_t q, e;
            quote_masks(b + i, qc, dc, &q, &e);
            quiet = q == 0 && ec < 0;
            uint64_t inside = prefix_xor(q) ^ (state == 2 ? ~(uint64_t)0 : 0);
            uint64_t opens = q & inside, closes = q & ~inside;
            uint64_t before = ((e | q) << 1) | (uint64_t)(state == 0);
            uint64_t after = ((e | q) >> 1) | ((uint64_t)(QS_END(b[i + 64]) || b[i + 64] == qc)
                                               << 63);
            if (!((opens & ~before) | (closes & ~after))) {
                uint64_t real = opens & ~(q << 1); /* not the second quote of a doubled one */
                uint8_t c = b[i + 63];
                if (inside >> 63 || c == qc) {
                    /* a quoted field open at the end, or closed by the last byte (the next
                     * decides): the last quote that opened one opened it, if any here */
                    if (real) open_at = i + 63 - CLZ64(real);
                    state = inside >> 63 ? 2 : 3;
                } else {
                    if (q) open_at = -1;
                    state = QS_END(c) ? 0 : 1;
                }
                i += 64;
                continue;
            }
        }
        Py_ssize_t stop = state >= 3 ? i + 1 : (i + 64 < n ? i + 64 : n);
        for (; i < stop; i++) {
            uint8_t c = b[i];
            if (state == 2) {
                if (c == qc) {
                    state = 3;
                } else if (c == ec) {
                    state = 5;
                }
            } else if (state == 5) {
                state = 2; /* the escaped byte of a quoted value */
            } else if (state == 4) {
                state = 1; /* the escaped byte of an unquoted value */
            } else if (state == 3) {
                if (c == qc && doubled) {
                    state = 2; /* a doubled quote: one quote of the value */
                } else if (QS_END(c)) {
                    state = 0, open_at = -1;
                } else if (QS_SPAN(i - 1)) {
                    close_at = i, span_nl = 1;
                    break;
                } else {
                    state = c == ec ? 4 : 1, open_at = -1;
                }
            } else if (c == qc) {
                if (state == 0) {
                    state = 2, open_at = i;
                } else {
                    state = 1; /* a quote inside an unquoted value is a character of it */
                }
            } else if (c == ec) {
                state = 4;
            } else {
                state = QS_END(c) ? 0 : 1;
            }
        }
        if (close_at >= 0) break;
    }
    if (close_at < 0 && state >= 2 && state != 4)
        span_nl = QS_SPAN(state == 3 ? n - 1 : n); /* (5: the escaped byte is still to come) */
    if (open_at >= 0) nl_open = count_ends(b, 0, open_at, n);
    Py_ssize_t from = open_at > 0 ? open_at : 0;
    if (close_at >= 0) {
        nl_close = nl_open + count_ends(b, from, close_at, n);
        newlines = nl_close;
    } else {
        newlines = nl_open + count_ends(b, from, n, n);
    }
    Py_END_ALLOW_THREADS;
#undef QS_SPAN
#undef QS_END
    PyBuffer_Release(&buf);
    return Py_BuildValue("iinnnnn", state, span_nl, newlines, open_at, nl_open, close_at,
                         nl_close);
}

static PyMethodDef methods[] = {
    {"encode_rows", py_encode_rows, METH_VARARGS,
     "encode_rows(columns, n, tag, allocate) -> (offsets, data, offset_width)"},
    {"sort_int64_keys", py_sort_int64_keys, METH_VARARGS,
     "sort_int64_keys([(data, offset, desc), ...], n, allocate) -> (n uint64 indices, stable; "
     "whether it saw every key distinct)"},
    {"encode_keys", py_encode_keys, METH_VARARGS,
     "encode_keys(columns, flags, n, allocate) -> (offsets, data, offset_width): each row's key "
     "as bytes in Spanner's key order"},
    {"sort_binary", py_sort_binary, METH_VARARGS,
     "sort_binary(binary column descriptor, n, allocate) -> (n uint64 indices in byte order, "
     "stable; whether every row is distinct)"},
    {"plain_int64s", py_plain_int64s, METH_VARARGS,
     "plain_int64s(string column descriptor, n, allocate) -> int64 data or None"},
    {"plain_dates", py_plain_dates, METH_VARARGS,
     "plain_dates(string column descriptor, n, allocate) -> date32 data or None"},
    {"has_either", py_has_either, METH_VARARGS,
     "has_either(buffer, start, stop, a, b) -> whether bytes [start, stop) hold byte a or b"},
    {"quote_scan", py_quote_scan, METH_VARARGS,
     "quote_scan(buffer, quote, delim, state, span_nl, escape=-1, doubled=1) -> (state, "
     "span_nl, newlines, open_at, nl_open, close_at, nl_close): quoting followed through a "
     "chunk"},
    {"take_binary", py_take_binary, METH_VARARGS,
     "take_binary(chunk descriptors, indices, m, allocate, threads=1, min_part=16384) -> "
     "(offsets, data, offset_width)"},
    {"plain_numerics", py_plain_numerics, METH_VARARGS,
     "plain_numerics(string column descriptor, n, allocate) -> decimal128(38, 9) data or None"},
    {"zulu_timestamps", py_zulu_timestamps, METH_VARARGS,
     "zulu_timestamps(string column descriptor, n, allocate) -> (offsets, data) or None"},
    {"base64_values", py_base64_values, METH_VARARGS,
     "base64_values(string column descriptor, n, allocate) -> (offsets, data) or None"},
    {"offset_timestamps", py_offset_timestamps, METH_VARARGS,
     "offset_timestamps(string column descriptor, n, allocate, naive_ok) -> (offsets, data) "
     "or None"},
    {"list_cells", py_list_cells, METH_VARARGS,
     "list_cells(element descriptor, m, list offsets, validity, n, allocate) -> (offsets, data, "
     "offset_width)"},
    {"bool_values", py_bool_values, METH_VARARGS,
     "bool_values(string column descriptor, n, allocate, words) -> bit-packed data or None"},
    {"json_checks", py_json_checks, METH_VARARGS,
     "json_checks(string column descriptor, n, allocate) -> n flags, 1: ask json.loads"},
    {"json_arrays", py_json_arrays, METH_VARARGS,
     "json_arrays(string column descriptor, n, allocate) -> (list offsets, element offsets, "
     "element data, element validity, element count) or None"},
    {"pg_arrays", py_pg_arrays, METH_VARARGS,
     "pg_arrays(string column descriptor, n, allocate) -> as json_arrays, for PostgreSQL's "
     "array text {a,\"b c\",NULL}"},
    {NULL, NULL, 0, NULL},
};

/* The column kinds, exported as KINDS for loader/native.py (the one kind table). */
static int exec_module(PyObject *m) {
    static const struct {
        const char *name;
        int kind;
    } kinds[] = {
        {"CELLS", KIND_CELLS},     {"STRING", KIND_STRING}, {"INT64", KIND_INT64},
        {"FLOAT64", KIND_FLOAT64}, {"FLOAT32", KIND_FLOAT32}, {"BOOL", KIND_BOOL},
        {"NUMERIC", KIND_NUMERIC}, {"DATE", KIND_DATE},     {"BYTES", KIND_BYTES},
    };
    PyObject *table = PyDict_New();
    if (!table) return -1;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        PyObject *v = PyLong_FromLong(kinds[i].kind);
        if (!v || PyDict_SetItemString(table, kinds[i].name, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(table);
            return -1;
        }
        Py_DECREF(v);
    }
    if (PyModule_AddObject(m, "KINDS", table) < 0) {
        Py_DECREF(table);
        return -1;
    }
#if defined(__SIZEOF_INT128__) && !defined(SPANNER_LOADER_NO_INT128)
    if (PyModule_AddIntConstant(m, "INT128", 1) < 0) return -1;
#else
    if (PyModule_AddIntConstant(m, "INT128", 0) < 0) return -1; /* the portable fallback */
#endif
#ifdef Py_LIMITED_API
    return PyModule_AddIntConstant(m, "LIMITED_API", 1);
#else
    return PyModule_AddIntConstant(m, "LIMITED_API", 0);
#endif
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, (void *)exec_module},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_NOT_USED}, /* no module state; each call works on its own buffers */
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "loader._native",
    "The compiled parts of loader's hot path (optional; see loader/native.py).", 0, methods,
    slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModuleDef_Init(&module); }
