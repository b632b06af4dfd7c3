/* runtime/dist/sign.h - HMAC-SHA256 signatures on the task and result messages of distributed
 * runs (docs/distributed.md, "Trust").
 *
 * Without them, anyone who can publish to the broker can have every worker run a command: a
 * task message carries the whole workflow, command steps' argv included. With a key configured
 * the orchestrator signs each task, a worker signs each result, and each side refuses what it
 * cannot verify. The signature covers the body and the properties and headers weft reads
 * (weft__dist_canonical); it travels in the AMQP header "weft-signature" as
 * "v1=<key id>:<64 hex digits>", where the key id is the first 8 hex digits of SHA-256 of the
 * key: it names the key without revealing it, so a verifier picks the current or the previous
 * key (rotation) and an operator can tell which key a sender used.
 *
 * Keys come from the environment: WEFT_DIST_KEY (the secret) or WEFT_DIST_KEY_FILE (a file
 * holding it, refused when group or others may access it), and WEFT_DIST_KEY_PREVIOUS or
 * WEFT_DIST_KEY_PREVIOUS_FILE, accepted for verification and never used to sign. A key never
 * reaches a log line, a span, an error text or a file.
 *
 * Replay is not prevented: a message captured from the broker verifies when published again
 * (delivery is at least once anyway, and the orchestrator keeps the first result per task).
 *
 * Thread-safety: keys are read-only once loaded; every function may run on any thread.
 */
#ifndef WEFT_RUNTIME_DIST_SIGN_H
#define WEFT_RUNTIME_DIST_SIGN_H

#include "base/buf.h"
#include "runtime/dist/broker.h"

#include <stdbool.h>
#include <stddef.h>
#include <weft/common.h>

#define WEFT__SIGN_HEADER  "weft-signature"
#define WEFT__SIGN_LEN     (3 + 8 + 1 + 64 + 1) /* "v1=" id ":" hex NUL */
#define WEFT__SIGN_KEY_MIN 16u                  /* bytes: a shorter secret is refused */
#define WEFT__SIGN_KEY_MAX 4096u

struct weft__dist_key {
    unsigned char *secret; /* NULL: no key */
    size_t len;
    char id[9]; /* first 8 hex digits of SHA-256(secret) */
};

struct weft__dist_keys {
    struct weft__dist_key current;  /* signs and verifies */
    struct weft__dist_key previous; /* verifies only */
};

/* Why a message was refused (the reason label of weft_dist_messages_refused_total). */
typedef enum {
    WEFT__VERIFY_OK = 0,
    WEFT__VERIFY_UNSIGNED,    /* no signature header */
    WEFT__VERIFY_MALFORMED,   /* a header that is not "v1=<8 hex>:<64 hex>" */
    WEFT__VERIFY_UNKNOWN_KEY, /* signed with a key this process does not hold */
    WEFT__VERIFY_FORGED       /* the MAC does not match: body or headers changed, or forged */
} weft__verify_result;

/* "ok", "unsigned", "malformed_signature", "unknown_key", "forged". */
const char *weft__verify_reason(weft__verify_result v);

/* Load the keys from the environment into @p keys (zeroed first). No variable set: WEFT_OK
 * with no key (weft__dist_keys_enabled() false). @return WEFT_OK, WEFT_EINVAL (both a key and
 * its file set, an unreadable file, a file group or others may access, a key shorter than
 * WEFT__SIGN_KEY_MIN or longer than WEFT__SIGN_KEY_MAX bytes, a previous key without a
 * current one: the reason in @p err, never the key), WEFT_ENOMEM.
 * Ownership: caller cleans @p keys up (weft__dist_keys_cleanup), also on failure. */
weft_err weft__dist_keys_from_env(struct weft__dist_keys *keys, char *err, size_t err_len);

/* Set a key from memory (tests, and the environment loader). @p previous may be NULL.
 * @return WEFT_OK, WEFT_EINVAL (length out of bounds, reason in @p err), WEFT_ENOMEM.
 * Ownership: copies both secrets. */
weft_err weft__dist_keys_set(struct weft__dist_keys *keys,
                             const void *current,
                             size_t current_len,
                             const void *previous,
                             size_t previous_len,
                             char *err,
                             size_t err_len);

/* Wipe and free the secrets. NULL is a no-op. */
void weft__dist_keys_cleanup(struct weft__dist_keys *keys);

/* A key to sign with is configured. */
bool weft__dist_keys_enabled(const struct weft__dist_keys *keys);

/* The canonical bytes a signature covers, appended to @p out: "weft-sig-v1\n", then each
 * signed field present in @p msg in name order (attempt, correlation_id, message_id, reply_to,
 * sent_ms, traceparent, tracestate, type) as "<n>:<name>=<value>\n" where n is the decimal
 * length of "<name>=<value>", then "<len>:" and the body. Length prefixes make it unambiguous:
 * no value can pose as the next field or as the body. Left out on purpose: x-weft-bounces (an
 * orchestrator raises it when it passes another run's result on) and what the broker adds
 * (x-delivery-count, x-death), so a message still verifies after the broker touched it.
 * @return WEFT_OK, WEFT_ENOMEM, WEFT_ELIMIT (the buffer's cap). */
weft_err weft__dist_canonical(const struct weft__broker_msg *msg,
                              const void *body,
                              size_t body_len,
                              struct weft__buf *out);

/* Sign @p msg and @p body with the current key into @p out ("v1=<id>:<hex>") and point
 * msg->signature at it. @return WEFT_OK, WEFT_EINVAL (no current key), WEFT_ENOMEM. */
weft_err weft__dist_sign(const struct weft__dist_keys *keys,
                         struct weft__broker_msg *msg,
                         const void *body,
                         size_t body_len,
                         char out[WEFT__SIGN_LEN]);

/* Verify msg->signature over @p msg and @p body with the current or previous key, compared in
 * constant time. With no key configured every message is WEFT__VERIFY_OK. */
weft__verify_result weft__dist_verify(const struct weft__dist_keys *keys,
                                      const struct weft__broker_msg *msg,
                                      const void *body,
                                      size_t body_len);

#endif /* WEFT_RUNTIME_DIST_SIGN_H */
