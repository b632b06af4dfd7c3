/* store/store.h - private declarations of the span store, a layer of its own (DESIGN.md,
 * "Production volume"): one write path (the store exporter, OTLP ingest, the spans of
 * interrupted runs) and one read API (include/weft/store.h: the CLI, the explorer, `weft mcp
 * serve`, replay) over two backends, chosen by the store's location:
 *
 *   a file path                          SQLite (the embedded default): sqlite_*.c
 *   postgresql://... or postgres://...   PostgreSQL (libpq; partitioned by time): pg_*.c
 *
 * read.c builds the public read API on a handful of primitive reads each backend answers
 * (struct weft__store_reader_ops) and on the shared JSON columns (json.c); writer.c dispatches
 * the write path. Dependencies point one way: report/ and exporters/ use this layer, this
 * layer uses tracing/ and base/ only. Nothing here is public API.
 */
#ifndef WEFT_STORE_STORE_H
#define WEFT_STORE_STORE_H

#include "base/arena.h"
#include "base/buf.h"
#include "store/payload.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <weft/export.h>
#include <weft/store.h>

#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_JSON_COLUMN_MAX (64u << 20) /* bytes of one JSON column, written or read */

/* --- backends ------------------------------------------------------------------------------ */

struct weft__store_texts;    /* json.c */
struct weft__store_payloads; /* payload_batch.c */

/* Is @p location a PostgreSQL connection URL (postgresql:// or postgres://)? */
bool weft__store_is_pg_url(const char *location);

/* One row of a backend's answer to a primitive read, valid during the callback only. text():
 * the column as NUL-terminated text (*len its bytes, when not NULL), NULL for SQL NULL;
 * integer(): the column as an integer (0 for NULL). */
struct weft__store_row {
    const char *(*text)(const struct weft__store_row *row, int col, size_t *len);
    int64_t (*integer)(const struct weft__store_row *row, int col);
    void *cursor; /* the backend's: a statement, a result and its row number */
    int index;
};
/* Called once per row; a non-WEFT_OK return stops the read and is returned by it. */
typedef weft_err (*weft__store_row_fn)(const struct weft__store_row *row, void *user);

/* The columns of the primitive reads, in this order in every backend. */
enum weft__store_list_col { /* a trace's summary */
                            WEFT__LIST_TRACE_ID,
                            WEFT__LIST_START,
                            WEFT__LIST_END,
                            WEFT__LIST_SPANS,
                            WEFT__LIST_ERRORS,
                            WEFT__LIST_ROOT_NAME,
                            WEFT__LIST_SERVICE,
                            WEFT__LIST_HAS_ROOT,
                            WEFT__LIST_RUN_ID /* find() only */
};
enum weft__store_span_col { /* a whole span */
                            WEFT__COL_SPAN_ID,
                            WEFT__COL_PARENT,
                            WEFT__COL_PARENT_REMOTE,
                            WEFT__COL_TRACE_STATE,
                            WEFT__COL_FLAGS,
                            WEFT__COL_NAME,
                            WEFT__COL_KIND,
                            WEFT__COL_START,
                            WEFT__COL_END,
                            WEFT__COL_STATUS,
                            WEFT__COL_STATUS_MESSAGE,
                            WEFT__COL_ATTRS,  /* JSON object (store_json.c's encoding) */
                            WEFT__COL_EVENTS, /* JSON array */
                            WEFT__COL_LINKS,  /* JSON array */
                            WEFT__COL_DROPPED_ATTRS,
                            WEFT__COL_DROPPED_EVENTS,
                            WEFT__COL_DROPPED_LINKS,
                            WEFT__COL_SERVICE,
                            WEFT__COL_SCOPE_NAME,
                            WEFT__COL_SCOPE_VERSION,
                            WEFT__COL_RESOURCE /* resource.c's text; NULL but on roots */
};
enum weft__store_node_col { /* what tree order needs of a span (page reads) */
                            WEFT__NODE_SPAN_ID,
                            WEFT__NODE_PARENT,
                            WEFT__NODE_PARENT_REMOTE,
                            WEFT__NODE_NAME,
                            WEFT__NODE_START,
                            WEFT__NODE_END,
                            WEFT__NODE_STATUS,
                            WEFT__NODE_MARK /* nodes(with_marks) only: 1 for a marked span */
};

