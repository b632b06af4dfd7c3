/* include/weft/store.h - read access to the span store that weft_store_exporter_new()
 * writes (a SQLite file, or PostgreSQL when the location is a postgresql:// URL): list recent
 * traces, resolve a trace reference ("last", a full id or a unique hex prefix), load one trace's
 * spans in tree order (or one page of them), and render a trace as an indented tree with durations
 * and errors.
 *
 * The store is opened read-only: readers never block the exporter (the database runs in WAL
 * mode), and a reader sees each batch whole or not at all (one transaction per batch).
 *
 * Thread-safety:
 * - struct weft_store: confine a handle to one thread at a time; open one per thread, or take
 *   one from a struct weft_store_pool (safe from any thread) for the time of a request.
 * - struct weft_trace and struct weft_trace_summary: immutable once returned; may be read
 *   from any thread.
 */
#ifndef WEFT_STORE_H
#define WEFT_STORE_H

#include <stdio.h>
#include <weft/export.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Characters of a trace id in lowercase hex (without the terminating NUL). */
#define WEFT_TRACE_ID_HEX_LEN 32

struct weft_store; /* an open read-only store */
struct weft_trace; /* one loaded trace */

/** One line of weft_store_list_traces(). */
struct weft_trace_summary {
    char trace_id[WEFT_TRACE_ID_HEX_LEN + 1]; /**< lowercase hex, NUL-terminated */
    /** Name of the root span; while the root has not been stored yet, the name of the
     * earliest span (see @c has_root). Never NULL. */
    const char *root_name;
    const char *service_name; /**< service.name of the root span's resource; may be NULL */
    uint64_t start_ns;        /**< earliest span start, ns since the Unix epoch */
    uint64_t end_ns;          /**< latest span end */
    size_t span_count;
    size_t error_count; /**< spans with status ERROR */
    bool has_root;      /**< a root span (no parent, or a remote parent) is stored */
    /** weft.run.id of a root span: the weft run the trace belongs to. Set by
     * weft_store_find_traces() only; NULL otherwise and for traces of no weft run. */
    const char *run_id;
};

/** What weft_store_find_traces() selects; zero (NULL) fields select everything. */
struct weft_trace_query {
    const char *service; /**< service.name of the trace (the summary's), exactly */
    /** A substring of the root span's name (ASCII case-insensitive) or a prefix of the trace
     * id (lowercase hex). */
    const char *text;
    int status;       /**< 0: any; 1: with at least one ERROR span; 2: without */
    uint64_t from_ns; /**< the trace started at or after (ns since the Unix epoch) */
    uint64_t to_ns;   /**< the trace started before; 0: no bound */
    /** Keyset paging: only traces after this one in the list's order (start descending, then
     * id ascending), given by its start and id; NULL @c after_id: from the newest. */
    uint64_t after_start_ns;
    const char *after_id;
    size_t limit; /**< at most this many; 0 means 50; more than 10000 reads 10000 */
};

/** Open the store at @p db_path read-only.
 * @param db_path database file, or a postgresql:// (postgres://) URL; NULL means
 * weft_store_default_path().
 * @param out receives the handle; NULL on failure.
 * @return WEFT_OK, WEFT_EINVAL (NULL @p out), WEFT_ENOTFOUND (no database at the path),
 * WEFT_EIO (not a weft store, written by a newer weft, or SQLite failed; logged with the
 * path), WEFT_ENOMEM.
 * Ownership: copies @p db_path; caller owns *out, release with weft_store_close(). */
WEFT_API weft_err weft_store_open(const char *db_path, struct weft_store **out);

/** Close a store. NULL is a no-op. Traces and summaries loaded from it stay valid.
 * Errors: none. Ownership: takes @p store (frees it). */
WEFT_API void weft_store_close(struct weft_store *store);

/** Where @p store is, for messages: its database path, or its PostgreSQL URL with the
 * password replaced by "***". Ownership: borrowed until weft_store_close().
 * Errors: none. */
WEFT_API const char *weft_store_path(const struct weft_store *store);

