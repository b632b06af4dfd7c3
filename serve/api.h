/* serve/api.h - the explorer's JSON API under /api/v1 (docs/explorer.md): the documents of
 * `weft runs --json`, `weft run show --json` and `weft trace show --json` served as they are
 * (report/docs.h, so a status or a count reads the same in the terminal and the browser), plus
 * what only the explorer needs: why a run failed, two runs compared, the collaboration matrix.
 *
 * Every handler reads the stores through their public read APIs and nothing else: the state
 * store (runs, steps, corrections, datasets, experiments) and the span store (traces). Nothing
 * here writes but weft__api_dataset_add(), which the server offers only with its token.
 *
 * Thread-safety: handlers share nothing but the span store's pool (thread-safe): each call
 * takes a handle from it (or opens the store) for its reads and gives it back.
 */
#ifndef WEFT_SERVE_API_H
#define WEFT_SERVE_API_H

#include <stddef.h>
#include <weft/store.h>

struct weft__rows_cache;

/* Requests under /api/v1/ served at once; the next get 503 with Retry-After (the server's
 * admission, net/http_server.h). A trace document holds a page of spans (the
 * whole-span view) or the trace's outline (the waterfall) while it is built (docs/serve.md
 * gives the figures), so this bounds what readers can take. */
#define WEFT__API_MAX_ACTIVE 2

/* view=rows's cache of outlines (rows_cache.h), MiB, unless WEFT_SERVE_ROWS_CACHE_MB says: a
 * 100,000-span trace's outline is about 10 MB. */
#define WEFT__ROWS_CACHE_MB 64

/* Where the API reads. Borrowed for the server's lifetime. */
struct weft__api_config {
    const char *state_path; /* NULL: $WEFT_STATE_URL, else $WEFT_HOME/state.db */
    const char *store_path; /* span store; NULL: weft_store_default_path() */
    /* Open handles of the span store at store_path, reused across requests (a PostgreSQL
     * connection each); NULL: each request opens the store. */
    struct weft_store_pool *store_pool;
    /* view=rows's outlines kept between a page's parts (rows_cache.h); NULL: each part reads
     * the trace. */
    struct weft__rows_cache *rows_cache;
};

/* A request: its path below the host (no query string) and its query arguments. */
struct weft__api_request {
    const char *path;
    /* The value of query argument @p name, or NULL. */
    const char *(*arg)(void *ctx, const char *name);
    void *ctx;
};

/* An answer: a status and a JSON body (new, malloc'd; free()). */
struct weft__api_reply {
    unsigned status;
    char *body;
    size_t len;
    /* The body is columns of numbers (weft.rows/v1): gzip it fast (gzip.h, WEFT__GZIP_FAST). */
    bool is_numeric;
};

/* Answer GET @p req->path (which starts with /api/v1/). Every answer has a JSON body: the
 * document, or {"error": {"status", "message"}} with 400 (bad argument), 404 (no such run,
 * trace or route), 500 (a store failed) or 503 (out of memory, with a NULL body).
 * Ownership: @p reply->body is the caller's. Errors: in the reply. */
void weft__api_get(const struct weft__api_config *cfg,
                   const struct weft__api_request *req,
                   struct weft__api_reply *reply);

/* Largest body of POST /api/v1/datasets/NAME/items. */
#define WEFT__API_DATASET_ADD_MAX_BODY 4096u

/* POST /api/v1/datasets/NAME/items (serve/api_eval.c): @p body {"run_id": RUN, "create": BOOL}
 * adds stored run RUN (an id or a unique prefix) to dataset @p name as one item, a new version
 * (weft_dataset_add()); with "create": true a missing dataset is made first
 * (weft_dataset_create()). Answers 201 {"dataset", "version", "added", "created"}, or
 * {"error"} with 400 (a bad body, name or run: the store's sentence), 404 (no such dataset and
 * no "create"), 409, 500 or 503. The caller checked the token and the Content-Type.
 * Ownership: @p reply->body is the caller's. Thread-safety: any thread. */
void weft__api_dataset_add(const struct weft__api_config *cfg,
                           const char *name,
                           const char *body,
                           size_t body_len,
                           struct weft__api_reply *reply);

#endif /* WEFT_SERVE_API_H */
