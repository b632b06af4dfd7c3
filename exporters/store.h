/* exporters/store.h - private declarations shared by the files of the local span store:
 * store_schema.c (default path, schema, identity checks), store_json.c (the JSON columns and
 * span facts), store_writer.c (the exporter), store_read.c (the read API and tree order), and
 * their one consumer outside exporters/, the renderer in report/render.c.
 *
 * Dependencies point one way: writer and reader use schema and JSON; the renderer uses the
 * reader (tree order, loaded traces); nothing here knows about rendering. Nothing here is
 * public API.
 */
#ifndef WEFT_EXPORTERS_STORE_H
#define WEFT_EXPORTERS_STORE_H

#include "base/arena.h"
#include "base/buf.h"

#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <weft/export.h>
#include <weft/store.h>

#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_JSON_COLUMN_MAX (64u << 20) /* bytes of one JSON column, written or read */

/* --- store_schema.c ------------------------------------------------------------------------ */

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

/* --- store_json.c -------------------------------------------------------------------------- */

/* Write the JSON of a span's attributes, events and links, as the store keeps them, into
 * @p out (its contents replaced; data never NULL on success). @return WEFT_OK or WEFT_ENOMEM
 * (also past the buffer's cap, or for an attribute with a NULL key). */
weft_err weft__store_attrs_text(const struct weft_attr *attrs, size_t count, struct weft__buf *out);
weft_err weft__store_events_text(const struct weft_span_data *span, struct weft__buf *out);
weft_err weft__store_links_text(const struct weft_span_data *span, struct weft__buf *out);

/* A batch's JSON columns written ahead of the store's writer, so that the requests weft serve
 * ingests at once build theirs in parallel while one of them holds the writer (ingest.c):
 * column k of span i (k = 0 attributes, 1 events, 2 links) is column 3 * i + k. */
struct weft__store_texts {
    struct weft__buf text; /* the columns back to back, each closed by a NUL */
    size_t *starts;        /* 3 * count + 1 offsets into text */
    size_t count;          /* spans */
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

/* --- store_checkpoint.c -------------------------------------------------------------------- */
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

/* service.name of the span's resource, or NULL. Ownership: borrowed from @p span. */
const char *weft__store_service_name(const struct weft_span_data *span);

/* The span has a parent with a non-zero id (a zero parent id counts as none). */
bool weft__store_has_parent(const struct weft_span_data *span);

/* --- store_read.c -------------------------------------------------------------------------- */

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

#endif /* WEFT_EXPORTERS_STORE_H */