/** A sentence describing the last failure of a call on @p store (for example "prefix 'ab'
 * matches 3 traces"), or "" when the last call succeeded. Never NULL.
 * Ownership: borrowed until the next call on @p store.
 * Errors: none. */
WEFT_API const char *weft_store_errmsg(const struct weft_store *store);

/** Idle handles a pool keeps when weft_store_pool_new() is given 0. */
#define WEFT_STORE_POOL_DEFAULT_IDLE 4

struct weft_store_pool; /* open read handles of one store, reused */

/** What a pool did since weft_store_pool_new(). */
struct weft_store_pool_stats {
    uint64_t opened;    /**< handles opened (weft_store_open()) */
    uint64_t reused;    /**< acquisitions served by an idle handle */
    uint64_t discarded; /**< handles closed because their connection was lost (or a read
                             transaction was left open) instead of kept */
    size_t idle;        /**< idle handles kept now */
};

/** Create a pool of read handles of the store at @p location, so that a server answering many
 * requests does not open the store for each: with PostgreSQL an open is a new connection
 * (TCP, authentication, a backend process: milliseconds); with SQLite it reads the schema
 * again. No handle is opened until the first weft_store_pool_acquire().
 * A pooled handle sees every write committed before each of its reads (it is kept outside any
 * transaction). A handle whose connection was lost is closed on release, not kept, and an
 * idle one found lost when acquired is closed and replaced.
 * @param location as weft_store_open()'s @p db_path (NULL: weft_store_default_path(), looked
 * up at each open).
 * @param max_idle handles kept open while idle, at most; 0 means
 * WEFT_STORE_POOL_DEFAULT_IDLE. Handles in use are not bounded by it: past it, released
 * handles are closed.
 * @param out receives the pool; NULL on failure.
 * @return WEFT_OK, WEFT_EINVAL (NULL @p out), WEFT_ENOMEM.
 * Ownership: copies @p location; caller owns *out, release with weft_store_pool_free().
 * Thread-safety: the pool may be used from any number of threads at once; each handle it
 * hands out is the caller's alone until released. */
WEFT_API weft_err weft_store_pool_new(const char *location,
                                      size_t max_idle,
                                      struct weft_store_pool **out);

/** Take an open handle: an idle one (the most recently released) or a new one.
 * @param out receives the handle; NULL on failure.
 * @return WEFT_OK, or weft_store_open()'s errors (WEFT_EINVAL for a NULL argument,
 * WEFT_ENOTFOUND, WEFT_EIO, WEFT_ENOMEM).
 * Ownership: the caller holds *out until weft_store_pool_release() (or weft_store_close(),
 * which drops it from the pool for good). Thread-safety: any thread. */
WEFT_API weft_err weft_store_pool_acquire(struct weft_store_pool *pool, struct weft_store **out);

/** Give back a handle weft_store_pool_acquire() gave: kept idle when it can serve again and
 * fewer than the pool's max_idle are idle, else closed. NULL @p store is a no-op.
 * Errors: none. Ownership: takes @p store. Thread-safety: any thread. */
WEFT_API void weft_store_pool_release(struct weft_store_pool *pool, struct weft_store *store);

/** The pool's counters into @p out (zeros for a NULL @p pool).
 * Errors: none. Ownership: writes into the caller's @p out. Thread-safety: any thread. */
WEFT_API void weft_store_pool_stats(struct weft_store_pool *pool,
                                    struct weft_store_pool_stats *out);

/** Close every idle handle and free the pool. Every handle acquired from it must have been
 * released or closed before. NULL is a no-op.
 * Errors: none. Ownership: takes @p pool. Thread-safety: no other call on @p pool may run. */
WEFT_API void weft_store_pool_free(struct weft_store_pool *pool);

/** A span whose process died before it ended (a run killed with SIGKILL), to be closed on
 * recovery. Ids are lowercase hex. */
