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