/* What a backend answers for read.c. Ids are lowercase hex. Every read returns WEFT_OK (also
 * for no rows), WEFT_EIO (the database failed: errmsg() says how) or what a callback returned.
 * A handle is used by one thread at a time. */
struct weft__store_reader_ops {
    const char *name; /* "sqlite", "postgresql" */
    /* Trace summaries, newest first (start, then trace id), at most @p limit: LIST columns. */
    weft_err (*list)(void *impl, size_t limit, weft__store_row_fn fn, void *user);
    /* The trace summaries @p q selects (every field set: limit within 1..10000, status
     * 0..2, to_ns 0 meaning none), in list()'s order: LIST columns with RUN_ID (weft.run.id of
     * a root span, NULL when none has it). */
    weft_err (*find)(void *impl,
                     const struct weft_trace_query *q,
                     weft__store_row_fn fn,
                     void *user);
    /* Trace ids (one column) in [@p lo, @p hi) in id order, at most @p limit; @p lo NULL: the
     * newest trace's id (list()'s first). */
    weft_err (*ids)(void *impl,
                    const char *lo,
                    const char *hi,
                    size_t limit,
                    weft__store_row_fn fn,
                    void *user);
    /* The spans of trace @p trace_hex (only span @p span_hex when not NULL), at most @p limit,
     * in any order: span columns. @p is_outline: the attributes column may hold only the
     * attributes the outline keeps (it is filtered again), the links column may be NULL. */
    weft_err (*spans)(void *impl,
                      const char *trace_hex,
                      const char *span_hex,
                      size_t limit,
                      bool is_outline,
                      weft__store_row_fn fn,
                      void *user);
    /* Spans @p span_hex[0 .. @p count) of trace @p trace_hex, whole, in any order. */
    weft_err (*spans_by_id)(void *impl,
                            const char *trace_hex,
                            const char *const *span_hex,
                            size_t count,
                            weft__store_row_fn fn,
                            void *user);
    /* Every span of the trace as node columns, at most @p limit, in any order. @p with_marks:
     * with NODE_MARK, 1 for a span with a `weft.stuck_loop` event or a `weft.decision.layer`
     * of `circuit_breaker` (the explorer's markers; weft_store_load_rows()). */
    weft_err (*nodes)(void *impl,
                      const char *trace_hex,
                      size_t limit,
                      bool with_marks,
                      weft__store_row_fn fn,
                      void *user);
    /* The payload records (payload.h) among @p hashes, each through @p each; a hash with no
     * record is not reported. */
    weft_err (*payloads)(void *impl,
                         const char *const *hashes,
                         size_t count,
                         weft__payload_each_fn each,
                         void *each_user);
    /* A read snapshot around a page read (nodes, then spans_by_id): both see the same spans. */
    weft_err (*begin)(void *impl);
    void (*end)(void *impl);
    /* A sentence on the last failure. Never NULL. */
    const char *(*errmsg)(void *impl);
    /* Can the handle serve another caller (pool.c)? False when its connection is lost (a
     * PostgreSQL server that restarted and could not be reached again) or a read transaction
     * was left open. */
    bool (*is_reusable)(void *impl);
    void (*close)(void *impl);
};

/* Open the backend reader of @p location (a path, or a PostgreSQL URL). @return WEFT_OK,
 * WEFT_ENOTFOUND (no store there), WEFT_EIO (not a weft store, a newer one, the database
 * failed: logged with the location, passwords never), WEFT_ENOMEM. */
