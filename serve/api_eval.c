/* serve/api_eval.c - the explorer's datasets and experiments (docs/serve.md, docs/experiments.md).
 *
 * Routes (GET, read-only):
 *   /api/v1/datasets                     weft.datasets/v1
 *   /api/v1/datasets/NAME[@V]            weft.dataset/v1 (?version=V as NAME@V; default latest)
 *   /api/v1/experiments[?dataset=NAME]   weft.experiments/v1, newest first
 *   /api/v1/experiments/REF              weft.experiment/v1 with its items (REF: an id, a unique
 *                                        prefix of 4+ characters, or a name: its newest)
 *   /api/v1/experiments/compare?a=&b=    weft.experiment_compare/v1
 * and POST /api/v1/datasets/NAME/items (token-guarded in http.c): one stored run added as an
 * item.
 *
 * The documents are report/experiment.h's, the ones `weft dataset list|show --json` and `weft
 * eval list|show|compare --json` print, so a pass rate reads the same in the terminal and the
 * page. Each request opens the state store through the public read API (include/weft/dataset.h)
 * and nothing else; the one write is weft_dataset_add()/weft_dataset_create(), one transaction.
 */
#include "api_int.h"

#include "report/experiment.h"
#include "runtime/dataset/exp_load.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/dataset.h>
#include <weft/weft.h>

#define REF_MAX (WEFT_DATASET_NAME_MAX + 32u) /* NAME@VERSION, or an experiment's reference */

/* A version as the CLI takes it: digits, from 1. */
static bool
parse_version(const char *text, uint64_t *out)
{
    char *end = NULL;

    if (text == NULL || text[0] < '0' || text[0] > '9') {
        return false;
    }
    *out = strtoull(text, &end, 10);
    return *end == '\0' && *out > 0;
}

static void
datasets_list(const struct weft__api_config *cfg, struct weft__api_reply *reply)
{
    struct weft_dataset *ds = NULL;
    size_t count = 0;
    weft_err err = weft_datasets_list(cfg->state_path, &ds, &count);

    if (err == WEFT_ENOTFOUND) {
        err = WEFT_OK; /* no state database yet: no datasets, as `weft dataset list` says */
    }
    if (err != WEFT_OK) {
        weft__api_reply_weft_error(reply, err, "state store");
        return;
    }
    weft__api_reply_json(reply, 200, weft__doc_datasets(ds, count));
    weft_datasets_free(ds, count);
}

/* @p ref NAME or NAME@VERSION; ?version= names the version too (not both). */
static void
dataset_show(const struct weft__api_config *cfg,
             const struct weft__api_request *req,
             const char *ref,
             struct weft__api_reply *reply)
{
    char name[REF_MAX];
    char msg[REF_MAX + 160];
    const char *at = strrchr(ref, '@');
    const char *arg = req->arg(req->ctx, "version");
    struct weft_dataset ds;
    struct weft_dataset_item *items = NULL;
    size_t count = 0;
    uint64_t version = 0;
    weft_err err = WEFT_OK;

    snprintf(name, sizeof(name), "%.*s", (int)(at != NULL ? (size_t)(at - ref) : strlen(ref)), ref);
    if ((at != NULL && (arg != NULL || !parse_version(at + 1, &version))) ||
        (arg != NULL && !parse_version(arg, &version)) || name[0] == '\0') {
        weft__api_reply_error(reply, 400,
                              "expected /api/v1/datasets/NAME, NAME@VERSION or NAME?version=V "
                              "(a version from 1)");
        return;
    }
    memset(&ds, 0, sizeof(ds));
    err = weft_dataset_show(cfg->state_path, name, version, &ds, &items, &count);
    if (err == WEFT_ENOTFOUND) {
        snprintf(msg, sizeof(msg),
                 "no dataset '%s' (GET /api/v1/datasets or `weft dataset list` shows them)", name);
        weft__api_reply_error(reply, 404, msg);
    } else if (err == WEFT_EINVAL) {
        snprintf(msg, sizeof(msg), "dataset %s has no version %llu", name,
                 (unsigned long long)version);
        weft__api_reply_error(reply, 400, msg);
    } else if (err != WEFT_OK) {
        weft__api_reply_weft_error(reply, err, "state store");
    } else {
        weft__api_reply_json(reply, 200, weft__doc_dataset(&ds, version, items, count));
    }
    weft_dataset_items_free(items, count);
    weft_dataset_cleanup(&ds);
}

