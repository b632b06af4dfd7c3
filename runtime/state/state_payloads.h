/* runtime/state/state_payloads.h - the run state's content-addressed payloads (store/payload.h):
 * what the two state backends (state_sqlite.c, state_pg.c) share to store the long texts of
 * their replay records (llm_exchanges.entry, tool_results.request and .outcome) as references,
 * and to collect the records no row refers to any more when a run is deleted. Each backend
 * keeps the records in a table of its own database (`payloads`: hash, kind, size, data) and
 * provides the SQL; the decisions are made here once. docs/replay.md and docs/retention.md
 * tell the story.
 *
 * Thread-safety: none of its own; every call runs on the caller's state handle.
 */
#ifndef WEFT_RUNTIME_STATE_PAYLOADS_H
#define WEFT_RUNTIME_STATE_PAYLOADS_H

#include "store/payload.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

/* A set of payload hashes (lowercase hex), kept as a sorted array once looked into. */
struct weft__hash_set {
    char (*hashes)[WEFT__PAYLOAD_HEX_LEN + 1];
    size_t count;
    size_t cap;
    bool is_sorted;
};

void weft__hash_set_init(struct weft__hash_set *set);
void weft__hash_set_cleanup(struct weft__hash_set *set); /* NULL is a no-op */
/* Add @p hash (a well-formed reference; anything else is ignored). @return WEFT_OK,
 * WEFT_ENOMEM (the set is unchanged). */
weft_err weft__hash_set_add(struct weft__hash_set *set, const char *hash);
/* Is @p hash in the set? Sorts the set (and drops duplicates) first when it has to. */
bool weft__hash_set_has(struct weft__hash_set *set, const char *hash);

/* Store @p text through @p sink when it is stored as a payload: payloads enabled
 * (weft__payload_enabled()) and its length within WEFT__PAYLOAD_MIN..WEFT__PAYLOAD_MAX.
 * *is_ref says whether it was; @p ref then holds its reference. @return WEFT_OK (also when the
 * text stays inline), or weft__payload_put()'s error. Ownership: borrows @p text. */
weft_err weft__state_payload_put(const char *text,
                                 const struct weft__payload_sink *sink,
                                 char ref[WEFT__PAYLOAD_HEX_LEN + 1],
                                 bool *is_ref);

/* What collection needs of a backend, on the transaction that deletes a run's rows. */
struct weft__state_payload_gc {
    struct weft__payload_source source; /* records by hash */
    /* *is_live: is @p hash the reference of a row that stays (a row of another run)? */
    weft_err (*is_referenced)(void *user, const char *hash, bool *is_live);
    /* Every CHUNKS record of the table, through @p each. */
    weft_err (*lists_each)(void *user, weft__payload_each_fn each, void *each_user);
    /* Delete the record @p hash. */
    weft_err (*del)(void *user, const char *hash);
    void *user;
};

/* Collect the records that the deleted run's references @p refs leave unreferenced: a
 * reference no row of another run holds, with the chunks of its list that no remaining list
 * and no row holds. With @p is_dry_run, only count them (the run's rows are then still there,
 * and is_referenced() must not count them). *records: the records deleted (or counted).
 * @return WEFT_OK, WEFT_ENOMEM, or a callback's error. */
weft_err weft__state_payloads_collect(const struct weft__state_payload_gc *gc,
                                      struct weft__hash_set *refs,
                                      bool is_dry_run,
                                      uint64_t *records);

#endif /* WEFT_RUNTIME_STATE_PAYLOADS_H */