weft_err weft__store_sqlite_reader_open(const char *path,
                                        const struct weft__store_reader_ops **ops,
                                        void **impl);
weft_err
weft__store_pg_reader_open(const char *url, const struct weft__store_reader_ops **ops, void **impl);

/* The PostgreSQL exporter (weft_store_exporter_new() of a URL), weft__store_export_texts() of
 * it, and weft_store_add_interrupted_span() of a URL: as their SQLite counterparts. */
weft_err weft__store_pg_exporter_new(const char *url, struct weft_exporter **out);
weft_err weft__store_pg_export_texts(struct weft_exporter *ex,
                                     const struct weft_span_data *const *spans,
                                     size_t count,
                                     const struct weft__store_texts *texts);
weft_err weft__store_pg_add_interrupted_span(const char *url,
                                             const struct weft_interrupted_span *span);
/* weft_store_gc() of a PostgreSQL store (no size cap there: partitions go by age). */
weft_err weft__store_pg_gc(const char *url,
                           uint64_t cutoff_ns,
                           bool dry_run,
                           struct weft_store_gc_report *out,
                           char *error,
                           size_t error_len);
/* The SQLite ones (sqlite_writer.c). */
weft_err weft__store_sqlite_exporter_new(const char *path, struct weft_exporter **out);
weft_err weft__store_sqlite_export_texts(struct weft_exporter *ex,
                                         const struct weft_span_data *const *spans,
                                         size_t count,
                                         const struct weft__store_texts *texts);
weft_err weft__store_sqlite_add_interrupted_span(const char *path,
                                                 const struct weft_interrupted_span *span);

/* A URL with its password replaced by "***", for messages. Ownership: writes into @p out. */
void weft__store_redact_url(const char *location, char *out, size_t out_len);

/* --- read.c, for pool.c ------------------------------------------------------------------ */

/* Can @p store be handed to another caller (its backend's is_reusable())? When it can, its
 * last error message is cleared. */
bool weft__store_is_reusable(struct weft_store *store);

/* --- retention.c ---------------------------------------------------------------------------- */

/* What follows the traces out at each pass (the runs older than @p cutoff_ns, in serve); a
 * failure is logged and counted as the pass's. */
typedef weft_err (*weft__store_retention_hook)(void *data,
                                               uint64_t cutoff_ns,
                                               char *error,
                                               size_t error_len);

struct weft__store_retention_config {
    uint64_t max_age_ns;             /* traces that ended longer ago go (0: none by age) */
    uint64_t max_bytes;              /* SQLite: the oldest go past this size (0: no cap) */
    uint64_t interval_ms;            /* between passes (0: hourly); the first runs at start */
    weft__store_retention_hook hook; /* may be NULL */
    void *hook_data;
};

struct weft__store_retention_stats {
    uint64_t passes_ok;
    uint64_t passes_failed;
    uint64_t traces_deleted;
    uint64_t spans_deleted;
    uint64_t partitions_dropped;
    uint64_t payloads_deleted; /* payload records no span referred to any more */
    int64_t store_bytes;       /* after the last pass; -1 unknown (PostgreSQL, none yet) */
    int64_t partitions;        /* PostgreSQL: weft_spans' partitions after the last pass; -1 unknown
                                  (SQLite, none yet) */
    int64_t oldest_start_ns;   /* the earliest stored trace's start after the last pass; 0
                                  unknown or empty */
};

struct weft__store_retention;
struct weft_meter;

/* A SQLite store's bytes with its WAL, -1 when it cannot be read (gc.c). */
int64_t weft__store_file_bytes(const char *path);

/* The store's partitions (PostgreSQL's weft_spans with its default one; -1 for SQLite, which
 * has none) and the earliest start among its traces (0: none), read in one short connection
 * (gc.c). @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EIO, WEFT_ENOMEM. */
weft_err weft__store_shape(const char *location, int64_t *partitions, int64_t *oldest_start_ns);

