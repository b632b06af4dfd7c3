/* tracing/ids.h - id generation (per-thread wyrand for span and trace ids, per-thread
 * xoshiro256** for the rest) and hex helpers. */
#ifndef WEFT_TRACING_IDS_H
#define WEFT_TRACING_IDS_H

#include <stdbool.h>
#include <stdint.h>
#include <weft/trace.h>

/* Thread-local variables of the span hot path (here, sdk.h, span.c). The library is
 * position-independent code, where the default (global-dynamic) model reaches a thread-local
 * variable through __tls_get_addr: the linker relaxes the call away in an executable, but the
 * compiler has already treated each access as a call that clobbers every caller-saved
 * register, and span start spilled its id generator's words around them. With the
 * initial-exec model the variable sits at a fixed offset from the thread pointer. The cost is
 * room in the static TLS block, which a libweft.so loaded with dlopen() takes from glibc's
 * surplus (hundreds of bytes); the variables marked add up to about 80 bytes. */
#if defined(__GNUC__) || defined(__clang__)
#define WEFT__TLS_HOT __attribute__((tls_model("initial-exec")))
#else
#define WEFT__TLS_HOT
#endif

struct weft__rng {
    uint64_t s[4];
};

void weft__rng_seed(struct weft__rng *rng, uint64_t seed);
uint64_t weft__rng_next(struct weft__rng *rng);
/* This thread's generator, seeded on first use and again after fork(). */
struct weft__rng *weft__thread_rng(void);

/* The generator step and this thread's generator, inline for span start (three steps a root
 * span): as calls they cost more than the arithmetic. */
static inline uint64_t
weft__rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t
weft__rng_step(struct weft__rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = weft__rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = weft__rotl(s[3], 45);
    return result;
}

extern _Thread_local struct weft__rng weft__tls_rng;
extern _Thread_local bool weft__tls_rng_seeded; /* cleared in a fork()ed child */
struct weft__rng *weft__thread_rng_seed(void);  /* seed (again) and return weft__tls_rng */

static inline struct weft__rng *
weft__thread_rng_fast(void)
{
    if (!weft__tls_rng_seeded) {
        return weft__thread_rng_seed();
    }
    return &weft__tls_rng;
}

/* Span and trace ids come from a second per-thread generator, wyrand (Wang Yi's, the step of
 * wyhash, also Zig's std.Random.Wyrand): one add and one 64 x 64 -> 128-bit multiply per 64
 * bits, with one word of state that stays in a register across the three steps of a root span.
 * xoshiro256** (above) loads, mixes and stores four words a step: 59 instructions a root span
 * against 23 (callgrind, docs/PERFORMANCE.md, issue 29 part 4). Ids must look random and be
 * unique, not be secret (W3C Trace Context asks for random ids, not cryptographic ones):
 * wyrand passes BigCrush and PractRand, and each thread's state is seeded from getrandom(), so
 * threads and processes walk far-apart points of the 2^64-step cycle. xoshiro256** stays for
 * weft__rng_next(), whose callers (run ids, state tokens) are not on a hot path, and for the
 * fixed-seed ids of tests (weft_provider_options.id_seed). */
/* 0: not seeded (yet, or since a fork) */
extern _Thread_local uint64_t weft__tls_id_state WEFT__TLS_HOT;
/* Seed this thread's weft__tls_id_state from getrandom(). @return the state (never 0). */
uint64_t weft__id_rng_seed(void);

#define WEFT__WY_P0 UINT64_C(0xa0761d6478bd642f)
#define WEFT__WY_P1 UINT64_C(0xe7037ed1a0b428db)

/* The high and low halves of a * b, folded with xor (wyhash's "mum"). */
static inline uint64_t
weft__wymix(uint64_t a, uint64_t b)
{
#if defined(__SIZEOF_INT128__)
    __extension__ typedef unsigned __int128 u128; /* __extension__: C11 has no 128-bit type */
    u128 m = (u128)a * b;

    return (uint64_t)(m >> 64) ^ (uint64_t)m;
#else
    /* Without a 128-bit type: the four 32 x 32-bit partial products (wyhash's fallback). */
    uint64_t ha = a >> 32;
    uint64_t la = a & UINT32_MAX;
    uint64_t hb = b >> 32;
    uint64_t lb = b & UINT32_MAX;
    uint64_t rm0 = ha * lb;
    uint64_t rm1 = hb * la;
    uint64_t rl = la * lb;
    uint64_t t = rl + (rm0 << 32);
    uint64_t carry = t < rl;
    uint64_t lo = t + (rm1 << 32);

    carry += lo < t;
    return (ha * hb + (rm0 >> 32) + (rm1 >> 32) + carry) ^ lo;
#endif
}

/* One wyrand step on a copy of the state (the caller stores it back once). */
static inline uint64_t
weft__id_step(uint64_t *state)
{
    uint64_t s = *state += WEFT__WY_P0;

    return weft__wymix(s, s ^ WEFT__WY_P1);
}

void weft__new_trace_id(struct weft__rng *rng, uint8_t out[WEFT_TRACE_ID_SIZE]);
void weft__new_span_id(struct weft__rng *rng, uint8_t out[WEFT_SPAN_ID_SIZE]);
/* Decode exactly 2 * out_len lowercase hex characters. @return WEFT_OK or WEFT_EPARSE. */
weft_err weft__hex_decode_id(const char *s, size_t len, uint8_t *out, size_t out_len);

#endif /* WEFT_TRACING_IDS_H */
