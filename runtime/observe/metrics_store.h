/* runtime/observe/metrics_store.h - per-run metric snapshots in the state database, and `weft
 * serve`'s fold of them.
 *
 * Each run records its collaboration metrics into a meter of its own (besides the caller's),
 * with the span pipeline's self-metrics observed on it. At checkpoints (a step saved, at most
 * once per RT_MSTORE_INTERVAL_MS, and always at run end) every series of that meter is
 * written, in one transaction, to the run_metrics table: one row per (run, attempt, instrument,
 * labels) with its value or histogram buckets. A run killed with SIGKILL keeps its metrics up
 * to its last checkpoint. A resumed run writes a new attempt, so the attempts add up.
 *
 * A flusher thread per run writes, one interval later, what a throttled checkpoint left
 * behind, so a run blocked in a long step has its latest metrics stored.
 *
 * Both state backends keep the snapshots: a SQLite file through this module's own connection,
 * PostgreSQL through the weft__state_metrics_* functions of a state handle of its own, so the
 * SQL of each backend lives with the rest of that backend's SQL conventions (state_pg.c: its
 * migrations, prepared statements, outage handling).
 *
 * Thread-safety: weft__rt_mstore_checkpoint() may be called from any run thread (it takes the
 * store's own lock, under which its own connection or state handle is used); the rest from the
 * run's thread.
 */
#ifndef WEFT_RUNTIME_METRICS_STORE_H
#define WEFT_RUNTIME_METRICS_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/metrics.h>
#include <weft/runtime.h>

#define RT_MSTORE_INTERVAL_MS 1000

struct rt_mstore;

/* Open the snapshot writer on the state @p state_path: a SQLite file (its own connection;
 * creates the table when missing) or a PostgreSQL URL (its own state handle, whose migration 2
 * made the table; state.h). NULL when it cannot (logged, the URL without its password): the
 * run then persists no metrics. */
struct rt_mstore *weft__rt_mstore_open(const char *state_path);

/* Start run @p run_id: pick its attempt number, create the run's meter and observe
 * @p provider's span counts and queues on it (NULL: none). @return WEFT_OK, WEFT_EIO,
 * WEFT_ENOMEM (logged; the run goes on without snapshots). */
weft_err
weft__rt_mstore_start(struct rt_mstore *ms, const char *run_id, struct weft_provider *provider);

/* The run's meter (NULL before weft__rt_mstore_start() or when @p ms is NULL). Borrowed. */
struct weft_meter *weft__rt_mstore_meter(struct rt_mstore *ms);

/* Write the run's snapshot: always when @p is_final; otherwise when something was measured
 * since the last one (@p events, weft__rt_metrics_events(), moved) and the last one is older than
 * the interval. So the first measurements after a quiet second are written at once, and a run
 * killed with SIGKILL keeps its metrics up to its last checkpoint (at most an interval
 * behind). NULL @p ms is a no-op. Errors are logged once, never returned: metrics must not
 * fail a run. */
void weft__rt_mstore_checkpoint(struct rt_mstore *ms, uint64_t events, bool is_final);
/* Would weft__rt_mstore_checkpoint(ms, events, false) save a snapshot now (events changed and
 * the interval has passed)? false for NULL. Thread-safe. */
bool weft__rt_mstore_is_due(struct rt_mstore *ms, uint64_t events);
/* Record @p events without writing (the caller's own transaction is open): the flusher writes
 * a snapshot one interval later. NULL @p ms is a no-op. Thread-safe. */
void weft__rt_mstore_note(struct rt_mstore *ms, uint64_t events);

/* Close. NULL is a no-op. */
void weft__rt_mstore_free(struct rt_mstore *ms);

/* Fill @p meter with every stored run's metrics (see weft_runtime_metrics_from_store()), from a
 * SQLite file or a PostgreSQL URL alike. */
weft_err weft__rt_mstore_fold(struct weft_meter *meter, const char *state_path);

/* What `weft serve` parses out of a stored row (exposed for tests/fuzz/fuzz_serve.c). */
#define WEFT__MSTORE_MAX_LABELS 32

/* Labels JSON (an object) back into at most WEFT__MSTORE_MAX_LABELS attributes of @p attrs;
 * members that are not strings, booleans or numbers are skipped; a non-object gives none.
 * @return the count. Ownership: the attributes borrow from @p o (valid while it lives). */
size_t weft__mstore_labels(json_t *o, struct weft_attr *attrs);

/* Parse @p text, a JSON array of at most @p cap numbers, into @p d (doubles) or, when @p d is
 * NULL, @p u (counts; negative or fractional ones read as 0).
 * @return the count, or -1 (not an array of numbers, or over @p cap). */
long weft__mstore_numbers(const char *text, double *d, uint64_t *u, size_t cap);

#endif /* WEFT_RUNTIME_METRICS_STORE_H */
