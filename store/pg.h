/* store/pg.h - the PostgreSQL span store's own declarations: the retention hook that `weft
 * serve --retention` and `weft gc` call, and what pg_schema.c, pg_writer.c and pg_read.c share
 * (one connection with its prepared statements and last error, the schema, the partitions).
 * store.h declares the backend's entry points the rest of the store layer calls.
 *
 * Thread-safety: a struct weft__store_pg is used by one thread at a time.
 */
#ifndef WEFT_STORE_PG_H
#define WEFT_STORE_PG_H

#include "store.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Drop the partitions of weft_spans whose whole range ends at or before @p cutoff_ns (ns since
 * the epoch), delete the summary rows of the traces that ended before it (end_ns < cutoff)
 * with their spans left in partitions that are kept (the default one, one straddling the
 * cutoff), and compute again the summary rows of the traces that straddled it (started in a
 * dropped partition, ended after the cutoff: their counts, times and name from the spans left;
 * the row deleted when none is left), and collect the payload records no span left refers
 * to, in one transaction. *partitions_dropped, *traces_deleted and *payloads_deleted (each
 * may be NULL) receive the counts (a straddling trace left without spans
 * counts as deleted). @return WEFT_OK, WEFT_EINVAL, WEFT_ENOTFOUND (no span store there),
 * WEFT_EIO (logged with the URL, its password never), WEFT_ENOMEM. Ownership: borrows @p url. */
weft_err weft__store_pg_drop_before(const char *url,
                                    uint64_t cutoff_ns,
                                    size_t *partitions_dropped,
                                    size_t *traces_deleted,
                                    size_t *payloads_deleted);

/* What /metrics says of the store at @p url (cli/serve_cmd.c through retention.c): the
 * partitions of weft_spans, the default one included, and the earliest start among the
 * stored traces (0 when none). @return WEFT_OK, WEFT_ENOTFOUND (no span store there), WEFT_EIO
 * (logged at DEBUG), WEFT_ENOMEM. Ownership: borrows @p url. */
weft_err weft__store_pg_shape(const char *url, int64_t *partitions, int64_t *oldest_start_ns);

/* --- shared by pg_*.c ------------------------------------------------------------------------ */

#define WEFT__PG_PREPARED_MAX   16
#define WEFT__PG_SCHEMA_VERSION 4

struct weft__pg_prepared {
    const char *sql; /* a string literal, known by its address */
    char name[24];
    bool is_ready;
};

/* One connection to the span store. */
struct weft__store_pg {
    PGconn *conn;
    char where[512];  /* the URL with its password replaced */
    char errmsg[768]; /* the last failure, a sentence naming where */
    char sqlstate[6]; /* of the last failed statement, "" when none or lost */
    struct weft__pg_prepared prepared[WEFT__PG_PREPARED_MAX];
    bool has_stage; /* the writer's temp staging table exists in this session */
};

/* Connect to @p url (defaults: a 10 s connect timeout, UTF8; the URL's own settings win).
 * @return WEFT_OK or WEFT_EIO (errmsg says why); WEFT_ENOMEM. Close with weft__store_pg_close()
 * whatever it returns. */
weft_err weft__store_pg_connect(struct weft__store_pg *pg, const char *url);
void weft__store_pg_close(struct weft__store_pg *pg);

/* Make the lost connection again, once. Prepared statements and the staging table are
 * forgotten. @return true when it is back. */
bool weft__store_pg_reset(struct weft__store_pg *pg);

/* Is the connection gone (the statement that failed may not have reached the server)? */
bool weft__store_pg_is_lost(const struct weft__store_pg *pg);

/* Record the failure of @p what (the server's primary message and SQLSTATE of @p res, or the
 * connection's message) in pg->errmsg. @return WEFT_EIO. */
weft_err weft__store_pg_fail(struct weft__store_pg *pg, const PGresult *res, const char *what);

/* Run @p sql with @p n text parameters (NULL entries are SQL NULL): prepared on its first use
 * in a session when @p n > 0 or @p is_prepared, by name afterwards. The result is the
 * server's answer whatever it is (NULL only out of memory); PQclear() it. */
PGresult *weft__store_pg_run(
    struct weft__store_pg *pg, const char *sql, int n, const char *const *values, bool is_prepared);

/* Run a statement that returns no rows; a failure is recorded (weft__store_pg_fail()).
 * @return WEFT_OK or WEFT_EIO. */
/* Collect the payload records no span refers to (payload_gc.c), inside the caller's
 * transaction; @p dry_run counts them only. @return WEFT_OK or WEFT_EIO (recorded). */
weft_err weft__store_pg_payload_sweep(struct weft__store_pg *pg, bool dry_run, size_t *deleted);
weft_err weft__store_pg_exec(struct weft__store_pg *pg, const char *what, const char *sql);

/* The schema version of the span store, 0 when weft_span_schema holds none. @return WEFT_OK,
 * WEFT_ENOTFOUND (no span schema in the database) or WEFT_EIO. */
weft_err weft__store_pg_version(struct weft__store_pg *pg, int *version);

/* Create or upgrade the schema: each migration in a transaction of its own under an advisory
 * lock. @return WEFT_OK or WEFT_EIO (a newer schema, a failed migration). */
weft_err weft__store_pg_migrate(struct weft__store_pg *pg);

/* The partition interval in nanoseconds (WEFT_TRACE_PARTITION_HOURS, default 24). */
int64_t weft__store_pg_interval_ns(void);

/* The start of the partition range @p start_ns falls in, or INT64_MIN when such a time gets
 * no partition of its own (before 2000 or more than a year ahead: the default partition). */
int64_t weft__store_pg_bucket(int64_t start_ns, int64_t interval_ns, int64_t now_ns);

/* Make sure the partition of range start @p bucket exists (its own short transaction, under
 * an advisory lock; a concurrent creator or an overlapping partition made with another
 * interval is not an error). @return WEFT_OK or WEFT_EIO. */
weft_err
weft__store_pg_ensure_partition(struct weft__store_pg *pg, int64_t bucket, int64_t interval_ns);

#endif /* WEFT_STORE_PG_H */