struct weft_interrupted_span {
    const char *trace_id;       /**< 32 hex digits */
    const char *span_id;        /**< 16 hex digits */
    const char *parent_span_id; /**< 16 hex digits; NULL for a root */
    const char *name;           /**< e.g. "invoke_workflow NAME"; NULL means "interrupted" */
    const char *run_id;         /**< weft.run.id attribute; may be NULL */
    uint64_t start_ns;
    uint64_t end_ns; /**< the last sign of life; raised to start_ns when earlier */
};

/** Write @p span into the store at @p db_path as ended with status ERROR "interrupted"
 * (attribute weft.interrupted = true), unless the store already holds a span with its ids (it
 * did end after all): then nothing is written. The trace's summary is refreshed, so `weft trace
 * list` and `weft trace show` show the trace with an ERROR root. This is the one call of this
 * header that writes: it opens the store read-write (creating it when missing) for the call.
 * @param db_path NULL means weft_store_default_path().
 * @return WEFT_OK (written or already there), WEFT_EINVAL (NULL or malformed ids), WEFT_EIO
 * (logged with the path), WEFT_ENOMEM.
 * Ownership: borrows @p db_path and @p span for the call. */
WEFT_API weft_err weft_store_add_interrupted_span(const char *db_path,
                                                  const struct weft_interrupted_span *span);

/** What weft_store_gc() deleted, or would delete. */
struct weft_store_gc_report {
    size_t traces;        /**< whole traces deleted */
    size_t spans;         /**< their spans (SQLite; PostgreSQL: 0, partitions go whole) */
    size_t partitions;    /**< PostgreSQL partitions dropped */
    int64_t bytes_before; /**< SQLite: the file's bytes (with its WAL) before; -1 unknown */
    int64_t bytes_after;  /**< ... and after (the dry run: as before) */
    size_t payloads;      /**< payload records (prompts, answers, tool I/O stored once by
                               content hash) no span kept refers to any more: deleted */
};

/** Delete what the span store at @p location (NULL: weft_store_default_path()) keeps past
 * its retention: every trace that ended before @p cutoff_ns (0: none by age) and, for SQLite,
 * the oldest traces (by start) until the live data fits in @p max_bytes (0: no cap). Whole
 * traces go, never part of one. SQLite gives the freed pages back to the file system
 * (incremental vacuum; a store made before this release is vacuumed once, whole); PostgreSQL
 * drops each time partition that ends at or before the cutoff (cheap, whatever its size) and
 * the summaries of the traces that ended before it; a trace that straddles the cutoff keeps
 * its spans after it, and its summary (span and error counts, start, root name) is computed
 * again from them.
 * @param dry_run count what would go; change nothing.
 * @param out receives the report.
 * @return WEFT_OK, WEFT_EINVAL (NULL @p out), WEFT_ENOTFOUND (no store there), WEFT_EIO (the
 * database failed; @p error says how, never with a password), WEFT_ENOMEM.
 * Ownership: borrows everything for the call. Thread-safety: any thread; concurrent writers
 * wait (SQLite) or go on (PostgreSQL). */
WEFT_API weft_err weft_store_gc(const char *location,
                                uint64_t cutoff_ns,
                                uint64_t max_bytes,
                                bool dry_run,
                                struct weft_store_gc_report *out,
                                char *error,
                                size_t error_len);

/** List the @p limit most recent traces, newest first (by their earliest span start).
 * @param limit at most this many; 0 means 20.
 * @param out receives an array of *count summaries (NULL when there are none).
 * @return WEFT_OK (also for an empty store), WEFT_EINVAL, WEFT_EIO, WEFT_ENOMEM.
 * Ownership: caller owns the array and its strings; release with
 * weft_trace_summaries_free(). */
WEFT_API weft_err weft_store_list_traces(struct weft_store *store,
                                         size_t limit,
                                         struct weft_trace_summary **out,
                                         size_t *count);

/** The traces @p query selects, newest first as weft_store_list_traces() lists them, each
 * with the weft run it belongs to (@c run_id). Reads the store's trace summaries (one row per
 * trace) and one root span per trace returned, so a page costs its own size whatever the
 * store holds.
 * @param query what to select (NULL: the 50 newest); its strings are borrowed for the call.
 * @param out receives an array of *count summaries (NULL when there are none).
 * @return WEFT_OK (also when none match), WEFT_EINVAL (NULL @p store, @p out or @p count, a
 * @c status outside 0..2), WEFT_EIO, WEFT_ENOMEM.
 * Ownership: caller owns the array and its strings; release with
 * weft_trace_summaries_free(). Thread-safety: as every read of @p store. */
