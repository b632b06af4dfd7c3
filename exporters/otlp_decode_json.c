/* exporters/otlp_decode_json.c - the OTLP JSON decoder of ExportTraceServiceRequest bodies
 * (otlp_decode.h): one pass over the text, straight into the batch, without a JSON tree.
 *
 * Why hand-written: the decoder it replaces built a jansson tree of the whole body
 * (json_loadb) and then walked it: about 50,000 spans/s, against 394,000 for protobuf
 * (bench/ingest_bench.c, 512-span batches of 901 bytes a span), and the tree alone cost more
 * than all of the protobuf decoder's work. jansson has no streaming (SAX) interface, Debian 12
 * ships no yyjson, and simdjson is C++ only, so the bytes are read here, once. Measured in one
 * run (`ingest_bench --batches 100 --runs 5 --only decode:json-jansson-parse`, 2-core VM under
 * load): this decoder 400,000-560,000 spans/s, json_loadb + json_decref of the same body
 * 29,000-41,000, 12-14 times; the old decoder whole, 14 times. jansson stays the project's
 * JSON library everywhere else.
 *
 * The text is checked as jansson's json_loadb(JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)
 * checked it, so that exactly the same bodies are malformed: strict RFC 8259 syntax, UTF-8
 * validated everywhere (no overlong forms, surrogates or code points past U+10FFFF), \u
 * escapes with surrogates in pairs, "\u0000" allowed in strings but not in object keys, no
 * duplicate key in any object (escaped spellings compared decoded), integers within int64
 * and reals within double, nesting at most 2048 deep (jansson's bound), nothing but
 * whitespace after the top-level value, which must be an object or an array (an array is
 * then refused as not a request).
 *
 * The mapping is proto3 JSON with OTLP's exceptions (REFERENCE.md): trace and span ids are hex
 * (either case is accepted), enums are integers (their proto names are accepted too), 64-bit
 * integers are decimal strings or JSON numbers, doubles may be "NaN", "Infinity" or
 * "-Infinity". A member is read under its lowerCamelCase name, else under its proto field
 * name: when both are present the lowerCamelCase one wins wherever it is, even when it is
 * null (null is the same as absent). Unknown members are skipped, whatever they hold. A known
 * member of the wrong JSON type (a string where an object belongs) makes the request
 * malformed, while an id that is not valid hex only rejects its span, as in the protobuf
 * decoder. A key holding "\u0000" is dropped like an empty key; in a span's or an event's name
 * a NUL becomes U+FFFD. The first error in the text wins (syntax, type or cap).
 *
 * Shape: a reader over the bytes (struct jd) with one function per OTLP message, called where
 * the message starts. Scalar members are kept as tokens (struct tok: where a string's bytes
 * are, a number's value) and converted when their object ends, in a fixed order, since a
 * member may come under either name in any order; arrays of messages (spans, attributes,
 * events, links) are decoded as they come, their items gathered in scratch vectors and copied
 * into the arena once their count is known. An AnyValue is a oneof that the previous decoder
 * resolved by precedence, not by position (stringValue, then boolValue, intValue, doubleValue,
 * arrayValue, then bytesValue before kvlistValue at the top and after it when nested): its
 * members are kept as tokens too, an arrayValue or kvlistValue as the position of its text
 * (skipped once, checked), and the chosen one is read again from there. Unknown members and
 * those recorded containers are skipped by an iterative scanner (no recursion on the input's
 * nesting); the recursion of the decoder itself is bounded by the OTLP schema and by
 * WEFT__OTLP_MAX_VALUE_DEPTH.
 *
 * Values struct weft_value cannot hold (a kvlist, a mixed or nested array) are stored as the
 * text json_dumps(JSON_COMPACT | JSON_REAL_PRECISION(17)) gave for the previous decoder's
 * tree, byte for byte: compact, keys of a kvlist in first-seen order with the last value of a
 * repeated key, a key cut at its first NUL, control characters escaped as \u00XX, doubles as
 * %.17g with ".0" added to integral values, NaN and infinities as strings.
 *
 * Memory: everything decoded is in the batch's arena; the scratch vectors, the text of plain
 * values and the set of keys seen (for duplicates; only unknown members' keys go there) count
 * against the batch's cap too, as work memory (weft__otlp_batch_charge), and are freed at the
 * end. Invariants: d->err is sticky; once set, functions return false without reading further.
 */
#include "otlp_decode.h"

#include "base/mem.h"
#include "base/str.h"
#include "base/utf8.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLAG_HAS_IS_REMOTE 0x100u
#define FLAG_IS_REMOTE     0x200u

/* jansson's JSON_PARSER_MAX_DEPTH: arrays and objects nested deeper are malformed. */
#define MAX_DEPTH 2048

enum jtype { J_NONE, J_NULL, J_FALSE, J_TRUE, J_INT, J_REAL, J_STRING, J_OBJECT, J_ARRAY };

/* A JSON value read (a scalar) or passed over (a container, read again from s). */
struct tok {
    enum jtype type; /* J_NONE: the member is absent or null */
    bool has_esc;    /* a string holds escapes: its bytes need decoding */
    const char *s;   /* a string's raw bytes (inside the quotes), a container's first byte */
    size_t len;      /* a string's raw length */
    size_t depth;    /* a container: the nesting depth it starts at */
    int64_t i;
    double x;
};

/* A growable scratch buffer; its growth counts against the batch's cap. */
struct sbuf {
    char *data;
    size_t len;
    size_t cap;
};

struct kentry {
    uint64_t hash;
    uint64_t serial; /* the object the key is in; 0: an empty slot */
    size_t off;      /* the key's bytes in keyset.bytes */
    size_t len;
    size_t value;
};

/* Keys seen, per object (serial): duplicate detection, and the entries of a kvlist. */
struct keyset {
    struct kentry *slots;
    size_t cap;
    size_t count;
    struct sbuf bytes;
};

struct skip_level {
    uint64_t serial;
    bool is_object;
};

struct jd {
    const char *p;
    const char *end;
    const char *start;
    struct weft__otlp_batch *b;
    weft_err err;
    char *why;
    size_t why_len;
    char point;   /* the locale's decimal point, as jansson's strtod wrapper reads it */
    size_t depth; /* arrays and objects open at p */
    uint64_t serial;
    int revisit;         /* > 0: reading again text already checked (no duplicate bookkeeping) */
    struct sbuf str;     /* a decoded string value */
    struct sbuf key;     /* a decoded key */
    struct sbuf num;     /* NUL-terminated copies for strtod and friends */
    struct sbuf text;    /* plain JSON text of a kvlist or mixed array */
    struct sbuf tmp;     /* a kvlist's text rebuilt without repeated keys */
    struct sbuf attrs;   /* struct weft_attr being gathered */
    struct sbuf events;  /* struct weft_event_data */
    struct sbuf links;   /* struct weft_link_data */
    struct sbuf items;   /* the items of a typed array */
    struct sbuf entries; /* struct entry: a kvlist's entries in text */
    struct keyset keys;
    struct skip_level *levels; /* the skipper's stack, MAX_DEPTH + 1 entries */
};

/* A member name of a message: its JSON or proto spelling and what it is. */
struct name {
    const char *s;
    size_t len;
    int id;
    bool is_proto;
};

#define NAME(s, id, is_proto)          \
    {                                  \
        s, sizeof(s) - 1, id, is_proto \
    }

/* A scalar member: state 0 unseen, 1 seen under its proto name, 2 under its JSON name. */
struct slot {
    struct tok t;
    int state;
};

struct obj {
    uint64_t serial;
    uint32_t seen; /* names[] already read: a second one is a duplicate key */
    bool is_first;
};

struct key {
    const char *s;
    size_t len;
};

struct pos {
    const char *p;
    size_t depth;
};

/* ------------------------------------------------------------------------------------------ */
/* Errors and scratch memory                                                                   */

static bool
fail(struct jd *d, const char *what)
{
    if (d->err == WEFT_OK) {
        d->err = WEFT_EPARSE;
        if (d->why != NULL && d->why_len > 0) {
            snprintf(d->why, d->why_len, "malformed OTLP JSON: %s", what);
        }
    }
    return false;
}

/* Malformed JSON text at d->p. */
static bool
syntax(struct jd *d, const char *what)
{
    int line = 1;
    const char *bol = d->start;

    if (d->err != WEFT_OK) {
        return false;
    }
    d->err = WEFT_EPARSE;
    if (d->why == NULL || d->why_len == 0) {
        return false;
    }
    for (const char *q = d->start; q < d->p; q++) {
        if (*q == '\n') {
            line++;
            bol = q + 1;
        }
    }
    snprintf(d->why, d->why_len, "malformed JSON at line %d, column %zu: %s", line,
             (size_t)(d->p - bol) + 1, what);
    return false;
}

static bool
sbuf_reserve(struct jd *d, struct sbuf *b, size_t more)
{
    size_t cap = b->cap == 0 ? 256 : b->cap;
    char *grown = NULL;

    if (more <= b->cap - b->len) {
        return true;
    }
    if (more > SIZE_MAX / 4 - b->len) {
        d->err = WEFT_ELIMIT;
        return false;
    }
    while (cap - b->len < more) {
        cap *= 2;
    }
    if (!weft__otlp_batch_charge(d->b, cap - b->cap, &d->err)) {
        return false;
    }
    grown = weft__realloc(b->data, cap);
    if (grown == NULL) {
        d->err = WEFT_ENOMEM;
        return false;
    }
    b->data = grown;
    b->cap = cap;
    return true;
}

static bool
sbuf_put(struct jd *d, struct sbuf *b, const void *data, size_t len)
{
    if (!sbuf_reserve(d, b, len)) {
        return false;
    }
    if (len > 0) {
        memcpy(b->data + b->len, data, len);
        b->len += len;
    }
    return true;
}

static bool
sbuf_putc(struct jd *d, struct sbuf *b, char c)
{
    return sbuf_put(d, b, &c, 1);
}

/* A copy of scratch bytes [base, len) of @p b in the arena (NULL when there are none); the
 * scratch is cut back to @p base. */