static void
experiments_list(const struct weft__api_config *cfg,
                 const struct weft__api_request *req,
                 struct weft__api_reply *reply)
{
    const char *dataset = req->arg(req->ctx, "dataset");
    struct weft_experiment *list = NULL;
    size_t count = 0;
    weft_err err = weft_experiments_list(
        cfg->state_path, dataset != NULL && dataset[0] != '\0' ? dataset : NULL, &list, &count);

    if (err == WEFT_ENOTFOUND) {
        err = WEFT_OK; /* no state database yet: no experiments */
    }
    if (err != WEFT_OK) {
        weft__api_reply_weft_error(reply, err, "state store");
        return;
    }
    weft__api_reply_json(reply, 200, weft__doc_experiments(list, count));
    weft_experiments_free(list, count);
}

/* Experiment @p ref loaded into @p x; false with the reply set (404 none, 400 several). */
static bool
exp_load(const struct weft__api_config *cfg,
         const char *ref,
         struct weft__exp *x,
         struct weft__api_reply *reply)
{
    char msg[REF_MAX + 160];
    weft_err err = weft__exp_load(cfg->state_path, ref, x);

    if (err == WEFT_OK) {
        return true;
    }
    weft__exp_cleanup(x);
    if (err == WEFT_ENOTFOUND) {
        snprintf(msg, sizeof(msg),
                 "no experiment '%.*s' (an id, a prefix of 4+ characters or a name; GET "
                 "/api/v1/experiments or `weft eval list` shows them)",
                 (int)WEFT_DATASET_NAME_MAX, ref);
        weft__api_reply_error(reply, 404, msg);
    } else if (err == WEFT_EINVAL) {
        snprintf(msg, sizeof(msg), "'%.*s' names several experiments: give more of the id",
                 (int)WEFT_DATASET_NAME_MAX, ref);
        weft__api_reply_error(reply, 400, msg);
    } else {
        weft__api_reply_weft_error(reply, err, "state store");
    }
    return false;
}

static void
experiment_show(const struct weft__api_config *cfg, const char *ref, struct weft__api_reply *reply)
{
    struct weft__exp x;

    if (exp_load(cfg, ref, &x, reply)) {
        weft__api_reply_json(reply, 200, weft__doc_experiment(&x, true));
        weft__exp_cleanup(&x);
    }
}

static void
experiment_compare(const struct weft__api_config *cfg,
                   const struct weft__api_request *req,
                   struct weft__api_reply *reply)
{
    const char *ra = req->arg(req->ctx, "a");
    const char *rb = req->arg(req->ctx, "b");
    struct weft__exp a;
    struct weft__exp b;

    if (ra == NULL || rb == NULL || ra[0] == '\0' || rb[0] == '\0' || strlen(ra) >= REF_MAX ||
        strlen(rb) >= REF_MAX) {
        weft__api_reply_error(reply, 400,
                              "expected ?a=EXPERIMENT&b=EXPERIMENT (ids, prefixes or names; A the "
                              "baseline)");
        return;
    }
    if (!exp_load(cfg, ra, &a, reply)) {
        return;
    }
    if (exp_load(cfg, rb, &b, reply)) {
        weft__api_reply_json(reply, 200, weft__doc_experiment_compare(&a, &b));
        weft__exp_cleanup(&b);
    }
    weft__exp_cleanup(&a);
}

bool
weft__api_eval_get(const struct weft__api_config *cfg,
                   const struct weft__api_request *req,
                   const char *p,
                   struct weft__api_reply *reply)
{
    bool is_dataset = strncmp(p, "datasets/", 9) == 0;
    const char *ref = p + (is_dataset ? 9 : 12);

    if (strcmp(p, "datasets") == 0) {
        datasets_list(cfg, reply);
    } else if (strcmp(p, "experiments") == 0) {
        experiments_list(cfg, req, reply);
    } else if (strcmp(p, "experiments/compare") == 0) {
        experiment_compare(cfg, req, reply);
    } else if (!is_dataset && strncmp(p, "experiments/", 12) != 0) {
        return false;
    } else if (ref[0] == '\0' || strchr(ref, '/') != NULL || strlen(ref) >= REF_MAX) {
        weft__api_reply_error(reply, strchr(ref, '/') != NULL ? 404 : 400,
                              is_dataset ? "expected /api/v1/datasets/NAME[@VERSION]"
                                         : "expected /api/v1/experiments/REF (an id, a prefix "
                                           "of 4+ characters or a name)");
    } else if (is_dataset) {
        dataset_show(cfg, req, ref, reply);
    } else {
        experiment_show(cfg, ref, reply);
    }
    return true;
}

