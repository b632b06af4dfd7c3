/* tracing/ids.c - trace and span ids, and the W3C trace-context header formats.
 *
 * Two generators per thread, so that no caller takes a lock: span and trace ids come from
 * wyrand (one word of state, the cheapest step that passes BigCrush; why in ids.h), everything
 * else (run ids, state tokens, the fixed-seed ids of tests) from xoshiro256** (256-bit state,
 * passes BigCrush). Each thread seeds both from getrandom() on first use. A fork()ed child
 * clears the seeded flags of the one thread it has (the forking one; no other thread exists
 * in the child, and threads it creates start unseeded), so a child never repeats its parent's
 * ids. Hand-written because each is a few lines.
 */
#include "ids.h"

#include "base/str.h"

#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

_Thread_local struct weft__rng weft__tls_rng;
_Thread_local bool weft__tls_rng_seeded;
_Thread_local uint64_t weft__tls_id_state WEFT__TLS_HOT;

/* Runs in the child, on the thread that called fork(): the only thread the child has. */
static void
on_fork_child(void)
{
    weft__tls_rng_seeded = false;
    weft__tls_id_state = 0;
}

static void
install_atfork(void)
{
    pthread_atfork(NULL, NULL, on_fork_child);
}

static uint64_t
splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void
weft__rng_seed(struct weft__rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        rng->s[i] = splitmix64(&seed);
    }
}

uint64_t
weft__rng_next(struct weft__rng *rng)
{
    return weft__rng_step(rng);
}

/* 64 bits from getrandom(); without an entropy source, the clock, pid and the thread's stack
 * address, so that concurrent threads and processes still diverge. */
static uint64_t
seed_bits(void)
{
    uint64_t seed = 0;
    struct timespec ts;

    pthread_once(&atfork_once, install_atfork);
    if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed)) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)getpid() ^
               (uint64_t)(uintptr_t)&ts;
    }
    return seed;
}

static void
seed_thread(void)
{
    weft__rng_seed(&weft__tls_rng, seed_bits());
    weft__tls_rng_seeded = true;
}

uint64_t
weft__id_rng_seed(void)
{
    uint64_t seed = seed_bits();
    /* Mixed, so that a weak fallback seed (clock and pid) does not start two threads' states
     * a few steps apart. 0 means "not seeded": a state that reaches 0 is seeded again on the
     * next span (once in 2^64 steps), which is harmless. */
    uint64_t state = splitmix64(&seed);

    weft__tls_id_state = state != 0 ? state : WEFT__WY_P0;
    return weft__tls_id_state;
}

struct weft__rng *
weft__thread_rng_seed(void)
{
    seed_thread();
    return &weft__tls_rng;
}

struct weft__rng *
weft__thread_rng(void)
{
    return weft__thread_rng_fast();
}

static inline void
put_u64(uint8_t *out, uint64_t v)
{
    /* Ids are byte strings; only uniqueness matters, so store the bits in host order. */
    memcpy(out, &v, sizeof(v));
}

void
weft__new_trace_id(struct weft__rng *rng, uint8_t out[WEFT_TRACE_ID_SIZE])
{
    uint64_t hi = 0;
    uint64_t lo = 0;

    do {
        hi = weft__rng_next(rng);
        lo = weft__rng_next(rng);
    } while (hi == 0 && lo == 0);
    put_u64(out, hi);
    put_u64(out + 8, lo);
}

void
weft__new_span_id(struct weft__rng *rng, uint8_t out[WEFT_SPAN_ID_SIZE])
{
    uint64_t v = 0;

    do {
        v = weft__rng_next(rng);
    } while (v == 0);
    put_u64(out, v);
}

static bool
all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

bool
weft_span_context_is_valid(const struct weft_span_context *ctx)
{
    return ctx != NULL && !all_zero(ctx->trace_id, WEFT_TRACE_ID_SIZE) &&
           !all_zero(ctx->span_id, WEFT_SPAN_ID_SIZE);
}

void
weft_hex_encode(const uint8_t *id, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 0x0f];
    }
    out[2 * len] = '\0';
}