/* Start retention of the store at @p location (NULL: the default) on a thread; *out NULL (and
 * WEFT_OK) when @p cfg bounds nothing. @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM. Ownership:
 * copies @p location and @p cfg; stop with weft__store_retention_stop(). */
weft_err weft__store_retention_start(const char *location,
                                     const struct weft__store_retention_config *cfg,
                                     struct weft__store_retention **out);
/* Counters so far (zeros, store_bytes -1, for NULL); any thread. */
void weft__store_retention_stats(struct weft__store_retention *r,
                                 struct weft__store_retention_stats *out);
/* The counters into @p meter as weft.store.retention.* and weft.store.size (NULL: nothing). */
weft_err weft__store_retention_observe(struct weft__store_retention *r, struct weft_meter *meter);
/* Stop the thread (a pass under way ends first) and free @p r. NULL is a no-op. */
void weft__store_retention_stop(struct weft__store_retention *r);

/* --- sqlite_schema.c ------------------------------------------------------------------------ */

/* Log a database failure with the path and SQLite's message (NULL @p db: no connection). */
void
weft__store_log_db_error(weft_log_level level, const char *path, sqlite3 *db, const char *what);

/* Is the open database a weft store this build can read? @p is_fresh_ok accepts an empty
 * database (the writer creates the schema). *version receives PRAGMA user_version and, on
 * WEFT_EIO, *why a sentence saying why not. @return WEFT_OK or WEFT_EIO. */
weft_err weft__store_check_identity(sqlite3 *db, bool is_fresh_ok, int *version, const char **why);

/* Create or upgrade the schema of the read-write connection @p db inside one IMMEDIATE
 * transaction; failures are logged with @p path. @return WEFT_OK or WEFT_EIO. */
weft_err weft__store_migrate(sqlite3 *db, const char *path);

/* --- json.c ------------------------------------------------------------------------------ */

/* Write the JSON of a span's attributes, events and links, as the store keeps them, into
 * @p out (its contents replaced; data never NULL on success). With @p pl, a long attribute
 * text (WEFT__PAYLOAD_MIN bytes of valid UTF-8 without NUL) is written as a payload
 * reference, {"type":"payload","value":REF}, and its records are added to @p pl (NULL, or a
 * collector set up with payloads disabled: inline, as before). @return WEFT_OK or
 * WEFT_ENOMEM (also past the buffer's cap, or for an attribute with a NULL key). */
weft_err weft__store_attrs_text(const struct weft_attr *attrs,
                                size_t count,
                                struct weft__store_payloads *pl,
                                struct weft__buf *out);
weft_err weft__store_events_text(const struct weft_span_data *span, struct weft__buf *out);
weft_err weft__store_links_text(const struct weft_span_data *span, struct weft__buf *out);

/* --- payload_batch.c: a batch's payload records ------------------------------------------- */

/* The payload records (store/payload.h) a batch's attribute columns refer to, collected while
 * the columns are written and stored by the backend in the batch's transaction, so a span is
 * never committed without the text it refers to. Each record appears once (a text repeated
 * across the batch is cut and compressed once); sorted by hash before they are written, so two
 * writers lock them in the same order (weft__store_texts_build() sorts its own). */
struct weft__store_payload_rec {
    char hash[WEFT__PAYLOAD_HEX_LEN + 1];
    weft__payload_kind kind;
    size_t raw_len;
    size_t off; /* into data */
    size_t len;
};
struct weft__store_payloads {
    struct weft__buf data; /* the records' bytes back to back */
    struct weft__store_payload_rec *recs;
    size_t count;
    size_t cap;
    uint32_t *index; /* open addressing over recs by hash; index_cap slots, 0 = empty, else i+1 */
    size_t index_cap;
    bool is_enabled; /* weft__payload_enabled() when the collector was set up */
};
/* A record stored again has its stored_ns brought forward at most this often (a write per
 * touch would double the writes of repeated texts); collection spares records stored or
 * touched within twice this of its cutoff. */