/* ---------------------------------------------------------------------------------------- */
/* POST /api/v1/datasets/NAME/items                                                          */

/* @p err of weft_dataset_add()/create() as a status. */
static unsigned
status_of(weft_err err)
{
    switch (err) {
    case WEFT_EINVAL:
    case WEFT_EPARSE:
    case WEFT_ELIMIT:
        return 400;
    case WEFT_ENOTFOUND:
        return 404;
    case WEFT_ESTATE:
        return 409;
    case WEFT_ENOMEM:
        return 503;
    default:
        return 500;
    }
}

/* The body {"run_id": ID, "create": BOOL} ("create" optional): its run id, or NULL with @p why. */
static const char *
parse_add_body(json_t *doc, bool *is_create, char *why, size_t why_len)
{
    const char *key = NULL;
    json_t *v = NULL;
    const json_t *create = json_object_get(doc, "create");
    const char *run_id = json_string_value(json_object_get(doc, "run_id"));

    if (!json_is_object(doc)) {
        snprintf(why, why_len,
                 "the body: expected a JSON object {\"run_id\": RUN, \"create\": true|false}");
        return NULL;
    }
    json_object_foreach(doc, key, v)
    {
        if (strcmp(key, "run_id") != 0 && strcmp(key, "create") != 0) {
            snprintf(why, why_len,
                     "the body: unknown member \"%.60s\"; expected \"run_id\" and \"create\"", key);
            return NULL;
        }
    }
    if (run_id == NULL || run_id[0] == '\0' || strlen(run_id) > 64) {
        snprintf(why, why_len, "the body: \"run_id\" must name a stored run (an id or a prefix)");
        return NULL;
    }
    if (create != NULL && !json_is_boolean(create)) {
        snprintf(why, why_len, "the body: \"create\" must be true or false");
        return NULL;
    }
    *is_create = json_is_true(create);
    return run_id;
}

void
weft__api_dataset_add(const struct weft__api_config *cfg,
                      const char *name,
                      const char *body,
                      size_t body_len,
                      struct weft__api_reply *reply)
{
    json_t *doc = body != NULL ? json_loadb(body, body_len, 0, NULL) : NULL;
    char msg[1024] = "";
    bool is_create = false;
    bool is_created = false;
    const char *run_id = parse_add_body(doc, &is_create, msg, sizeof(msg));
    struct weft_dataset_source src;
    size_t added = 0;
    uint64_t version = 0;
    weft_err err = WEFT_OK;

    memset(reply, 0, sizeof(*reply));
    if (run_id == NULL) {
        weft__api_reply_error(reply, 400, msg);
        json_decref(doc);
        return;
    }
    memset(&src, 0, sizeof(src));
    src.run_ids = &run_id;
    src.run_id_count = 1;
    err = weft_dataset_add(cfg->state_path, name, &src, &added, &version, msg, sizeof(msg));
    if (err == WEFT_ENOTFOUND && is_create) {
        /* Made here with the run as its first item (version 1), in one transaction; another
         * request that made it first leaves ours to add to it. */
        msg[0] = '\0';
        err =
            weft_dataset_create(cfg->state_path, name, NULL, NULL, &src, &added, msg, sizeof(msg));
        is_created = err == WEFT_OK;
        version = added > 0 ? 1 : 0;
        if (err == WEFT_ESTATE) {
            msg[0] = '\0';
            err = weft_dataset_add(cfg->state_path, name, &src, &added, &version, msg, sizeof(msg));
        }
    }
    if (err == WEFT_ENOTFOUND && !is_create) {
        snprintf(msg, sizeof(msg),
                 "no dataset '%.128s' (send \"create\": true to make it, or weft dataset create)",
                 name);
    }
    if (err != WEFT_OK) {
        char text[1200];
        snprintf(text, sizeof(text), "%s", msg[0] != '\0' ? msg : weft_strerror(err));
        weft__api_reply_error(reply, status_of(err), text);
    } else {
        weft__api_reply_json(reply, 201,
                             json_pack("{s:s, s:I, s:I, s:b}", "dataset", name, "version",
                                       (json_int_t)version, "added", (json_int_t)added, "created",
                                       is_created));
    }
    json_decref(doc);
}
