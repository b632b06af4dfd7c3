/* serve/api_int.h - what the API's route files (api.c, api_traces.c, api_rows.c,
 * api_compare.c, api_eval.c) share: the answer helpers and argument parsing of api.c, and the
 * routes kept in files of their own. Internal to serve/.
 */
#ifndef WEFT_SERVE_API_INT_H
#define WEFT_SERVE_API_INT_H

#include "api.h"
#include "rows_cache.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct weft_run_details;
struct weft_trace;

/* @p doc (stolen; NULL: out of memory, 503) as the answer with @p status. */
void weft__api_reply_json(struct weft__api_reply *reply, unsigned status, json_t *doc);

/* {"error": {"status", "message"}} with @p status. */
void weft__api_reply_error(struct weft__api_reply *reply, unsigned status, const char *message);

/* @p err of a store read as 404, 400, 503 or 500, with "@p what: <weft_strerror>". */
void weft__api_reply_weft_error(struct weft__api_reply *reply, weft_err err, const char *what);

/* A span store handle for one request: the pool's when the server keeps one, else the store
 * opened. @return as weft_store_pool_acquire() / weft_store_open(). Give it back with
 * weft__api_store_put() whatever was returned (NULL is fine). */
weft_err weft__api_store_get(const struct weft__api_config *cfg, struct weft_store **store);
void weft__api_store_put(const struct weft__api_config *cfg, struct weft_store *store);

/* Query argument @p name as a count in [0, @p max]; @p def when absent; false when malformed. */
bool weft__api_arg_size(
    const struct weft__api_request *req, const char *name, size_t def, size_t max, size_t *out);

/* Trace @p ref (an id or a unique prefix) loaded whole, or NULL with the reply set to its
 * error. Ownership: the caller frees it with weft_trace_free(). */
struct weft_trace *weft__api_load_trace(const struct weft__api_config *cfg,
                                        const char *ref,
                                        struct weft__api_reply *reply);

/* Step @p id's index in @p run, or SIZE_MAX. */
size_t weft__api_step_index(const struct weft_run_details *run, const char *id);

/* GET /api/v1/compare (api_compare.c). */
void weft__api_compare(const struct weft__api_config *cfg,
                       const struct weft__api_request *req,
                       struct weft__api_reply *reply);

/* GET /api/v1/datasets[/NAME[@V]] and /api/v1/experiments[/REF|/compare] (api_eval.c), @p p
 * the path after /api/v1/. @return false when @p p is none of them (the reply untouched). */
bool weft__api_eval_get(const struct weft__api_config *cfg,
                        const struct weft__api_request *req,
                        const char *p,
                        struct weft__api_reply *reply);

/* GET /api/v1/traces (api_traces.c). */
void weft__api_traces_list(const struct weft__api_config *cfg,
                           const struct weft__api_request *req,
                           struct weft__api_reply *reply);

/* The view every part of weft.rows/v1 is written from (api_rows.c): @p rows (taken, freed on
 * failure) with the whole trace's error count, time extent and critical path; refs 1, release
 * with weft__rows_view_release(). NULL: out of memory. */
struct weft__rows_view *weft__api_rows_view(struct weft_trace_rows *rows);

/* weft.rows/v1 (api_rows.c): the fields of @p head (stolen; NULL: out of memory), then rows
 * [@p offset, @p offset + @p limit) of @p view (borrowed) as columns, with the whole trace's
 * error count, time extent and critical path. */
void weft__api_rows_reply(struct weft__api_reply *reply,
                          json_t *head,
                          const struct weft__rows_view *view,
                          size_t offset,
                          size_t limit);

#endif /* WEFT_SERVE_API_INT_H */