#define WEFT__PAYLOAD_TOUCH_NS (1800ull * 1000000000ull)
#define WEFT__STORE_PAYLOAD_UPSERT_SQLITE                                                  \
    "INSERT INTO payloads (hash, kind, size, data, stored_ns) VALUES (?1, ?2, ?3, ?4, ?5)" \
    " ON CONFLICT (hash) DO UPDATE SET stored_ns = excluded.stored_ns"                     \
    " WHERE payloads.stored_ns < excluded.stored_ns - 1800000000000"

void weft__store_payloads_init(struct weft__store_payloads *pl);
void weft__store_payloads_reset(struct weft__store_payloads *pl);
void weft__store_payloads_cleanup(struct weft__store_payloads *pl);
/* Store @p text as payloads into @p pl; @p ref receives its reference. @return as
 * weft__payload_put(). */
weft_err weft__store_payloads_add(struct weft__store_payloads *pl,
                                  const char *text,
                                  size_t len,
                                  char ref[WEFT__PAYLOAD_HEX_LEN + 1]);
/* Sort the records by hash (the order a backend writes them in). */
void weft__store_payloads_sort(struct weft__store_payloads *pl);
/* Record @p i's data. */
const unsigned char *weft__store_payloads_data(const struct weft__store_payloads *pl, size_t i);

/* Collect the payload records no span of the SQLite store @p db refers to (payload_gc.c),
 * inside the caller's write transaction; @p dry_run counts them only. @return WEFT_OK or
 * WEFT_EIO. */
weft_err weft__store_sqlite_payload_sweep(sqlite3 *db, bool dry_run, size_t *deleted);

/* Resolve the payload references of attribute object @p attrs (a JSON object of the
 * attributes column) in place: each {"type":"payload","value":REF} becomes the text, read
 * through @p src. A record that is missing or damaged makes the value a sentence saying so
 * (logged with @p where), never a crash or a silently missing attribute; when the database
 * itself failed (@p src sets *@p is_db_failed) the read fails. @return WEFT_OK, WEFT_ENOMEM,
 * WEFT_EIO. */
weft_err weft__store_resolve_payloads(json_t *attrs,
                                      const struct weft__payload_source *src,
                                      const bool *is_db_failed,
                                      const char *where);

/* A batch's JSON columns written ahead of the store's writer, so that the requests weft serve
 * ingests at once build theirs in parallel while one of them holds the writer (ingest.c):
 * column k of span i (k = 0 attributes, 1 events, 2 links) is column 3 * i + k. */
struct weft__store_texts {
    struct weft__buf text;                /* the columns back to back, each closed by a NUL */
    size_t *starts;                       /* 3 * count + 1 offsets into text */
    size_t count;                         /* spans */
    struct weft__store_payloads payloads; /* the records the attribute columns refer to */
};

/* Build the columns of @p count spans into @p texts, whose text holds at most @p max bytes
 * (0: no cap beyond the columns' own). Call weft__store_texts_cleanup() whatever it returns.
 * @return WEFT_OK or WEFT_ENOMEM (also past @p max or a column's cap, or a NULL key). */
weft_err weft__store_texts_build(struct weft__store_texts *texts,
                                 const struct weft_span_data *const *spans,
                                 size_t count,
                                 size_t max);
/* Column @p i (see above) and its length. Ownership: borrowed from @p texts. */
const char *weft__store_texts_column(const struct weft__store_texts *texts, size_t i, size_t *len);
void weft__store_texts_cleanup(struct weft__store_texts *texts);

/* export_batch of the store exporter @p ex (weft_store_exporter_new()) with the JSON columns
 * already built for these spans in @p texts; NULL @p texts builds them as export_batch does.
 * @return as export_batch; WEFT_EINVAL when @p ex is not a store exporter or @p texts holds
 * another number of spans. */