WEFT_API weft_err weft_store_find_traces(struct weft_store *store,
                                         const struct weft_trace_query *query,
                                         struct weft_trace_summary **out,
                                         size_t *count);

/** Free an array returned by weft_store_list_traces(). NULL is a no-op.
 * Errors: none. Ownership: takes @p summaries (the array and its strings). */
WEFT_API void weft_trace_summaries_free(struct weft_trace_summary *summaries, size_t count);

/** Resolve a trace reference to a full trace id.
 * @param ref "last" (the most recent trace, as listed first by weft_store_list_traces()), a
 * 32-character trace id, or a shorter hex prefix of one (case-insensitive).
 * @param out receives the lowercase hex id, NUL-terminated.
 * @return WEFT_OK, WEFT_ENOTFOUND (no trace matches, or the store is empty), WEFT_EINVAL
 * (NULL argument, @p ref is not hex, or a prefix matches several traces: see
 * weft_store_errmsg(), which names some of them), WEFT_EIO.
 * Ownership: borrows @p ref for the call; writes into the caller's @p out. */
WEFT_API weft_err weft_store_resolve(struct weft_store *store,
                                     const char *ref,
                                     char out[WEFT_TRACE_ID_HEX_LEN + 1]);

/** What a writer changes in a trace's summary each time it stores spans of it
 * (weft_store_trace_stamp()): two reads of a trace that give equal stamps read the same
 * spans, but for a span stored again under its id with the same status and times inside the
 * trace's extent. */
struct weft_trace_stamp {
    size_t span_count;  /**< spans stored (a span stored again counts again) */
    size_t error_count; /**< spans stored with status ERROR */
    uint64_t start_ns;  /**< earliest span start */
    uint64_t end_ns;    /**< latest span end */
    bool is_found;      /**< the trace is stored (false: the other fields are 0) */
};

/** The stamp of trace @p trace_id, one read of its summary by its key: a reader that keeps
 * what it read of a trace (`weft serve`'s rows cache) reads the stamp before the trace and
 * reads the trace again when the stamp has changed.
 * @param trace_id a full hex trace id (see weft_store_resolve()).
 * @param out receives the stamp (zeroed on failure).
 * @return WEFT_OK, WEFT_EINVAL (NULL argument or a malformed id), WEFT_ENOTFOUND (no such
 * trace), WEFT_EIO. Ownership: borrows @p trace_id for the call. Thread-safety: as every call
 * on @p store. */
WEFT_API weft_err weft_store_trace_stamp(struct weft_store *store,
                                         const char *trace_id,
                                         struct weft_trace_stamp *out);

/** Load every stored span of one trace, in tree order: depth-first from the roots, children
 * and roots ordered by start time. Spans whose parent is not stored (orphans) are listed as
 * roots. A span that starts a trace's part (no parent, or a remote one) reads with the
 * resource that part arrived with, as the store keeps it (at most 64 attributes, values cut
 * at 1 KiB, secrets redacted; dropped_attrs counts what was left out); every other span's
 * resource holds only service.name. Its scope holds name and version.
 * At most 1048576 spans (the earliest) of one trace are loaded.
 * @param trace_id a full lowercase or uppercase hex trace id (see weft_store_resolve()).
 * @return WEFT_OK, WEFT_EINVAL, WEFT_ENOTFOUND (no span of that trace), WEFT_EIO (SQLite
 * failed or a stored JSON column is corrupt), WEFT_ENOMEM.
 * Ownership: caller owns *out; release with weft_trace_free(). */
WEFT_API weft_err weft_store_load_trace(struct weft_store *store,
                                        const char *trace_id,
                                        struct weft_trace **out);

