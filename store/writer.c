/* store/writer.c - the span store's write path, for every backend: the store exporter, the
 * write of a batch whose JSON columns OTLP ingest built ahead, and the spans of interrupted
 * runs, each sent to the backend the location names (store.h). */
#include "store.h"

weft_err
weft_store_exporter_new(const char *db_path, struct weft_exporter **out)
{
    char location[4096];
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (db_path == NULL) {
        err = weft_store_default_path(location, sizeof(location));
        if (err != WEFT_OK) {
            return err;
        }
        db_path = location;
    }
    return weft__store_is_pg_url(db_path) ? weft__store_pg_exporter_new(db_path, out)
                                          : weft__store_sqlite_exporter_new(db_path, out);
}

weft_err
weft__store_export_texts(struct weft_exporter *ex,
                         const struct weft_span_data *const *spans,
                         size_t count,
                         const struct weft__store_texts *texts)
{
    weft_err err = weft__store_sqlite_export_texts(ex, spans, count, texts);

    /* WEFT_EINVAL: not a SQLite store exporter (or texts of another count, which the other
     * backend refuses alike). */
    return err == WEFT_EINVAL ? weft__store_pg_export_texts(ex, spans, count, texts) : err;
}

weft_err
weft_store_add_interrupted_span(const char *db_path, const struct weft_interrupted_span *span)
{
    char location[4096];
    weft_err err = WEFT_OK;

    if (db_path == NULL) {
        err = weft_store_default_path(location, sizeof(location));
        if (err != WEFT_OK) {
            return err;
        }
        db_path = location;
    }
    return weft__store_is_pg_url(db_path) ? weft__store_pg_add_interrupted_span(db_path, span)
                                          : weft__store_sqlite_add_interrupted_span(db_path, span);
}