weft_err weft__store_export_texts(struct weft_exporter *ex,
                                  const struct weft_span_data *const *spans,
                                  size_t count,
                                  const struct weft__store_texts *texts);

/* --- sqlite_checkpoint.c -------------------------------------------------------------------- */
/* SQLite's automatic checkpoint threshold, restored when the thread stops. */
#ifndef SQLITE_DEFAULT_WAL_AUTOCHECKPOINT
#define SQLITE_DEFAULT_WAL_AUTOCHECKPOINT 1000
#endif
/* The ingest's thresholds: the thread checkpoints from 4,000 WAL pages (16 MiB of 4 KiB
 * pages: fewer, larger checkpoints than SQLite's 1,000 measured faster), the writer too from
 * 65,536 (256 MiB, only reached while a reader pins old frames). */
#define WEFT__STORE_CHECKPOINT_PAGES 4000
#define WEFT__STORE_WAL_BACKSTOP     65536

struct weft__store_checkpointer;

/* Move the checkpoints of the writer's connection @p writer on the store at @p path to a
 * thread of their own (with its own connection), woken once the WAL holds @p pages pages; past
 * @p backstop pages (more than @p pages) the writer checkpoints after its commits too.
 * @p writer must not be used while this starts or stops.
 * @return WEFT_OK, WEFT_ENOMEM or WEFT_EIO (logged). Ownership: caller owns *out; release with
 * weft__store_checkpointer_stop() before closing @p writer. */
weft_err weft__store_checkpointer_start(sqlite3 *writer,
                                        const char *path,
                                        int pages,
                                        int backstop,
                                        struct weft__store_checkpointer **out);
/* Around each write transaction of the writer (no-ops for NULL): a checkpoint's last pass
 * waits for the transaction to end, and the next transaction waits for that pass. */
void weft__store_checkpointer_enter(struct weft__store_checkpointer *cp);
void weft__store_checkpointer_leave(struct weft__store_checkpointer *cp);
/* Checkpoints the thread completed, and the writer's own past the backstop (zeros for NULL). */
void weft__store_checkpointer_stats(const struct weft__store_checkpointer *cp,
                                    uint64_t *checkpoints,
                                    uint64_t *inline_checkpoints);
/* Stop the thread (a checkpoint under way ends first) and give the writer back SQLite's
 * automatic checkpoint. NULL is a no-op. */
void weft__store_checkpointer_stop(struct weft__store_checkpointer *cp);

/* Checkpoint the store exporter @p ex's WAL on a thread (above). Call before the first
 * export. @return as weft__store_checkpointer_start(); WEFT_EINVAL when @p ex is not a store
 * exporter or already has a checkpointer. */
weft_err weft__store_checkpoint_in_background(struct weft_exporter *ex, int pages, int backstop);
/* The exporter's checkpointer, or NULL. Ownership: borrowed from @p ex. */
const struct weft__store_checkpointer *weft__store_checkpointer(struct weft_exporter *ex);

/* Parse the JSON columns back into @p arena: values weft would not write are skipped and
 * counted in *dropped (attributes) or the span's dropped counts. @p j may be NULL (read as
 * empty). @return WEFT_OK or WEFT_ENOMEM. */
weft_err weft__store_read_attrs(struct weft__arena *arena,
                                const json_t *j,
                                const struct weft_attr **out,
                                size_t *count,
                                uint32_t *dropped);
weft_err
weft__store_read_events(struct weft__arena *arena, const json_t *arr, struct weft_span_data *span);
weft_err
weft__store_read_links(struct weft__arena *arena, const json_t *arr, struct weft_span_data *span);

/* --- resource.c: the resource a trace's part arrived with ---------------------------------- */

#define WEFT__STORE_RESOURCE_MAX_ATTRS 64    /* attributes kept of one resource */
#define WEFT__STORE_RESOURCE_VALUE_MAX 1024  /* bytes of one value (strings are cut) */
#define WEFT__STORE_RESOURCE_TEXT_MAX  16384 /* bytes of keys and values in all */