static int
lower_hex(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Decode 2 * len lowercase hex characters. */
static bool
hex_decode(const char *s, uint8_t *out, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        int hi = lower_hex(s[2 * i]);
        int lo = lower_hex(s[2 * i + 1]);

        if (hi < 0 || lo < 0) {
            return false;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

weft_err
weft__hex_decode_id(const char *s, size_t len, uint8_t *out, size_t out_len)
{
    if (s == NULL || out == NULL || len != 2 * out_len || !hex_decode(s, out, out_len)) {
        return WEFT_EPARSE;
    }
    return WEFT_OK;
}

weft_err
weft_traceparent_parse(const char *traceparent,
                       const char *tracestate,
                       struct weft_span_context *out)
{
    struct weft_span_context ctx;
    const char *s = traceparent;
    size_t len = 0;
    uint8_t version = 0;

    if (traceparent == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    len = strlen(s);
    weft__trim(&s, &len);
    memset(&ctx, 0, sizeof(ctx));
    /* version "-" trace-id "-" parent-id "-" flags */
    if (len < WEFT_TRACEPARENT_LEN || s[2] != '-' || s[35] != '-' || s[52] != '-') {
        return WEFT_EPARSE;
    }
    if (!hex_decode(s, &version, 1) || version == 0xff) {
        return WEFT_EPARSE;
    }
    /* Version 00 is exactly 55 characters; a later version may append "-" and more. */
    if (version == 0 && len != WEFT_TRACEPARENT_LEN) {
        return WEFT_EPARSE;
    }
    if (len > WEFT_TRACEPARENT_LEN && s[WEFT_TRACEPARENT_LEN] != '-') {
        return WEFT_EPARSE;
    }
    if (!hex_decode(s + 3, ctx.trace_id, WEFT_TRACE_ID_SIZE) ||
        !hex_decode(s + 36, ctx.span_id, WEFT_SPAN_ID_SIZE) ||
        !hex_decode(s + 53, &ctx.trace_flags, 1)) {
        return WEFT_EPARSE;
    }
    if (!weft_span_context_is_valid(&ctx)) {
        return WEFT_EPARSE;
    }
    /* Version 00 defines only the low two flag bits; keep the known ones. */
    if (version == 0) {
        ctx.trace_flags &= (uint8_t)(WEFT_TRACE_FLAG_SAMPLED | WEFT_TRACE_FLAG_RANDOM);
    }
    ctx.is_remote = true;
    if (tracestate != NULL && weft_tracestate_validate(tracestate) == WEFT_OK) {
        ctx.trace_state = tracestate;
    }
    *out = ctx;
    return WEFT_OK;
}

weft_err
weft_traceparent_format(const struct weft_span_context *ctx, char *buf, size_t buf_len)
{
    if (ctx == NULL || buf == NULL || buf_len < WEFT_TRACEPARENT_LEN + 1 ||
        !weft_span_context_is_valid(ctx)) {
        return WEFT_EINVAL;
    }
    memcpy(buf, "00-", 3);
    weft_hex_encode(ctx->trace_id, WEFT_TRACE_ID_SIZE, buf + 3);
    buf[35] = '-';
    weft_hex_encode(ctx->span_id, WEFT_SPAN_ID_SIZE, buf + 36);
    buf[52] = '-';
    weft_hex_encode(&ctx->trace_flags, 1, buf + 53);
    return WEFT_OK;
}

static bool
key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' ||
           c == '/';
}

/* W3C tracestate key: simple-key, or tenant-id "@" system-id. */
static bool
valid_key(const char *k, size_t len)
{
    const char *at = memchr(k, '@', len);
    size_t tenant = at == NULL ? len : (size_t)(at - k);
    size_t system = at == NULL ? 0 : len - tenant - 1;

    if (len == 0) {
        return false;
    }
    if (at == NULL) {
        if (len > 256 || !((k[0] >= 'a' && k[0] <= 'z') || (k[0] >= '0' && k[0] <= '9'))) {
            return false;
        }
    } else if (tenant == 0 || tenant > 241 || system == 0 || system > 14 ||
               !((at[1] >= 'a' && at[1] <= 'z'))) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (k + i != at && !key_char(k[i])) {
            return false;
        }
    }
    return true;
}

/* W3C tracestate value: 1-256 printable ASCII except ',' and '=', not ending in space. */
static bool
valid_value(const char *v, size_t len)
{
    if (len == 0 || len > 256 || v[len - 1] == ' ') {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (v[i] < 0x20 || v[i] > 0x7e || v[i] == ',' || v[i] == '=') {
            return false;
        }
    }
    return true;
}

weft_err
weft_tracestate_validate(const char *tracestate)
{
    const char *p = tracestate;
    size_t members = 0;

    if (tracestate == NULL) {
        return WEFT_EPARSE;
    }
    if (strlen(tracestate) > WEFT_TRACESTATE_MAX_LEN) {
        return WEFT_EPARSE;
    }
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end == NULL ? strlen(p) : (size_t)(end - p);
        const char *member = p;
        const char *eq = NULL;

        weft__trim(&member, &len);
        /* Empty list members (",,") are allowed and skipped. */
        if (len > 0) {
            eq = memchr(member, '=', len);
            if (eq == NULL || !valid_key(member, (size_t)(eq - member)) ||
                !valid_value(eq + 1, len - (size_t)(eq - member) - 1)) {
                return WEFT_EPARSE;
            }
            if (++members > WEFT_TRACESTATE_MAX_KEYS) {
                return WEFT_EPARSE;
            }
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    return WEFT_OK;
}