/** As weft_store_load_trace(), but the outline a waterfall draws: every span with its ids,
 * name, kind, times, status, events and scope, and of its attributes only
 * `weft.decision.layer`; no links. Several times faster on large traces (attributes are most
 * of a stored span).
 * @return as weft_store_load_trace().
 * Ownership: caller owns *out; release with weft_trace_free(). */
WEFT_API weft_err weft_store_load_outline(struct weft_store *store,
                                          const char *trace_id,
                                          struct weft_trace **out);

/** Load one span of a trace, whole, as a trace of that one span (its depth reads 0).
 * @param span_id 16 hex digits.
 * @return WEFT_OK, WEFT_EINVAL (malformed ids), WEFT_ENOTFOUND (no such span), WEFT_EIO,
 * WEFT_ENOMEM. Ownership: caller owns *out; release with weft_trace_free(). */
WEFT_API weft_err weft_store_load_span(struct weft_store *store,
                                       const char *trace_id,
                                       const char *span_id,
                                       struct weft_trace **out);

/** Load one page of a trace: the spans @p offset .. @p offset + @p limit of
 * weft_store_load_trace()'s tree order, whole, with the depths that load gives them, and the
 * whole trace's span and error counts. The result equals cutting that page out of
 * weft_store_load_trace()'s trace, but memory follows the page: the trace is ordered from its
 * outline (ids, parents, times and names, under 200 bytes a span), then only the page's rows
 * are read whole, all in one read transaction. An @p offset at or past the end gives an empty
 * page (weft_trace_span_count() 0) with the counts.
 * @param trace_id a full lowercase or uppercase hex trace id (see weft_store_resolve()).
 * @param offset index in tree order of the page's first span.
 * @param limit at most this many spans (0: none, only the counts).
 * @param out receives the page; weft_trace_span_depth() is a span's depth in the whole trace.
 * @param span_count receives the trace's span count (weft_trace_span_count() of
 * weft_store_load_trace()); 0 on failure.
 * @param error_count receives how many of them have status ERROR; may be NULL.
 * @return WEFT_OK, WEFT_EINVAL (NULL @p store, @p trace_id, @p out or @p span_count, or a
 * malformed id), WEFT_ENOTFOUND (no span of that trace), WEFT_EIO (SQLite failed), WEFT_ENOMEM.
 * Ownership: borrows @p trace_id for the call; caller owns *out, release with weft_trace_free().
 * Thread-safety: as every call on @p store, one thread at a time. */
WEFT_API weft_err weft_store_load_page(struct weft_store *store,
                                       const char *trace_id,
                                       size_t offset,
                                       size_t limit,
                                       struct weft_trace **out,
                                       size_t *span_count,
                                       size_t *error_count);

/** One span of a trace as a waterfall row draws it (weft_store_load_rows()). */
struct weft_trace_row {
    uint8_t span_id[WEFT_SPAN_ID_SIZE];
    const char *name; /**< never NULL; borrowed until weft_trace_rows_free() */
    uint64_t start_time_ns;
    uint64_t end_time_ns;
    size_t depth;  /**< 0 for roots and orphans, as weft_trace_span_depth() */
    size_t parent; /**< index of the parent's row; SIZE_MAX for a root or an orphan */
    weft_status_code status_code;
    bool is_marker; /**< a `weft.stuck_loop` event or a `weft.decision.layer` of circuit_breaker */
};

/** The rows of one trace (weft_store_load_rows()); opaque. */
struct weft_trace_rows;

/** Load the rows a waterfall draws of every span of a trace, in weft_store_load_trace()'s tree
 * order: ids, name, times, status, depth, the parent's row and the explorer's marker, nothing
 * else. Read from the compact outline weft_store_load_page() orders the trace with (under 200
 * bytes a span while it is read, about 64 bytes and the name in the result), in one query;
 * several times faster than weft_store_load_outline() on large traces.
 * @param trace_id a full lowercase or uppercase hex trace id (see weft_store_resolve()).
 * @param out receives the rows.
 * @return WEFT_OK, WEFT_EINVAL (NULL argument or a malformed id), WEFT_ENOTFOUND (no span of
 * that trace), WEFT_EIO (the database failed), WEFT_ENOMEM.
 * Ownership: borrows @p trace_id for the call; caller owns *out (NULL on failure), release
 * with weft_trace_rows_free(). Thread-safety: as every call on @p store. */