/* The resource column of a span that starts a trace's part (no parent or a remote one):
 * @p res bounded and redacted (resource.c says how), into @p out (its contents replaced,
 * NUL-terminated). @return WEFT_OK, WEFT_ENOTFOUND (no attributes: the column stays NULL),
 * WEFT_ENOMEM. */
weft_err weft__store_resource_text(const struct weft_resource *res, struct weft__buf *out);

/* A resource column back into @p res (attributes in @p arena; dropped_attrs the count of
 * those left out when it was written). @return WEFT_OK, WEFT_EIO (not such a column: @p res is
 * unchanged), WEFT_ENOMEM. */
weft_err weft__store_read_resource(struct weft__arena *arena,
                                   const char *text,
                                   size_t len,
                                   struct weft_resource *res);

/* service.name of the span's resource, or NULL. Ownership: borrowed from @p span. */
const char *weft__store_service_name(const struct weft_span_data *span);

/* The span has a parent with a non-zero id (a zero parent id counts as none). */
bool weft__store_has_parent(const struct weft_span_data *span);

/* --- sort.c -------------------------------------------------------------------------------- */

/* A comparison of items @p a and @p b (indexes) for weft__store_sort(): negative, zero or
 * positive as strcmp(). */
typedef int (*weft__store_cmp_fn)(const void *ctx, size_t a, size_t b);

/* The order of @p n items by @p key ascending into @p order (order[k]: the index of the k-th):
 * items of equal keys by @p tie (with @p ctx), equal by @p tie too (or @p tie NULL) by index,
 * as a stable sort would leave them. @p tie is called only on items of equal keys. Linear in
 * @p n but for the ties (a radix sort of the keys). @return WEFT_OK or WEFT_ENOMEM (@p order
 * undefined). */
weft_err weft__store_sort(
    const uint64_t *key, size_t n, weft__store_cmp_fn tie, const void *ctx, size_t *order);

/* --- read.c, tree.c ------------------------------------------------------------------------ */

/* One stored span as a page or rows read orders it (its node columns): 56 bytes and a name. */
struct weft__store_node {
    uint64_t start;
    uint64_t end;
    const char *name; /* in the read's scratch arena */
    uint8_t id[WEFT_SPAN_ID_SIZE];
    uint8_t parent[WEFT_SPAN_ID_SIZE];
    bool has_parent;
    bool is_parent_remote;
    bool is_error;  /* status ERROR */
    bool is_ok;     /* status OK */
    bool is_marker; /* NODE_MARK, when read with marks */
};

/* weft__trace_tree() of @p count outline nodes (the caller sorted them by start, then span id,
 * as whole loads sort spans, so that both break ties alike). @return WEFT_OK or WEFT_ENOMEM. */
weft_err weft__store_node_tree(const struct weft__store_node *nodes,
                               size_t count,
                               size_t *order,
                               size_t *depth);

/* Tree order of @p count spans of one trace: depth-first from the roots, siblings by start
 * time (then end time, then name). A span is a root when it has no parent or its parent is
 * not among @p spans (an orphan); spans on a parent cycle are broken out as roots too, so
 * every span appears exactly once.
 * Fills order[i] (index into @p spans), depth[i] and, when not NULL, is_orphan[i] (the span
 * has a parent that is not present). @return WEFT_OK or WEFT_ENOMEM. */
weft_err weft__trace_tree(const struct weft_span_data *const *spans,
                          size_t count,
                          size_t *order,
                          size_t *depth,
                          bool *is_orphan);

/* The spans of a loaded trace in tree order (weft_trace_span_count() of them).
 * Ownership: borrowed until weft_trace_free(). */
const struct weft_span_data *const *weft__trace_spans(const struct weft_trace *trace);

#endif /* WEFT_STORE_STORE_H */
