/* TEMPORARY until the PostgreSQL backend lands. */
#include "store.h"

weft_err
weft__store_pg_reader_open(const char *url, const struct weft__store_reader_ops **ops, void **impl)
{
    (void)url;
    (void)ops;
    (void)impl;
    return WEFT_EIO;
}

weft_err
weft__store_pg_exporter_new(const char *url, struct weft_exporter **out)
{
    (void)url;
    (void)out;
    return WEFT_EIO;
}

weft_err
weft__store_pg_export_texts(struct weft_exporter *ex,
                            const struct weft_span_data *const *spans,
                            size_t count,
                            const struct weft__store_texts *texts)
{
    (void)ex;
    (void)spans;
    (void)count;
    (void)texts;
    return WEFT_EINVAL;
}

weft_err
weft__store_pg_add_interrupted_span(const char *url, const struct weft_interrupted_span *span)
{
    (void)url;
    (void)span;
    return WEFT_EIO;
}

weft_err
weft__store_pg_gc(const char *url,
                  uint64_t cutoff_ns,
                  bool dry_run,
                  struct weft_store_gc_report *out,
                  char *error,
                  size_t error_len)
{
    (void)url;
    (void)cutoff_ns;
    (void)dry_run;
    (void)out;
    (void)error;
    (void)error_len;
    return WEFT_EIO;
}