static bool
sbuf_take(struct jd *d, struct sbuf *b, size_t base, void **out)
{
    size_t n = b->len - base;

    *out = NULL;
    if (n > 0) {
        *out = weft__otlp_batch_alloc(d->b, n, &d->err);
        if (*out == NULL) {
            return false;
        }
        memcpy(*out, b->data + base, n);
    }
    b->len = base;
    return true;
}

static uint64_t
hash_key(uint64_t serial, const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull ^ (serial * 0x9e3779b97f4a7c15ull);

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static bool
keyset_grow(struct jd *d)
{
    struct keyset *ks = &d->keys;
    size_t cap = ks->cap == 0 ? 64 : ks->cap * 2;
    struct kentry *slots = NULL;

    if (cap > SIZE_MAX / 4 / sizeof(*slots)) {
        d->err = WEFT_ELIMIT;
        return false;
    }
    if (!weft__otlp_batch_charge(d->b, cap * sizeof(*slots), &d->err)) {
        return false;
    }
    slots = weft__malloc(cap * sizeof(*slots));
    if (slots == NULL) {
        d->err = WEFT_ENOMEM;
        return false;
    }
    memset(slots, 0, cap * sizeof(*slots));
    for (size_t i = 0; i < ks->cap; i++) {
        size_t j = (size_t)ks->slots[i].hash & (cap - 1);

        if (ks->slots[i].serial == 0) {
            continue;
        }
        while (slots[j].serial != 0) {
            j = (j + 1) & (cap - 1);
        }
        slots[j] = ks->slots[i];
    }
    weft__free(ks->slots);
    ks->slots = slots;
    ks->cap = cap;
    return true;
}

/* Add key @p s of object @p serial with @p value: 1 added; 0 it was there (*found gets its
 * value); -1 on error. */
static int
keyset_add(struct jd *d, uint64_t serial, const char *s, size_t len, size_t value, size_t *found)
{
    struct keyset *ks = &d->keys;
    uint64_t h = hash_key(serial, s, len);
    size_t i = 0;

    if (ks->count * 2 >= ks->cap && !keyset_grow(d)) {
        return -1;
    }
    for (i = (size_t)h & (ks->cap - 1); ks->slots[i].serial != 0; i = (i + 1) & (ks->cap - 1)) {
        const struct kentry *e = &ks->slots[i];

        if (e->hash == h && e->serial == serial && e->len == len &&
            (len == 0 || memcmp(ks->bytes.data + e->off, s, len) == 0)) {
            *found = e->value;
            return 0;
        }
    }
    ks->slots[i].hash = h;
    ks->slots[i].serial = serial;
    ks->slots[i].off = ks->bytes.len;
    ks->slots[i].len = len;
    ks->slots[i].value = value;
    ks->count++;
    return sbuf_put(d, &ks->bytes, s, len) ? 1 : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* The lexer                                                                                   */

static inline void
ws(struct jd *d)
{
    while (d->p < d->end && (*d->p == ' ' || *d->p == '\n' || *d->p == '\r' || *d->p == '\t')) {
        d->p++;
    }
}

/* The next byte after whitespace, '\0' at the end. */
static inline char
peek(struct jd *d)
{
    ws(d);
    return d->p < d->end ? *d->p : '\0';
}

static inline int
hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* The four hex digits at @p s (before @p end) as a number; -1 when they are not. */
static long
hex4(const char *s, const char *end)
{
    long v = 0;

    if (end - s < 4) {
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        int h = hex_digit(s[i]);

        if (h < 0) {
            return -1;
        }
        v = v << 4 | h;
    }
    return v;
}

/* Are the 8 bytes at @p q all plain string bytes (ASCII, not a control character, '"' or
 * '\\')? Eight at a time with the "has a zero byte" trick; a false "no" only sends them to the
 * byte loop. */
static inline bool
is_plain8(const char *q)
{
    const uint64_t ones = 0x0101010101010101ull;
    const uint64_t highs = 0x8080808080808080ull;
    uint64_t v = 0;
    uint64_t quote = 0;
    uint64_t slash = 0;
    uint64_t special = 0;

    memcpy(&v, q, sizeof(v));
    quote = v ^ (ones * '"');
    slash = v ^ (ones * '\\');
    special = ((v - ones * 0x20) & ~v) | v | ((quote - ones) & ~quote) | ((slash - ones) & ~slash);

    return (special & highs) == 0;
}

/* At '"': the string's raw bytes into @p t, checked; *has_nul when it holds "\u0000". */
static bool
scan_string(struct jd *d, struct tok *t, bool *has_nul)
{
    const char *open = d->p;
    const char *q = d->p + 1;
    const char *end = d->end;
    bool has_esc = false;
    bool nul = false;

    for (;;) {
        unsigned char c = 0;

        while (end - q >= 8 && is_plain8(q)) {
            q += 8;
        }
        while (q < end && (unsigned char)*q >= 0x20 && (unsigned char)*q < 0x80 && *q != '"' &&
               *q != '\\') {
            q++;
        }
        if (q >= end) {
            d->p = end;
            return syntax(d, "premature end of input in a string");
        }
        c = (unsigned char)*q;
        if (c == '"') {
            break;
        }
        d->p = q;
        if (c == '\\') {
            long u = 0;

            has_esc = true;
            if (end - q < 2) {
                return syntax(d, "premature end of input in a string");
            }
            if (strchr("\"\\/bfnrt", q[1]) != NULL && q[1] != '\0') {
                q += 2;
                continue;
            }
            u = q[1] == 'u' ? hex4(q + 2, end) : -1;
            if (u < 0) {
                return syntax(d, "invalid escape");
            }
            q += 6;
            if (u >= 0xd800 && u <= 0xdbff) {
                long lo = end - q >= 2 && q[0] == '\\' && q[1] == 'u' ? hex4(q + 2, end) : -1;

                if (lo < 0xdc00 || lo > 0xdfff) {
                    return syntax(d, "invalid Unicode escape (a lone surrogate)");
                }
                q += 6;
            } else if (u >= 0xdc00 && u <= 0xdfff) {
                return syntax(d, "invalid Unicode escape (a lone surrogate)");
            }
            nul = nul || u == 0;
            continue;
        }
        if (c < 0x20) {
            return syntax(d, "control character in a string");
        }
        {
            bool is_valid = false;
            size_t n = weft__utf8_seq((const uint8_t *)q, (size_t)(end - q), &is_valid);

            if (!is_valid) {
                return syntax(d, "invalid UTF-8");
            }
            q += n;
        }
    }
    t->type = J_STRING;
    t->s = open + 1;
    t->len = (size_t)(q - (open + 1));
    t->has_esc = has_esc;
    if (has_nul != NULL) {
        *has_nul = nul;
    }
    d->p = q + 1;
    return true;
}

static void
put_utf8(char *out, size_t *o, uint32_t u)
{
    if (u < 0x80) {
        out[(*o)++] = (char)u;
    } else if (u < 0x800) {
        out[(*o)++] = (char)(0xc0 | u >> 6);
        out[(*o)++] = (char)(0x80 | (u & 0x3f));
    } else if (u < 0x10000) {
        out[(*o)++] = (char)(0xe0 | u >> 12);
        out[(*o)++] = (char)(0x80 | ((u >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (u & 0x3f));
    } else {
        out[(*o)++] = (char)(0xf0 | u >> 18);
        out[(*o)++] = (char)(0x80 | ((u >> 12) & 0x3f));
        out[(*o)++] = (char)(0x80 | ((u >> 6) & 0x3f));
        out[(*o)++] = (char)(0x80 | (u & 0x3f));
    }
}

/* The decoded bytes of string token @p t: its raw bytes when it has no escapes, else decoded
 * into @p into (valid until @p into is used again), NUL-terminated. The token was checked by
 * scan_string: every escape is whole. */
static bool
str_bytes(struct jd *d, const struct tok *t, struct sbuf *into, const char **s, size_t *len)
{
    const char *in = t->s;
    size_t o = 0;

    if (!t->has_esc) {
        *s = t->s;
        *len = t->len;
        return true;
    }
    into->len = 0;
    if (!sbuf_reserve(d, into, t->len + 1)) { /* an escape is never shorter than its bytes */
        return false;
    }
    for (size_t i = 0; i < t->len;) {
        uint32_t u = 0;

        if (in[i] != '\\') {
            into->data[o++] = in[i++];
            continue;
        }
        switch (in[i + 1]) {
        case 'b':
            into->data[o++] = '\b';
            break;
        case 'f':
            into->data[o++] = '\f';
            break;
        case 'n':
            into->data[o++] = '\n';
            break;
        case 'r':
            into->data[o++] = '\r';
            break;
        case 't':
            into->data[o++] = '\t';
            break;
        case 'u':
            u = (uint32_t)hex4(in + i + 2, in + t->len);
            if (u >= 0xd800 && u <= 0xdbff) {
                i += 6;
                u = 0x10000 + ((u - 0xd800) << 10) +
                    ((uint32_t)hex4(in + i + 2, in + t->len) - 0xdc00);
            }
            put_utf8(into->data, &o, u);
            i += 4;
            break;
        default: /* '"', '\\', '/' */
            into->data[o++] = in[i + 1];
            break;
        }
        i += 2;
    }
    into->data[o] = '\0';
    into->len = o;
    *s = into->data;
    *len = o;
    return true;
}

/* jansson reads one byte past a number or a literal and puts it back, but a NUL byte put back
 * is lost: "[1\0,2]" was [1,2]. The same bodies stay valid. */
static inline const char *
skip_lost_nul(const char *q, const char *end)
{
    return q < end && *q == '\0' ? q + 1 : q;
}

/* A JSON number at d->p, as jansson reads one: an integer (no fraction, no exponent) must fit
 * int64; a real must not overflow a double. */
static bool
scan_number(struct jd *d, struct tok *t)
{
    const char *q = d->p;
    const char *e = d->end;
    bool is_neg = false;
    bool is_real = false;
    bool is_over = false;
    uint64_t n = 0;

    if (*q == '-') {
        is_neg = true;
        q++;
    }
    if (q >= e || *q < '0' || *q > '9') {
        return syntax(d, "invalid token");
    }
    if (*q == '0') {
        q++;
        if (q < e && *q >= '0' && *q <= '9') {
            return syntax(d, "invalid token (a leading zero)");
        }
    } else {
        for (; q < e && *q >= '0' && *q <= '9'; q++) {
            unsigned digit = (unsigned)(*q - '0');

            is_over = is_over || n > (UINT64_MAX - digit) / 10;
            n = n * 10 + digit;
        }
    }
    if (q < e && *q == '.') {
        q++;
        if (q >= e || *q < '0' || *q > '9') {
            return syntax(d, "invalid token");
        }
        while (q < e && *q >= '0' && *q <= '9') {
            q++;
        }
        is_real = true;
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < e && (*q == '+' || *q == '-')) {
            q++;
        }
        if (q >= e || *q < '0' || *q > '9') {
            return syntax(d, "invalid token");
        }
        while (q < e && *q >= '0' && *q <= '9') {
            q++;
        }
        is_real = true;
    }
    if (!is_real) {
        if (is_over || n > (is_neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX)) {
            return syntax(d, is_neg ? "too big negative integer" : "too big integer");
        }
        t->type = J_INT;
        t->i = !is_neg ? (int64_t)n : n == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)n;
    } else {
        size_t len = (size_t)(q - d->p);
        char *dot = NULL;

        d->num.len = 0;
        if (!sbuf_put(d, &d->num, d->p, len) || !sbuf_putc(d, &d->num, '\0')) {
            return false;
        }
        dot = d->point != '.' ? strchr(d->num.data, '.') : NULL;
        if (dot != NULL) {
            *dot = d->point;
        }
        errno = 0;
        t->x = strtod(d->num.data, NULL);
        if ((t->x == HUGE_VAL || t->x == -HUGE_VAL) && errno == ERANGE) {
            return syntax(d, "real number overflow");
        }
        t->type = J_REAL;
    }
    d->p = skip_lost_nul(q, d->end);
    return true;
}

static bool
scan_word(struct jd *d, struct tok *t, const char *word, size_t len, enum jtype type)
{
    const char *q = d->p + len;

    if ((size_t)(d->end - d->p) < len || memcmp(d->p, word, len) != 0 ||
        (q < d->end && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')))) {
        return syntax(d, "invalid token");
    }
    t->type = type;
    d->p = skip_lost_nul(q, d->end);
    return true;
}

static bool skip_value(struct jd *d);

/* The value at d->p as a token: a scalar is read; a container is passed over (checked) and
 * its position kept, to be read again where it is used. */
static bool
read_tok(struct jd *d, struct tok *t)
{
    memset(t, 0, sizeof(*t));
    switch (peek(d)) {
    case '"':
        return scan_string(d, t, NULL);
    case '{':
    case '[':
        t->type = *d->p == '{' ? J_OBJECT : J_ARRAY;
        t->s = d->p;
        t->depth = d->depth;
        return skip_value(d);
    case 't':
        return scan_word(d, t, "true", 4, J_TRUE);
    case 'f':
        return scan_word(d, t, "false", 5, J_FALSE);
    case 'n':
        return scan_word(d, t, "null", 4, J_NULL);
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        return scan_number(d, t);
    case '\0':
        if (d->p >= d->end) {
            return syntax(d, "premature end of input");
        }
        return syntax(d, "unexpected token");
    default:
        return syntax(d, "unexpected token");
    }
}

/* At '"': a key, decoded (valid until the next key), and the ':' after it. */
static bool
read_key(struct jd *d, struct key *k)
{
    struct tok t;
    bool has_nul = false;

    if (peek(d) != '"') {
        return syntax(d, "string or '}' expected");
    }
    if (!scan_string(d, &t, &has_nul) || !str_bytes(d, &t, &d->key, &k->s, &k->len)) {
        return false;
    }
    if (has_nul) {
        return syntax(d, "NUL byte in object key not supported");
    }
    if (peek(d) != ':') {
        return syntax(d, "':' expected");
    }
    d->p++;
    return true;
}

/* A key of object @p serial that is not one of its message's members: it may not repeat. */
static bool
key_unique(struct jd *d, uint64_t serial, const struct key *k)
{
    size_t found = 0;
    int r = 0;

    if (d->revisit > 0) {
        return true; /* this text was checked when it was first passed over */
    }
    r = keyset_add(d, serial, k->s, k->len, 0, &found);
    return r > 0 || (r == 0 && syntax(d, "duplicate object key"));
}

static bool
open_level(struct jd *d)
{
    if (d->depth >= MAX_DEPTH) {
        return syntax(d, "maximum parsing depth reached");
    }
    d->depth++;
    d->levels[d->depth].is_object = *d->p == '{';
    d->levels[d->depth].serial = ++d->serial;
    d->p++;
    return true;
}

/* Pass over the value at d->p, checking it, without recursion. */
static bool
skip_value(struct jd *d)
{
    size_t base = d->depth;
    bool is_first = true;
    char c = peek(d);
    struct tok t;

    if (c != '{' && c != '[') {
        return read_tok(d, &t);
    }
    if (d->levels == NULL) {
        d->levels = weft__malloc((MAX_DEPTH + 1) * sizeof(*d->levels));
        if (d->levels == NULL) {
            d->err = WEFT_ENOMEM;
            return false;
        }
    }
    if (!open_level(d)) {
        return false;
    }
    for (;;) {
        const struct skip_level *lv = &d->levels[d->depth];
        char close = lv->is_object ? '}' : ']';

        c = peek(d);
        /* At the top of the loop: just opened, or after an item (a ',' is consumed below). */
        if (c == close) {
            d->p++;
            d->depth--;
            if (d->depth == base) {
                return true;
            }
            is_first = false;
            continue;
        }
        if (!is_first) {
            if (c != ',') {
                return syntax(d, lv->is_object ? "',' or '}' expected" : "',' or ']' expected");
            }
            d->p++;
        }
        is_first = false;
        if (lv->is_object) {
            struct key k;

            if (!read_key(d, &k) || !key_unique(d, lv->serial, &k)) {
                return false;
            }
        }
        c = peek(d);
        if (c == '{' || c == '[') {
            if (!open_level(d)) {
                return false;
            }
            is_first = true;
        } else if (!read_tok(d, &t)) {
            return false;
        }
    }
}

/* At '{' of a message. */
static bool
obj_begin(struct jd *d, struct obj *o)
{
    if (d->depth >= MAX_DEPTH) {
        return syntax(d, "maximum parsing depth reached");
    }
    d->depth++;
    d->p++;
    o->serial = ++d->serial;
    o->seen = 0;
    o->is_first = true;
    return true;
}

/* At '[' of an array. */
static bool
arr_begin(struct jd *d)
{
    if (d->depth >= MAX_DEPTH) {
        return syntax(d, "maximum parsing depth reached");
    }
    d->depth++;
    d->p++;
    return true;
}

/* The next member: 1 with its key read and the ':' after it; 0 at the end of the object
 * (consumed); -1 on error. */
static int
obj_next(struct jd *d, struct obj *o, struct key *k)
{
    char c = peek(d);

    if (c == '}' && d->p < d->end) {
        d->p++;
        d->depth--;
        return 0;
    }
    if (!o->is_first) {
        if (c != ',') {
            syntax(d, "',' or '}' expected");
            return -1;
        }
        d->p++;
    } else if (c != '"') {
        syntax(d, "string or '}' expected");
        return -1;
    }
    o->is_first = false;
    return read_key(d, k) ? 1 : -1;
}

/* Which of @p names key @p k is: its id (*is_proto when under its proto name), -1 when it is
 * none (an unknown member, to skip), -2 on error (a duplicate). */
static int
lookup(struct jd *d,
       struct obj *o,
       const struct key *k,
       const struct name *names,
       size_t count,
       bool *is_proto)
{
    for (size_t i = 0; i < count; i++) {
        if (names[i].len == k->len && memcmp(names[i].s, k->s, k->len) == 0) {
            if ((o->seen & (1u << i)) != 0) {
                syntax(d, "duplicate object key");
                return -2;
            }
            o->seen |= 1u << i;
            *is_proto = names[i].is_proto;
            return names[i].id;
        }
    }
    return key_unique(d, o->serial, k) ? -1 : -2;
}

/* 1: an element follows; 0: the end of the array (consumed); -1 on error. */
static int
arr_next(struct jd *d, bool *is_first)
{
    char c = peek(d);

    if (c == ']' && d->p < d->end) {
        d->p++;
        d->depth--;
        return 0;
    }
    if (!*is_first) {
        if (c != ',') {
            syntax(d, "',' or ']' expected");
            return -1;
        }
        d->p++;
    }
    *is_first = false;
    return 1;
}

/* A member's value that must be @p open ('[' or '{'): *is_present when it is (not consumed);
 * null is consumed, as absent; anything else fails with @p what. */
static bool
container_here(struct jd *d, char open, const char *what, bool *is_present)
{
    char c = peek(d);
    struct tok t;

    *is_present = c == open;
    if (*is_present) {
        return true;
    }
    if (c == 'n') {
        return read_tok(d, &t);
    }
    return fail(d, what);
}

static bool
slot_read(struct jd *d, struct slot *s, bool is_proto)
{
    struct tok t;

    if (!read_tok(d, &t)) {
        return false;
    }
    if (is_proto && s->state == 2) {
        return true; /* the JSON name wins */
    }
    if (t.type == J_NULL) {
        t.type = J_NONE;
    }
    s->t = t;
    s->state = is_proto ? 1 : 2;
    return true;
}

/* Read recorded container @p t again: enter() moves there, leave() back. */
static void
enter(struct jd *d, const struct tok *t, struct pos *saved)
{
    saved->p = d->p;
    saved->depth = d->depth;
    d->p = t->s;
    d->depth = t->depth;
    d->revisit++;
}

static void
leave(struct jd *d, const struct pos *saved)
{
    d->p = saved->p;
    d->depth = saved->depth;
    d->revisit--;
}

/* ------------------------------------------------------------------------------------------ */
/* Scalars                                                                                     */

/* A NUL-terminated copy of string token @p t: C functions then see it cut at its first NUL,
 * as the previous decoder's json_string_value() did. */
static const char *
tok_cstr(struct jd *d, const struct tok *t)
{
    const char *s = NULL;
    size_t len = 0;

    if (!str_bytes(d, t, &d->str, &s, &len)) {
        return NULL;
    }
    d->num.len = 0;
    if (!sbuf_put(d, &d->num, s, len) || !sbuf_putc(d, &d->num, '\0')) {
        return NULL;
    }
    return d->num.data;
}

/* An unsigned 64-bit integer from a number or a decimal string; 0 when absent. */
static bool
tok_u64(struct jd *d, const struct tok *t, const char *what, uint64_t *out)
{
    const char *s = NULL;
    size_t len = 0;
    uint64_t n = 0;

    *out = 0;
    switch (t->type) {
    case J_NONE:
        return true;
    case J_INT:
        *out = (uint64_t)t->i;
        return true;
    case J_REAL:
        if (t->x >= 0 && t->x < 18446744073709551616.0) {
            *out = (uint64_t)t->x;
            return true;
        }
        return fail(d, what);
    case J_STRING:
        break;
    default:
        return fail(d, what);
    }
    if (!str_bytes(d, t, &d->str, &s, &len)) {
        return false;
    }
    /* strtoull's reading of a string that starts with a digit, up to a NUL. */
    if (len == 0 || s[0] < '0' || s[0] > '9') {
        return fail(d, what);
    }
    for (size_t i = 0; i < len && s[i] != '\0'; i++) {
        unsigned digit = (unsigned)(s[i] - '0');

        if (digit > 9 || n > (UINT64_MAX - digit) / 10) {
            return fail(d, what);
        }
        n = n * 10 + digit;
    }
    *out = n;
    return true;
}

static bool
tok_u32(struct jd *d, const struct tok *t, const char *what, uint32_t *out)
{
    uint64_t n = 0;

    if (!tok_u64(d, t, what, &n)) {
        return false;
    }
    *out = (uint32_t)n;
    return true;
}

/* A signed 64-bit integer (intValue) from a number or a decimal string. */
static bool
tok_i64(struct jd *d, const struct tok *t, int64_t *out)
{
    static const char what[] = "intValue is neither a number nor a decimal string";
    const char *s = NULL;
    char *end = NULL;
    long long n = 0;

    if (t->type == J_INT) {
        *out = t->i;
        return true;
    }
    if (t->type == J_REAL && fabs(t->x) < 9.2e18) {
        *out = (int64_t)t->x;
        return true;
    }
    if (t->type != J_STRING) {
        return fail(d, what);
    }
    /* The usual form, "-123", at most 18 bytes: no overflow possible. */
    if (!t->has_esc && t->len > 0 && t->len <= 18) {
        size_t i = t->s[0] == '-';
        int64_t v = 0;

        for (; i < t->len && t->s[i] >= '0' && t->s[i] <= '9'; i++) {
            v = v * 10 + (t->s[i] - '0');
        }
        if (i == t->len && t->len > (size_t)(t->s[0] == '-')) {
            *out = t->s[0] == '-' ? -v : v;
            return true;
        }
    }
    s = tok_cstr(d, t);
    if (s == NULL) {
        return false;
    }
    if (s[0] == '\0') {
        return fail(d, what);
    }
    errno = 0;
    n = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return fail(d, what);
    }
    *out = (int64_t)n;
    return true;
}

static bool
tok_f64(struct jd *d, const struct tok *t, double *out)
{
    static const char what[] = "doubleValue is not a number";
    const char *s = NULL;
    char *end = NULL;

    if (t->type == J_INT || t->type == J_REAL) {
        *out = t->type == J_INT ? (double)t->i : t->x;
        return true;
    }
    if (t->type != J_STRING) {
        return fail(d, what);
    }
    s = tok_cstr(d, t);
    if (s == NULL) {
        return false;
    }
    if (strcmp(s, "NaN") == 0) {
        *out = NAN;
    } else if (strcmp(s, "Infinity") == 0) {
        *out = INFINITY;
    } else if (strcmp(s, "-Infinity") == 0) {
        *out = -INFINITY;
    } else if (s[0] != '\0') {
        *out = strtod(s, &end);
        return *end == '\0' || fail(d, what);
    } else {
        return fail(d, what);
    }
    return true;
}

/* An enum: an integer (out of range: 0), or one of @p names (its proto name). */
static bool
tok_enum(struct jd *d, const struct tok *t, const char *const *names, size_t count, int *out)
{
    const char *s = NULL;

    *out = 0;
    if (t->type == J_NONE) {
        return true;
    }
    if (t->type == J_INT) {
        *out = t->i >= 0 && (uint64_t)t->i < count ? (int)t->i : 0;
        return true;
    }
    if (t->type == J_STRING) {
        s = tok_cstr(d, t);
        if (s == NULL) {
            return false;
        }
        for (size_t i = 0; i < count; i++) {
            if (strcmp(s, names[i]) == 0) {
                *out = (int)i;
                return true;
            }
        }
    }
    return fail(d, "an enum is neither an integer nor a known name");
}

/* An id member into @p out; *state 1 valid, 0 absent or empty, -1 not hex of the right size
 * (its span is rejected, not the request). */
static bool
tok_id(struct jd *d, const struct tok *t, uint8_t *out, size_t size, int *state)
{
    const char *s = NULL;
    size_t len = 0;

    memset(out, 0, size);
    *state = 0;
    if (t->type == J_NONE) {
        return true;
    }
    *state = -1;
    if (t->type != J_STRING) {
        return true;
    }
    if (!str_bytes(d, t, &d->str, &s, &len)) {
        return false;
    }
    if (len == 0) {
        *state = 0;
        return true;
    }
    if (len != 2 * size) {
        return true;
    }
    for (size_t i = 0; i < size; i++) {
        int hi = hex_digit(s[2 * i]);
        int lo = hex_digit(s[2 * i + 1]);

        if (hi < 0 || lo < 0) {
            memset(out, 0, size);
            return true;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    *state = 1;
    return true;
}

/* A string member copied into the batch (left as it is when absent). */
static bool
tok_str(struct jd *d, const struct tok *t, const char *what, const char **out, size_t *out_len)
{
    const char *s = NULL;
    size_t len = 0;

    if (t->type == J_NONE) {
        return true;
    }
    if (t->type != J_STRING) {
        return fail(d, what);
    }
    if (!str_bytes(d, t, &d->str, &s, &len)) {
        return false;
    }
    if (out_len != NULL) {
        *out_len = len;
    }
    *out = weft__otlp_batch_str(d->b, s, len, &d->err);
    return *out != NULL;
}

/* A span's or an event's name: NUL bytes ("\u0000") escaped (weft__otlp_batch_name). */
static bool
tok_name(struct jd *d, const struct tok *t, const char *what, const char **out)
{
    const char *s = NULL;
    size_t len = 0;

    if (t->type == J_NONE) {
        return true;
    }
    if (t->type != J_STRING) {
        return fail(d, what);
    }
    if (!str_bytes(d, t, &d->str, &s, &len)) {
        return false;
    }
    *out = weft__otlp_batch_name(d->b, s, len, &d->err);
    return *out != NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* AnyValue                                                                                    */

/* The members of an AnyValue, in the nested precedence (the top level has bytes before
 * kvlist). */
enum { AV_STRING, AV_BOOL, AV_INT, AV_DOUBLE, AV_ARRAY, AV_KVLIST, AV_BYTES, AV_KINDS };

static const struct name any_names[] = {
    NAME("stringValue", AV_STRING, false), NAME("string_value", AV_STRING, true),
    NAME("intValue", AV_INT, false),       NAME("int_value", AV_INT, true),
    NAME("doubleValue", AV_DOUBLE, false), NAME("double_value", AV_DOUBLE, true),
    NAME("boolValue", AV_BOOL, false),     NAME("bool_value", AV_BOOL, true),
    NAME("arrayValue", AV_ARRAY, false),   NAME("array_value", AV_ARRAY, true),
    NAME("kvlistValue", AV_KVLIST, false), NAME("kvlist_value", AV_KVLIST, true),
    NAME("bytesValue", AV_BYTES, false),   NAME("bytes_value", AV_BYTES, true),
};

struct anyv {
    struct slot v[AV_KINDS];
};

static inline bool
has(const struct anyv *av, int kind)
{
    return av->v[kind].t.type != J_NONE;
}

/* At '{': an AnyValue's members as tokens. */
static bool
parse_any(struct jd *d, struct anyv *av)
{
    struct obj o;
    struct key k;
    int r = 0;

    memset(av, 0, sizeof(*av));
    if (!obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m = lookup(d, &o, &k, any_names, sizeof(any_names) / sizeof(any_names[0]), &is_proto);

        if (m == -2 || !(m >= 0 ? slot_read(d, &av->v[m], is_proto) : skip_value(d))) {
            return false;
        }
    }
    return r == 0;
}

/* The scalar kind an AnyValue holds (its first present of string, bool, int, double), -1 when
 * none. */
static int
scalar_kind(const struct anyv *av)
{
    for (int k = AV_STRING; k <= AV_DOUBLE; k++) {
        if (has(av, k)) {
            return k;
        }
    }
    return -1;
}

static bool
decode_scalar(struct jd *d, const struct anyv *av, int kind, struct weft_value *out)
{
    const struct tok *t = &av->v[kind].t;

    switch (kind) {
    case AV_STRING:
        out->type = WEFT_VALUE_STRING;
        out->len = 0;
        return tok_str(d, t, "stringValue is not a string", &out->u.str, &out->len);
    case AV_BOOL:
        out->type = WEFT_VALUE_BOOL;
        out->u.b = t->type == J_TRUE;
        return t->type == J_TRUE || t->type == J_FALSE || fail(d, "boolValue is not a boolean");
    case AV_INT:
        out->type = WEFT_VALUE_INT;
        return tok_i64(d, t, &out->u.i);
    default:
        out->type = WEFT_VALUE_DOUBLE;
        return tok_f64(d, t, &out->u.d);
    }
}

/* --- plain JSON text, as json_dumps(JSON_COMPACT | JSON_REAL_PRECISION(17)) wrote it ------ */

static bool
emit_str(struct jd *d, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t run = 0;

    if (!sbuf_putc(d, &d->text, '"')) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *shortcut = NULL;
        char esc[6] = {'\\', 'u', '0', '0', '0', '0'};

        if (c >= 0x20 && c != '"' && c != '\\') {
            continue;
        }
        if (!sbuf_put(d, &d->text, s + run, i - run)) {
            return false;
        }
        run = i + 1;
        shortcut = c == '"'    ? "\\\""
                   : c == '\\' ? "\\\\"
                   : c == '\b' ? "\\b"
                   : c == '\f' ? "\\f"
                   : c == '\n' ? "\\n"
                   : c == '\r' ? "\\r"
                   : c == '\t' ? "\\t"
                               : NULL;
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 0xf];
        if (!(shortcut != NULL ? sbuf_put(d, &d->text, shortcut, 2)
                               : sbuf_put(d, &d->text, esc, 6))) {
            return false;
        }
    }
    return sbuf_put(d, &d->text, s + run, len - run) && sbuf_putc(d, &d->text, '"');
}

static bool
emit_tok_str(struct jd *d, const struct tok *t)
{
    const char *s = NULL;
    size_t len = 0;

    return str_bytes(d, t, &d->str, &s, &len) && emit_str(d, s, len);
}

/* jansson's jsonp_dtostr() at precision 17 (weft__fmt_json_real()). */
static bool
emit_double(struct jd *d, double x)
{
    char buf[WEFT__JSON_REAL_MAX];
    size_t len = 0;

    if (isnan(x)) {
        return sbuf_put(d, &d->text, "\"NaN\"", 5);
    }
    if (isinf(x)) {
        return x > 0 ? sbuf_put(d, &d->text, "\"Infinity\"", 10)
                     : sbuf_put(d, &d->text, "\"-Infinity\"", 11);
    }
    len = weft__fmt_json_real(x, d->point, buf);
    return sbuf_put(d, &d->text, buf, len);
}

static bool plain_list(struct jd *d, const struct tok *list, bool is_kvlist, int depth);

/* An AnyValue's plain JSON; null when it holds nothing. */
static bool
plain_any(struct jd *d, const struct anyv *av, int depth)
{
    char buf[24];
    int kind = 0;
    int64_t i = 0;
    double x = 0;
    const struct tok *t = NULL;

    while (kind < AV_KINDS && !has(av, kind)) {
        kind++;
    }
    t = kind < AV_KINDS ? &av->v[kind].t : NULL;
    switch (kind) {
    case AV_STRING:
    case AV_BYTES:
        if (t->type != J_STRING) {
            return fail(d, kind == AV_STRING ? "stringValue" : "bytesValue");
        }
        return emit_tok_str(d, t);
    case AV_BOOL:
        if (t->type != J_TRUE && t->type != J_FALSE) {
            return fail(d, "boolValue");
        }
        return t->type == J_TRUE ? sbuf_put(d, &d->text, "true", 4)
                                 : sbuf_put(d, &d->text, "false", 5);
    case AV_INT:
        if (!tok_i64(d, t, &i)) {
            return false;
        }
        snprintf(buf, sizeof(buf), "%lld", (long long)i);
        return sbuf_put(d, &d->text, buf, strlen(buf));
    case AV_DOUBLE:
        return tok_f64(d, t, &x) && emit_double(d, x);
    case AV_ARRAY:
    case AV_KVLIST:
        return plain_list(d, t, kind == AV_KVLIST, depth);
    default:
        return sbuf_put(d, &d->text, "null", 4);
    }
}

/* The AnyValue at d->p as plain JSON; a null one is unset when @p is_null_unset (a kvlist
 * entry's value), and not an object otherwise (an array item). */
static bool
plain_any_here(struct jd *d, int depth, bool is_null_unset)
{
    struct anyv av;
    struct tok t;
    char c = 0;

    if (depth > WEFT__OTLP_MAX_VALUE_DEPTH) {
        return fail(d, "attribute value nested too deeply");
    }
    c = peek(d);
    if (c == 'n' && is_null_unset) {
        return read_tok(d, &t) && sbuf_put(d, &d->text, "null", 4);
    }
    if (c != '{') {
        return fail(d, "an AnyValue is not an object");
    }
    return parse_any(d, &av) && plain_any(d, &av, depth);
}

/* A kvlist entry in text: "key" and ':' at [start, value), its value at [value, end). */
struct entry {
    size_t start;
    size_t value;
    size_t end;
    size_t last; /* the entry whose value this key takes (the last with the same key) */
    bool is_first;
};

static const struct name entry_names[] = {NAME("key", 0, false), NAME("value", 1, false)};

/* One entry of a kvlist at d->p into the text: "key":value. */
static bool
plain_entry(struct jd *d, uint64_t serial, int depth, bool *has_dups)
{
    struct entry e = {d->text.len, 0, 0, 0, true};
    struct slot key = {{J_NONE, false, NULL, 0, 0, 0, 0}, 0};
    const char *s = "";
    size_t len = 0;
    size_t found = 0;
    size_t index = (d->entries.len) / sizeof(struct entry);
    bool has_value = false;
    int r = 0;

    if (peek(d) == '{') {
        struct obj o;
        struct key k;

        if (!obj_begin(d, &o)) {
            return false;
        }
        while ((r = obj_next(d, &o, &k)) > 0) {
            bool is_proto = false;
            int m = lookup(d, &o, &k, entry_names, 2, &is_proto);
            bool ok = true;

            if (m == 0) {
                ok = slot_read(d, &key, false);
            } else if (m == 1) {
                has_value = true;
                ok = plain_any_here(d, depth + 1, true);
            } else {
                ok = m == -1 && skip_value(d);
            }
            if (!ok) {
                return false;
            }
        }
        if (r < 0) {
            return false;
        }
    } else if (!skip_value(d)) { /* not an object: no key, no value */
        return false;
    }
    if (!has_value) { /* as an unset value: the depth still counts */
        if (depth + 1 > WEFT__OTLP_MAX_VALUE_DEPTH) {
            return fail(d, "attribute value nested too deeply");
        }
        if (!sbuf_put(d, &d->text, "null", 4)) {
            return false;
        }
    }
    if (key.t.type != J_NONE && key.t.type != J_STRING) {
        return fail(d, "a kvlistValue entry's key is not a string");
    }
    if (key.t.type == J_STRING && !str_bytes(d, &key.t, &d->str, &s, &len)) {
        return false;
    }
    len = len > 0 && memchr(s, '\0', len) != NULL ? strlen(s) : len; /* a C string's key */
    /* The key goes before the value already written: build it after, then rotate it in. */
    e.value = d->text.len;
    if (!emit_str(d, s, len) || !sbuf_putc(d, &d->text, ':')) {
        return false;
    }
    {
        size_t key_len = d->text.len - e.value;
        size_t value_len = e.value - e.start;

        if (!sbuf_reserve(d, &d->tmp, key_len)) {
            return false;
        }
        memcpy(d->tmp.data, d->text.data + e.value, key_len);
        memmove(d->text.data + e.start + key_len, d->text.data + e.start, value_len);
        memcpy(d->text.data + e.start, d->tmp.data, key_len);
        e.value = e.start + key_len;
    }
    e.end = d->text.len;
    e.last = index;
    r = keyset_add(d, serial, s, len, index, &found);
    if (r < 0) {
        return false;
    }
    if (r == 0) {
        struct entry *first = (struct entry *)(void *)d->entries.data + found;

        first->last = index;
        e.is_first = false;
        *has_dups = true;
    }
    return sbuf_put(d, &d->entries, &e, sizeof(e));
}

/* A kvlist written with a key more than once: each key once, where it first was, with the
 * value it last had (what jansson's json_object_set did). */
static bool
dedup_entries(struct jd *d, size_t open, size_t first_entry)
{
    const struct entry *es = (const struct entry *)(void *)d->entries.data;
    size_t n = d->entries.len / sizeof(struct entry);
    bool is_first = true;

    d->tmp.len = 0;
    if (!sbuf_putc(d, &d->tmp, '{')) {
        return false;
    }
    for (size_t i = first_entry; i < n; i++) {
        const struct entry *v = &es[es[i].last];

        if (!es[i].is_first) {
            continue;
        }
        if ((!is_first && !sbuf_putc(d, &d->tmp, ',')) ||
            !sbuf_put(d, &d->tmp, d->text.data + es[i].start, es[i].value - es[i].start) ||
            !sbuf_put(d, &d->tmp, d->text.data + v->value, v->end - v->value)) {
            return false;
        }
        is_first = false;
    }
    if (!sbuf_putc(d, &d->tmp, '}')) {
        return false;
    }
    d->text.len = open;
    return sbuf_put(d, &d->text, d->tmp.data, d->tmp.len);
}

static const struct name list_names[] = {NAME("values", 0, false)};

/* An ArrayValue or KeyValueList (recorded at @p list) as a JSON array or object. */
static bool
plain_list(struct jd *d, const struct tok *list, bool is_kvlist, int depth)
{
    size_t open = d->text.len;
    size_t first_entry = d->entries.len / sizeof(struct entry);
    uint64_t serial = ++d->serial;
    bool has_dups = false;
    struct pos saved;
    struct obj o;
    struct key k;
    int r = 0;

    if (list->type != J_OBJECT) {
        return fail(d, "an arrayValue or kvlistValue is not an object");
    }
    if (!sbuf_putc(d, &d->text, is_kvlist ? '{' : '[')) {
        return false;
    }
    enter(d, list, &saved);
    if (!obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        bool is_present = false;
        bool is_first = true;
        size_t count = 0;
        int m = lookup(d, &o, &k, list_names, 1, &is_proto);

        if (m < 0) {
            if (m == -2 || !skip_value(d)) {
                return false;
            }
            continue;
        }
        if (!container_here(d, '[', "values is not an array", &is_present)) {
            return false;
        }
        if (!is_present) {
            continue;
        }
        if (!arr_begin(d)) {
            return false;
        }
        while ((r = arr_next(d, &is_first)) > 0) {
            bool ok = (count++ == 0 || sbuf_putc(d, &d->text, ',')) &&
                      (is_kvlist ? plain_entry(d, serial, depth, &has_dups)
                                 : plain_any_here(d, depth + 1, false));

            if (!ok) {
                return false;
            }
        }
        if (r < 0) {
            return false;
        }
    }
    if (r < 0) {
        return false;
    }
    leave(d, &saved);
    if (!sbuf_putc(d, &d->text, is_kvlist ? '}' : ']')) {
        return false;
    }
    if (has_dups && !dedup_entries(d, open, first_entry)) {
        return false;
    }
    d->entries.len = first_entry * sizeof(struct entry);
    return true;
}

/* The plain JSON of list @p list stored as a string value. */
static bool
value_text(struct jd *d, const struct tok *list, bool is_kvlist, int depth, struct weft_value *out)
{
    d->text.len = 0;
    if (!plain_list(d, list, is_kvlist, depth)) {
        return false;
    }
    out->type = WEFT_VALUE_STRING;
    out->len = d->text.len;
    out->u.str = weft__otlp_batch_str(d->b, d->text.data, d->text.len, &d->err);
    d->text.len = 0;
    return out->u.str != NULL;
}

/* An attribute's arrayValue (recorded at @p list): an array of one scalar type becomes a
 * weft array; anything else its plain JSON text. */
static bool
decode_array(struct jd *d, const struct tok *list, struct weft_value *out)
{
    static const weft_value_type types[] = {WEFT_VALUE_STRING_ARRAY, WEFT_VALUE_BOOL_ARRAY,
                                            WEFT_VALUE_INT_ARRAY, WEFT_VALUE_DOUBLE_ARRAY};
    static const size_t sizes[] = {sizeof(char *), sizeof(bool), sizeof(int64_t), sizeof(double)};
    int kind = AV_STRING; /* an empty array: no item says its type */
    size_t n = 0;
    bool is_mixed = false;
    void *items = NULL;
    struct pos saved;
    struct obj o;
    struct key k;
    int r = 0;

    out->type = WEFT_VALUE_STRING_ARRAY;
    out->len = 0;
    out->u.strs = NULL;
    if (list->type != J_OBJECT) {
        return true; /* as before: no "values" to read, an empty array */
    }
    d->items.len = 0;
    enter(d, list, &saved);
    if (!obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        bool is_present = false;
        bool is_first = true;
        int m = lookup(d, &o, &k, list_names, 1, &is_proto);

        if (m < 0) {
            if (m == -2 || !skip_value(d)) {
                return false;
            }
            continue;
        }
        if (!container_here(d, '[', "values is not an array", &is_present)) {
            return false;
        }
        if (!is_present) {
            continue;
        }
        if (!arr_begin(d)) {
            return false;
        }
        while ((r = arr_next(d, &is_first)) > 0) {
            struct anyv av;
            struct weft_value v;
            int item_kind = -1;

            if (is_mixed || peek(d) != '{') {
                is_mixed = true;
                if (!skip_value(d)) {
                    return false;
                }
                continue;
            }
            if (!parse_any(d, &av)) {
                return false;
            }
            item_kind = scalar_kind(&av);
            kind = n == 0 ? item_kind : kind;
            if (item_kind < 0 || item_kind != kind) {
                is_mixed = true;
                continue;
            }
            if (!decode_scalar(d, &av, kind, &v) || !sbuf_put(d, &d->items, &v.u, sizes[kind])) {
                return false;
            }
            n++;
        }
        if (r < 0) {
            return false;
        }
    }
    if (r < 0) {
        return false;
    }
    leave(d, &saved);
    if (is_mixed) {
        d->items.len = 0;
        return value_text(d, list, false, 1, out);
    }
    if (!sbuf_take(d, &d->items, 0, &items)) {
        return false;
    }
    out->type = types[kind];
    out->len = n;
    out->u.strs = items; /* the union's pointer members share storage */
    return true;
}

/* The AnyValue at d->p into @p out; *is_set false when it holds nothing (or is null). */
static bool
decode_any(struct jd *d, struct weft_value *out, bool *is_set)
{
    struct anyv av;
    struct tok t;
    char c = peek(d);
    int kind = -1;

    *is_set = false;
    if (c == 'n') {
        return read_tok(d, &t) && (t.type == J_NULL || fail(d, "an AnyValue is not an object"));
    }
    if (c != '{') {
        return fail(d, "an AnyValue is not an object");
    }
    if (!parse_any(d, &av)) {
        return false;
    }
    kind = scalar_kind(&av);
    *is_set = true;
    if (kind >= 0) {
        return decode_scalar(d, &av, kind, out);
    }
    if (has(&av, AV_ARRAY)) {
        return decode_array(d, &av.v[AV_ARRAY].t, out);
    }
    /* bytesValue is base64 already in JSON: kept as its text. */
    if (has(&av, AV_BYTES)) {
        out->type = WEFT_VALUE_STRING;
        out->len = 0;
        return tok_str(d, &av.v[AV_BYTES].t, "bytesValue is not a string", &out->u.str, &out->len);
    }
    if (has(&av, AV_KVLIST)) {
        return value_text(d, &av.v[AV_KVLIST].t, true, 0, out);
    }
    *is_set = false;
    return true;
}

static const struct name kv_names[] = {NAME("key", 0, false), NAME("value", 1, false)};

/* One KeyValue at d->p; *is_kept false for an empty key, a key holding a NUL, or no value. */
static bool
decode_kv(struct jd *d, struct weft_attr *a, bool *is_kept)
{
    struct slot key = {{J_NONE, false, NULL, 0, 0, 0, 0}, 0};
    bool is_set = false;
    const char *s = NULL;
    size_t len = 0;
    struct obj o;
    struct key k;
    int r = 0;

    memset(a, 0, sizeof(*a));
    *is_kept = false;
    if (peek(d) != '{') {
        return fail(d, "an attribute is not a {key, value} object");
    }
    if (!obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m = lookup(d, &o, &k, kv_names, 2, &is_proto);
        bool ok = m == 0   ? slot_read(d, &key, false)
                  : m == 1 ? decode_any(d, &a->value, &is_set)
                           : m == -1 && skip_value(d);

        if (!ok) {
            return false;
        }
    }
    if (r < 0) {
        return false;
    }
    if (key.t.type != J_NONE && key.t.type != J_STRING) {
        return fail(d, "an attribute is not a {key, value} object");
    }
    if (key.t.type == J_STRING && !str_bytes(d, &key.t, &d->str, &s, &len)) {
        return false;
    }
    /* A key holding a NUL byte ("\u0000") would read as another key as a C string. */
    if (!is_set || len == 0 || memchr(s, '\0', len) != NULL) {
        return true;
    }
    a->key = weft__otlp_batch_str(d->b, s, len, &d->err);
    *is_kept = a->key != NULL;
    return a->key != NULL;
}

/* The attributes array at d->p (or null). */
static bool
decode_attrs(struct jd *d, const struct weft_attr **out, size_t *count, uint32_t *dropped)
{
    size_t base = d->attrs.len;
    bool is_present = false;
    bool is_first = true;
    void *copy = NULL;
    int r = 0;

    *count = 0;
    if (!container_here(d, '[', "attributes is not an array", &is_present) || !is_present) {
        return d->err == WEFT_OK;
    }
    if (!arr_begin(d)) {
        return false;
    }
    while ((r = arr_next(d, &is_first)) > 0) {
        struct weft_attr a;
        bool is_kept = false;

        if (!decode_kv(d, &a, &is_kept)) {
            return false;
        }
        if (!is_kept) {
            (*dropped)++;
        } else if (!sbuf_put(d, &d->attrs, &a, sizeof(a))) {
            return false;
        }
    }
    if (r < 0) {
        return false;
    }
    *count = (d->attrs.len - base) / sizeof(struct weft_attr);
    if (!sbuf_take(d, &d->attrs, base, &copy)) {
        return false;
    }
    *out = copy;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Span                                                                                        */

enum { E_TIME, E_NAME, E_DROPPED, E_SLOTS, E_ATTRS = E_SLOTS };

static const struct name event_names[] = {
    NAME("timeUnixNano", E_TIME, false),  NAME("name", E_NAME, false),
    NAME("attributes", E_ATTRS, false),   NAME("droppedAttributesCount", E_DROPPED, false),
    NAME("time_unix_nano", E_TIME, true), NAME("dropped_attributes_count", E_DROPPED, true),
};

static bool
decode_event(struct jd *d, struct weft_event_data *ev)
{
    struct slot s[E_SLOTS];
    uint32_t dropped = 0;
    struct obj o;
    struct key k;
    int r = 0;

    memset(ev, 0, sizeof(*ev));
    memset(s, 0, sizeof(s));
    ev->name = "";
    if (peek(d) != '{') {
        return fail(d, "an event is not an object");
    }
    if (!obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m =
            lookup(d, &o, &k, event_names, sizeof(event_names) / sizeof(event_names[0]), &is_proto);
        bool ok = m == -2        ? false
                  : m == E_ATTRS ? decode_attrs(d, &ev->attrs, &ev->attr_count, &ev->dropped_attrs)
                  : m >= 0       ? slot_read(d, &s[m], is_proto)
                                 : skip_value(d);

        if (!ok) {
            return false;
        }
    }
    if (r < 0 || !tok_u64(d, &s[E_TIME].t, "timeUnixNano", &ev->time_ns) ||
        !tok_name(d, &s[E_NAME].t, "event name", &ev->name) ||
        !tok_u32(d, &s[E_DROPPED].t, "droppedAttributesCount", &dropped)) {
        return false;
    }
    ev->dropped_attrs += dropped;
    return true;
}

enum { L_TRACE, L_SPAN, L_STATE, L_DROPPED, L_FLAGS, L_SLOTS, L_ATTRS = L_SLOTS };

static const struct name link_names[] = {
    NAME("traceId", L_TRACE, false),
    NAME("spanId", L_SPAN, false),
    NAME("traceState", L_STATE, false),
    NAME("attributes", L_ATTRS, false),
    NAME("droppedAttributesCount", L_DROPPED, false),
    NAME("flags", L_FLAGS, false),
    NAME("trace_id", L_TRACE, true),
    NAME("span_id", L_SPAN, true),
    NAME("trace_state", L_STATE, true),
    NAME("dropped_attributes_count", L_DROPPED, true),
};

/* A link; *is_kept is false when its ids are unusable (dropped and counted by the caller). */
static bool
decode_link(struct jd *d, struct weft_link_data *link, bool *is_kept)
{
    struct slot s[L_SLOTS];
    uint32_t flags = 0;
    uint32_t dropped = 0;
    int has_trace = 0;
    int has_span = 0;
    struct obj o;
    struct key k;
    int r = 0;

    memset(link, 0, sizeof(*link));
    memset(s, 0, sizeof(s));
    if (peek(d) != '{') {
        return fail(d, "a link is not an object");
    }
    if (!obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m =
            lookup(d, &o, &k, link_names, sizeof(link_names) / sizeof(link_names[0]), &is_proto);
        bool ok = m == -2 ? false
                  : m == L_ATTRS
                      ? decode_attrs(d, &link->attrs, &link->attr_count, &link->dropped_attrs)
                  : m >= 0 ? slot_read(d, &s[m], is_proto)
                           : skip_value(d);

        if (!ok) {
            return false;
        }
    }
    if (r < 0 || !tok_id(d, &s[L_TRACE].t, link->trace_id, WEFT_TRACE_ID_SIZE, &has_trace) ||
        !tok_id(d, &s[L_SPAN].t, link->span_id, WEFT_SPAN_ID_SIZE, &has_span) ||
        !tok_str(d, &s[L_STATE].t, "traceState", &link->trace_state, NULL) ||
        !tok_u32(d, &s[L_DROPPED].t, "droppedAttributesCount", &dropped) ||
        !tok_u32(d, &s[L_FLAGS].t, "flags", &flags)) {
        return false;
    }
    link->dropped_attrs += dropped;
    link->trace_flags = (uint8_t)(flags & 0xff);
    link->is_remote = (flags & FLAG_HAS_IS_REMOTE) != 0 && (flags & FLAG_IS_REMOTE) != 0;
    *is_kept = weft__otlp_link_ids_ok(link, has_trace == 1, has_span == 1);
    return true;
}

static bool
decode_events(struct jd *d, struct weft_span_data *span)
{
    size_t base = d->events.len;
    bool is_present = false;
    bool is_first = true;
    void *copy = NULL;
    int r = 0;

    if (!container_here(d, '[', "events is not an array", &is_present) || !is_present) {
        return d->err == WEFT_OK;
    }
    if (!arr_begin(d)) {
        return false;
    }
    while ((r = arr_next(d, &is_first)) > 0) {
        struct weft_event_data ev;

        if (!decode_event(d, &ev) || !sbuf_put(d, &d->events, &ev, sizeof(ev))) {
            return false;
        }
    }
    if (r < 0) {
        return false;
    }
    span->event_count = (d->events.len - base) / sizeof(struct weft_event_data);
    if (!sbuf_take(d, &d->events, base, &copy)) {
        return false;
    }
    span->events = copy;
    return true;
}

static bool
decode_links(struct jd *d, struct weft_span_data *span)
{
    size_t base = d->links.len;
    bool is_present = false;
    bool is_first = true;
    void *copy = NULL;
    int r = 0;

    if (!container_here(d, '[', "links is not an array", &is_present) || !is_present) {
        return d->err == WEFT_OK;
    }
    if (!arr_begin(d)) {
        return false;
    }
    while ((r = arr_next(d, &is_first)) > 0) {
        struct weft_link_data ln;
        bool is_kept = false;

        if (!decode_link(d, &ln, &is_kept)) {
            return false;
        }
        if (!is_kept) {
            span->dropped_links++;
        } else if (!sbuf_put(d, &d->links, &ln, sizeof(ln))) {
            return false;
        }
    }
    if (r < 0) {
        return false;
    }
    span->link_count = (d->links.len - base) / sizeof(struct weft_link_data);
    if (!sbuf_take(d, &d->links, base, &copy)) {
        return false;
    }
    span->links = copy;
    return true;
}

static const struct name status_names[] = {NAME("code", 0, false), NAME("message", 1, false)};

static bool
decode_status(struct jd *d, struct weft_span_data *span)
{
    static const char *const codes[] = {"STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"};
    struct slot s[2];
    bool is_present = false;
    int code = 0;
    struct obj o;
    struct key k;
    int r = 0;

    memset(s, 0, sizeof(s));
    if (!container_here(d, '{', "status is not an object", &is_present) || !is_present) {
        return d->err == WEFT_OK;
    }
    if (!obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m = lookup(d, &o, &k, status_names, 2, &is_proto);

        if (m == -2 || !(m >= 0 ? slot_read(d, &s[m], is_proto) : skip_value(d))) {
            return false;
        }
    }
    if (r < 0 || !tok_enum(d, &s[0].t, codes, 3, &code) ||
        !tok_str(d, &s[1].t, "status message", &span->status_message, NULL)) {
        return false;
    }
    span->status_code = (weft_status_code)code;
    return true;
}

enum {
    S_TRACE,
    S_SPAN,
    S_PARENT,
    S_STATE,
    S_NAME,
    S_KIND,
    S_START,
    S_END,
    S_DROPPED_ATTRS,
    S_DROPPED_EVENTS,
    S_DROPPED_LINKS,
    S_FLAGS,
    S_SLOTS,
    S_ATTRS = S_SLOTS,
    S_EVENTS,
    S_LINKS,
    S_STATUS
};

/* Most frequent first: the JSON names, then the proto names. */
static const struct name span_names[] = {
    NAME("traceId", S_TRACE, false),
    NAME("spanId", S_SPAN, false),
    NAME("parentSpanId", S_PARENT, false),
    NAME("name", S_NAME, false),
    NAME("kind", S_KIND, false),
    NAME("startTimeUnixNano", S_START, false),
    NAME("endTimeUnixNano", S_END, false),
    NAME("attributes", S_ATTRS, false),
    NAME("events", S_EVENTS, false),
    NAME("links", S_LINKS, false),
    NAME("status", S_STATUS, false),
    NAME("flags", S_FLAGS, false),
    NAME("traceState", S_STATE, false),
    NAME("droppedAttributesCount", S_DROPPED_ATTRS, false),
    NAME("droppedEventsCount", S_DROPPED_EVENTS, false),
    NAME("droppedLinksCount", S_DROPPED_LINKS, false),
    NAME("trace_id", S_TRACE, true),
    NAME("span_id", S_SPAN, true),
    NAME("parent_span_id", S_PARENT, true),
    NAME("trace_state", S_STATE, true),
    NAME("start_time_unix_nano", S_START, true),
    NAME("end_time_unix_nano", S_END, true),
    NAME("dropped_attributes_count", S_DROPPED_ATTRS, true),
    NAME("dropped_events_count", S_DROPPED_EVENTS, true),
    NAME("dropped_links_count", S_DROPPED_LINKS, true),
};

/* The scalars of a span, once all its members are read. */
static bool
span_scalars(struct jd *d, const struct slot *s, struct weft_span_data *span, int ids[3])
{
    static const char *const kinds[] = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL",
                                        "SPAN_KIND_SERVER",      "SPAN_KIND_CLIENT",
                                        "SPAN_KIND_PRODUCER",    "SPAN_KIND_CONSUMER"};
    uint32_t flags = 0;
    uint32_t dropped[3] = {0, 0, 0};
    int kind = 0;

    if (!tok_id(d, &s[S_TRACE].t, span->trace_id, WEFT_TRACE_ID_SIZE, &ids[0]) ||
        !tok_id(d, &s[S_SPAN].t, span->span_id, WEFT_SPAN_ID_SIZE, &ids[1]) ||
        !tok_id(d, &s[S_PARENT].t, span->parent_span_id, WEFT_SPAN_ID_SIZE, &ids[2]) ||
        !tok_str(d, &s[S_STATE].t, "traceState", &span->trace_state, NULL) ||
        !tok_name(d, &s[S_NAME].t, "name is not a string", &span->name) ||
        !tok_enum(d, &s[S_KIND].t, kinds, 6, &kind) ||
        !tok_u64(d, &s[S_START].t, "startTimeUnixNano", &span->start_time_ns) ||
        !tok_u64(d, &s[S_END].t, "endTimeUnixNano", &span->end_time_ns) ||
        !tok_u32(d, &s[S_DROPPED_ATTRS].t, "droppedAttributesCount", &dropped[0]) ||
        !tok_u32(d, &s[S_DROPPED_EVENTS].t, "droppedEventsCount", &dropped[1]) ||
        !tok_u32(d, &s[S_DROPPED_LINKS].t, "droppedLinksCount", &dropped[2]) ||
        !tok_u32(d, &s[S_FLAGS].t, "flags", &flags)) {
        return false;
    }
    span->kind = (weft_span_kind)kind;
    span->dropped_attrs += dropped[0];
    span->dropped_events += dropped[1];
    span->dropped_links += dropped[2];
    span->trace_flags = (uint8_t)(flags & 0xff);
    span->parent_is_remote = (flags & FLAG_HAS_IS_REMOTE) != 0 && (flags & FLAG_IS_REMOTE) != 0;
    return true;
}

static bool
decode_span(struct jd *d, const struct weft_resource *resource, const struct weft_scope *scope)
{
    struct weft_span_data *span = NULL;
    struct slot s[S_SLOTS];
    int ids[3] = {0, 0, 0};
    weft_err err = WEFT_OK;
    struct obj o;
    struct key k;
    int r = 0;

    if (peek(d) != '{') {
        return fail(d, "a span is not an object");
    }
    span = weft__otlp_batch_alloc(d->b, sizeof(*span), &d->err);
    if (span == NULL || !obj_begin(d, &o)) {
        return false;
    }
    memset(s, 0, sizeof(s));
    span->name = "";
    span->resource = resource;
    span->scope = scope;
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m =
            lookup(d, &o, &k, span_names, sizeof(span_names) / sizeof(span_names[0]), &is_proto);
        bool ok = true;

        switch (m) {
        case -2:
            return false;
        case -1:
            ok = skip_value(d);
            break;
        case S_ATTRS:
            ok = decode_attrs(d, &span->attrs, &span->attr_count, &span->dropped_attrs);
            break;
        case S_EVENTS:
            ok = decode_events(d, span);
            break;
        case S_LINKS:
            ok = decode_links(d, span);
            break;
        case S_STATUS:
            ok = decode_status(d, span);
            break;
        default:
            ok = slot_read(d, &s[m], is_proto);
            break;
        }
        if (!ok) {
            return false;
        }
    }
    if (r < 0 || !span_scalars(d, s, span, ids)) {
        return false;
    }
    span->has_parent = ids[2] == 1;
    if (!span->has_parent) {
        span->parent_is_remote = false;
    }
    err = weft__otlp_batch_add(d->b, span, ids[0] == 1, ids[1] == 1, ids[2] >= 0);
    if (err != WEFT_OK) {
        d->err = err;
    }
    return err == WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Envelopes                                                                                   */

static bool decode_resource_spans(struct jd *d);
static bool decode_scope_spans(struct jd *d, const struct weft_resource *resource);

/* The array at d->p (null: none) of resourceSpans (@p resource NULL), scopeSpans (@p scope
 * NULL) or spans. */
static bool
decode_list(struct jd *d,
            const char *what,
            const struct weft_resource *resource,
            const struct weft_scope *scope)
{
    bool is_present = false;
    bool is_first = true;
    int r = 0;

    if (!container_here(d, '[', what, &is_present) || !is_present) {
        return d->err == WEFT_OK;
    }
    if (!arr_begin(d)) {
        return false;
    }
    while ((r = arr_next(d, &is_first)) > 0) {
        bool ok = resource == NULL ? decode_resource_spans(d)
                  : scope == NULL  ? decode_scope_spans(d, resource)
                                   : decode_span(d, resource, scope);

        if (!ok) {
            return false;
        }
    }
    return r == 0;
}

/* A list member seen under its proto name first and recorded as @p t, read now that its
 * object ended without the JSON name. */
static bool
decode_recorded_list(struct jd *d,
                     const struct tok *t,
                     const char *what,
                     const struct weft_resource *resource)
{
    struct pos saved;
    bool ok = false;

    if (t->type == J_NONE || t->type == J_NULL) {
        return true;
    }
    if (t->type != J_ARRAY) {
        return fail(d, what);
    }
    enter(d, t, &saved);
    ok = decode_list(d, what, resource, NULL);
    leave(d, &saved);
    return ok;
}

static const struct name scope_names[] = {NAME("name", 0, false), NAME("version", 1, false),
                                          NAME("attributes", 2, false)};

static bool
decode_scope(struct jd *d, struct weft_scope *scope)
{
    struct slot s[2];
    bool is_present = false;
    uint32_t dropped = 0;
    struct obj o;
    struct key k;
    int r = 0;

    memset(s, 0, sizeof(s));
    if (!container_here(d, '{', "scope is not an object", &is_present) || !is_present) {
        return d->err == WEFT_OK;
    }
    if (!obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m = lookup(d, &o, &k, scope_names, 3, &is_proto);
        bool ok = m == -2  ? false
                  : m == 2 ? decode_attrs(d, &scope->attrs, &scope->attr_count, &dropped)
                  : m >= 0 ? slot_read(d, &s[m], is_proto)
                           : skip_value(d);

        if (!ok) {
            return false;
        }
    }
    return r == 0 && tok_str(d, &s[0].t, "scope name", &scope->name, NULL) &&
           tok_str(d, &s[1].t, "scope version", &scope->version, NULL);
}

static const struct name scope_spans_names[] = {NAME("scope", 0, false), NAME("spans", 1, false),
                                                NAME("schemaUrl", 2, false),
                                                NAME("schema_url", 2, true)};

static bool
decode_scope_spans(struct jd *d, const struct weft_resource *resource)
{
    struct weft_scope *scope = NULL;
    struct slot schema = {{J_NONE, false, NULL, 0, 0, 0, 0}, 0};
    struct obj o;
    struct key k;
    int r = 0;

    if (peek(d) != '{') {
        return fail(d, "a scopeSpans entry is not an object");
    }
    scope = weft__otlp_batch_alloc(d->b, sizeof(*scope), &d->err);
    if (scope == NULL || !obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m = lookup(d, &o, &k, scope_spans_names, 4, &is_proto);
        bool ok = m == -2  ? false
                  : m == 0 ? decode_scope(d, scope)
                  : m == 1 ? decode_list(d, "spans is not an array", resource, scope)
                  : m == 2 ? slot_read(d, &schema, is_proto)
                           : skip_value(d);

        if (!ok) {
            return false;
        }
    }
    return r == 0 && tok_str(d, &schema.t, "schemaUrl", &scope->schema_url, NULL);
}

static const struct name resource_names[] = {NAME("attributes", 0, false),
                                             NAME("droppedAttributesCount", 1, false),
                                             NAME("dropped_attributes_count", 1, true)};

static bool
decode_resource(struct jd *d, struct weft_resource *res)
{
    struct slot dropped_slot = {{J_NONE, false, NULL, 0, 0, 0, 0}, 0};
    bool is_present = false;
    uint32_t dropped = 0;
    struct obj o;
    struct key k;
    int r = 0;

    if (!container_here(d, '{', "resource is not an object", &is_present) || !is_present) {
        return d->err == WEFT_OK;
    }
    if (!obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m = lookup(d, &o, &k, resource_names, 3, &is_proto);
        bool ok = m == -2  ? false
                  : m == 0 ? decode_attrs(d, &res->attrs, &res->attr_count, &res->dropped_attrs)
                  : m == 1 ? slot_read(d, &dropped_slot, is_proto)
                           : skip_value(d);

        if (!ok) {
            return false;
        }
    }
    if (r < 0 || !tok_u32(d, &dropped_slot.t, "droppedAttributesCount", &dropped)) {
        return false;
    }
    res->dropped_attrs += dropped;
    return true;
}

static const struct name resource_spans_names[] = {
    NAME("resource", 0, false), NAME("scopeSpans", 1, false), NAME("schemaUrl", 2, false),
    NAME("scope_spans", 1, true), NAME("schema_url", 2, true)};

static bool
decode_resource_spans(struct jd *d)
{
    static const char what[] = "scopeSpans is not an array";
    struct weft_resource *res = NULL;
    struct slot schema = {{J_NONE, false, NULL, 0, 0, 0, 0}, 0};
    struct tok proto = {J_NONE, false, NULL, 0, 0, 0, 0};
    bool has_json_name = false;
    struct obj o;
    struct key k;
    int r = 0;

    if (peek(d) != '{') {
        return fail(d, "a resourceSpans entry is not an object");
    }
    res = weft__otlp_batch_alloc(d->b, sizeof(*res), &d->err);
    if (res == NULL || !obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m = lookup(d, &o, &k, resource_spans_names, 5, &is_proto);
        bool ok = true;

        if (m == -2) {
            return false;
        }
        if (m == 0) {
            ok = decode_resource(d, res);
        } else if (m == 1 && !is_proto) {
            has_json_name = true;
            ok = decode_list(d, what, res, NULL);
        } else if (m == 1) {
            /* scope_spans: read at the end, unless scopeSpans comes (it wins) */
            ok = has_json_name ? skip_value(d) : read_tok(d, &proto);
        } else if (m == 2) {
            ok = slot_read(d, &schema, is_proto);
        } else {
            ok = skip_value(d);
        }
        if (!ok) {
            return false;
        }
    }
    return r == 0 && (has_json_name || decode_recorded_list(d, &proto, what, res)) &&
           tok_str(d, &schema.t, "schemaUrl", &res->schema_url, NULL);
}

static const struct name request_names[] = {NAME("resourceSpans", 0, false),
                                            NAME("resource_spans", 0, true)};

static bool
decode_request(struct jd *d)
{
    static const char what[] = "resourceSpans is not an array";
    struct tok proto = {J_NONE, false, NULL, 0, 0, 0, 0};
    bool has_json_name = false;
    struct obj o;
    struct key k;
    int r = 0;

    if (!obj_begin(d, &o)) {
        return false;
    }
    while ((r = obj_next(d, &o, &k)) > 0) {
        bool is_proto = false;
        int m = lookup(d, &o, &k, request_names, 2, &is_proto);
        bool ok = true;

        if (m == -2) {
            return false;
        }
        if (m == 0 && !is_proto) {
            has_json_name = true;
            ok = decode_list(d, what, NULL, NULL);
        } else if (m == 0 && !has_json_name) {
            ok = read_tok(d, &proto);
        } else {
            ok = skip_value(d);
        }
        if (!ok) {
            return false;
        }
    }
    return r == 0 && (has_json_name || decode_recorded_list(d, &proto, what, NULL));
}

static void
sbuf_free(struct sbuf *b)
{
    weft__free(b->data);
}

weft_err
weft__otlp_decode_json(
    const char *data, size_t len, struct weft__otlp_batch *batch, char *why, size_t why_len)
{
    struct jd d;
    size_t mark = 0;
    char top = 0;
    struct sbuf *bufs[] = {&d.str,    &d.key,   &d.num,   &d.text,    &d.tmp,       &d.attrs,
                           &d.events, &d.links, &d.items, &d.entries, &d.keys.bytes};

    if (batch == NULL || (data == NULL && len > 0)) {
        return WEFT_EINVAL;
    }
    if (why != NULL && why_len > 0) {
        why[0] = '\0';
    }
    memset(&d, 0, sizeof(d));
    d.start = data != NULL ? data : "";
    d.p = d.start;
    d.end = d.start + len;
    d.b = batch;
    d.why = why;
    d.why_len = why_len;
    d.point = localeconv()->decimal_point[0];
    /* The scratch memory counts against the cap while it lives. */
    mark = batch->json_bytes;
    top = peek(&d);
    switch (top) {
    case '{':
        decode_request(&d);
        break;
    case '[':
        skip_value(&d);
        break;
    default:
        syntax(&d, "'[' or '{' expected");
        break;
    }
    ws(&d);
    if (d.err == WEFT_OK && d.p < d.end) {
        syntax(&d, "end of file expected");
    }
    if (d.err == WEFT_OK && top == '[') {
        fail(&d, "the request is not a JSON object");
    }
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++) {
        sbuf_free(bufs[i]);
    }
    weft__free(d.keys.slots);
    weft__free(d.levels);
    batch->json_bytes = mark;
    if (d.err == WEFT_ELIMIT && why != NULL && why_len > 0) {
        snprintf(why, why_len, "the decoded request would exceed %zu bytes", batch->max_bytes);
    }
    return d.err;
}