WEFT_API weft_err weft_store_load_rows(struct weft_store *store,
                                       const char *trace_id,
                                       struct weft_trace_rows **out);

/** Number of rows in @p rows (0 for NULL).
 * Errors: none. Ownership: none. */
WEFT_API size_t weft_trace_rows_count(const struct weft_trace_rows *rows);

/** The rows in tree order, weft_trace_rows_count() of them (NULL when none).
 * Errors: none. Ownership: borrowed until weft_trace_rows_free(). */
WEFT_API const struct weft_trace_row *weft_trace_rows_get(const struct weft_trace_rows *rows);

/** Free rows. NULL is a no-op.
 * Errors: none. Ownership: takes @p rows (their names die with them). */
WEFT_API void weft_trace_rows_free(struct weft_trace_rows *rows);

/** Number of spans in @p trace (0 for NULL).
 * Errors: none. Ownership: none. */
WEFT_API size_t weft_trace_span_count(const struct weft_trace *trace);

/** Span @p index in tree order, or NULL when out of range.
 * Ownership: borrowed until weft_trace_free().
 * Errors: none. */
WEFT_API const struct weft_span_data *weft_trace_span(const struct weft_trace *trace, size_t index);

/** Depth of span @p index in the tree (0 for roots and orphans; 0 when out of range).
 * Errors: none. Ownership: none. */
WEFT_API size_t weft_trace_span_depth(const struct weft_trace *trace, size_t index);

/** Free a trace. NULL is a no-op.
 * Errors: none. Ownership: takes @p trace (frees it; its span pointers die with it). */
WEFT_API void weft_trace_free(struct weft_trace *trace);

/** Render flags for weft_trace_render(). */
#define WEFT_RENDER_COLOR 0x1u /**< ANSI colours: errors red, header bold, details dim */
#define WEFT_RENDER_ASCII 0x2u /**< ASCII tree glyphs instead of box-drawing characters */
#define WEFT_RENDER_ATTRS 0x4u /**< key attributes (error.type, gen_ai.*, weft.*) per span */
#define WEFT_RENDER_EVENTS                                                                  \
    0x8u                        /**< span events under each span: the notable ones (weft.*, \
                                      exception) always, at most 3 others */
#define WEFT_RENDER_LINKS 0x10u /**< span links (at most 3 per span) under each span */
#define WEFT_RENDER_ALL   0x20u /**< print every span; without it a large trace is summarised */

/** Write @p trace to @p stream as a header (trace id, service, start, total duration, span
 * and error counts) followed by one line per span: tree glyphs, name, kind when not
 * INTERNAL, duration, and "ERROR: message" for failed spans. Control characters in names and
 * values are replaced so that stored data cannot drive the terminal.
 * With WEFT_RENDER_ATTRS, the attributes that say how a run, loop or step ended (weft.loop.*,
 * weft.run.status, weft.stuck_loop.*, weft.circuit_breaker.*, *reason*, error.type, ...) are
 * always printed; other key attributes within a per-line budget.
 * Unless WEFT_RENDER_ALL is set, a large trace is summarised so that the output stays bounded
 * (a few hundred lines whatever the span count): under one parent (roots and orphans count as
 * siblings of one another), siblings beyond the first
 * 10 of a name (40 in all, 300 in the whole trace) are replaced, with their subtrees, by one
 * line per name: "... 3987 more `invoke_agent coder` spans (3950 ok, 37 error)". Spans with
 * an error or a notable event, and their ancestors, stay visible (up to 20 per parent: the
 * first 10 and the last 10), and so does the last child of each parent.
 * @param flags WEFT_RENDER_* bits.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (writing to @p stream failed), WEFT_ENOMEM.
 * Ownership: borrows both for the call. */
WEFT_API weft_err weft_trace_render(const struct weft_trace *trace, FILE *stream, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_STORE_H */
