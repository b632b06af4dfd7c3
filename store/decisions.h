/* store/decisions.h - tail sampling's decisions in the span store (store/decisions.c): one
 * decision per trace for every `weft serve` writing the store. Not thread-safe: one thread at a
 * time per handle. Ids are lowercase hex. */
#ifndef WEFT_STORE_DECISIONS_H
#define WEFT_STORE_DECISIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <weft/common.h>

struct weft__store_decisions;

/* Open the decisions of the store at @p location (a SQLite file or a postgresql:// URL; the
 * schema is created or upgraded as the writer would). @return WEFT_OK, WEFT_EIO (logged),
 * WEFT_ENOMEM. */
weft_err weft__store_decisions_open(const char *location, struct weft__store_decisions **out);

/* NULL is a no-op. */
void weft__store_decisions_close(struct weft__store_decisions *d);

/* Record @p keep / @p rule for @p trace_hex unless a decision stands already; *out_keep and
 * @p out_rule (@p rule_len bytes) receive the one that stands (this one, or the earlier).
 * @return WEFT_OK, or WEFT_EIO (logged; the out-params then hold this decision). */
weft_err weft__store_decisions_claim(struct weft__store_decisions *d,
                                     const char *trace_hex,
                                     bool keep,
                                     const char *rule,
                                     bool *out_keep,
                                     char *out_rule,
                                     size_t rule_len);

/* Called for each looked-up trace that has a decision: its index in the request. */
typedef void (*weft__store_decision_fn)(void *user, size_t index, bool keep, const char *rule);

/* The decisions standing for the first 512 of @p trace_hex[0 .. @p count). @return WEFT_OK,
 * WEFT_EIO (logged), WEFT_ENOMEM. */
weft_err weft__store_decisions_lookup(struct weft__store_decisions *d,
                                      const char *const *trace_hex,
                                      size_t count,
                                      weft__store_decision_fn fn,
                                      void *user);

#endif
