/* runtime/dataset/dataset.c - datasets through the public API (include/weft/dataset.h,
 * `weft dataset`): names checked, new items built in memory from their sources (sources.h),
 * then stored with their version in one transaction of the state store (runtime/state/datasets.h).
 */
#include "runtime/dataset/sources.h"
#include "runtime/state/datasets.h"

#include "base/mem.h"
#include "base/time.h"
#include "base/uuid.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void say(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
say(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && err_len > 0) {
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
}

static bool
name_is_valid(const char *name, char *err, size_t err_len)
{
    size_t n = name != NULL ? strlen(name) : 0;

    if (n == 0 || n > WEFT_DATASET_NAME_MAX) {
        say(err, err_len, "dataset name '%s': expected 1 to 128 characters",
            name != NULL ? name : "");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.')) {
            say(err, err_len, "dataset name '%s': expected letters, digits, '-', '_' or '.'", name);
            return false;
        }
    }
    return true;
}

weft_err
weft__ds_open_rw(const char *state_path, struct rt_state **st, char *err, size_t err_len)
{
    char *def = state_path == NULL ? weft__state_default_path() : NULL;
    char why[512] = "";
    weft_err rc = WEFT_OK;

    if (state_path == NULL && def == NULL) {
        return WEFT_ENOMEM;
    }
    rc = weft__state_open(state_path != NULL ? state_path : def, st, why, sizeof(why));
    if (rc != WEFT_OK) {
        say(err, err_len, "%s", why[0] != '\0' ? why : "cannot open the state store");
    }
    weft__free(def);
    return rc;
}

/* The items @p src gives (runs first, then the file). */
static weft_err
build_items(struct rt_state *st,
            const struct weft_dataset_source *src,
            struct weft__ds_items *items,
            char *err,
            size_t err_len)
{
    weft_err rc = WEFT_OK;

    if (src == NULL) {
        return WEFT_OK;
    }
    if (src->from_runs || src->run_id_count > 0) {
        rc = weft__ds_items_from_runs(st, src, items, err, err_len);
    }
    if (rc == WEFT_OK && src->file != NULL) {
        rc = weft__ds_items_from_file(src->file, items, err, err_len);
    }
    return rc;
}

/* Store @p items as version @p version of @p name (inside the caller's transaction). */
static weft_err
store_items(struct rt_state *st, const char *name, struct weft__ds_items *items, uint64_t version)
{
    weft_err rc = WEFT_OK;

    for (size_t i = 0; rc == WEFT_OK && i < items->n; i++) {
        char id[WEFT_UUID_LEN + 1];

        weft__uuid_v4(id);
        items->v[i].id = weft__strdup(id);
        items->v[i].added_version = version;
        rc = items->v[i].id != NULL ? weft__ds_item_add(st, name, &items->v[i]) : WEFT_ENOMEM;
    }
    if (rc == WEFT_OK && items->n > 0) {
        rc = weft__ds_set_version(st, name, version);
    }
    return rc;
}

static weft_err
check_evaluators(const char *evaluators, char *err, size_t err_len)
{
    json_error_t jerr;
    json_t *doc = NULL;

    if (evaluators == NULL) {
        return WEFT_OK;
    }
    if (strlen(evaluators) > WEFT_DATASET_EVAL_MAX) {
        say(err, err_len, "%s", "evaluators: expected at most 64 KiB of JSON");
        return WEFT_ELIMIT;
    }
    doc = json_loads(evaluators, 0, &jerr);
    if (doc == NULL || (!json_is_object(doc) && !json_is_array(doc))) {
        say(err, err_len, "evaluators: expected a JSON object or array: %s",
            doc == NULL ? jerr.text : "another JSON value");
        json_decref(doc);
        return WEFT_EPARSE;
    }
    json_decref(doc);
    return WEFT_OK;
}

/* Create (@p is_create) or add to dataset @p name. */
static weft_err
create_or_add(const char *state_path,
              const char *name,
              const char *description,
              const char *evaluators,
              const struct weft_dataset_source *src,
              bool is_create,
              size_t *added,
              uint64_t *version,
              char *err,
              size_t err_len)
{
    struct weft__ds_items items = {0};
    struct weft_dataset ds = {0};
    struct rt_state *st = NULL;
    weft_err rc = weft__ds_open_rw(state_path, &st, err, err_len);

    if (rc == WEFT_OK) {
        rc = build_items(st, src, &items, err, err_len);
    }
    if (rc == WEFT_OK) {
        rc = weft__ds_begin(st);
        if (rc == WEFT_OK && is_create) {
            rc = weft__ds_create(st, name, description, evaluators, weft__now_ns());
            if (rc == WEFT_ESTATE) {
                say(err, err_len, "dataset '%s' exists (weft dataset add adds to it)", name);
            }
        }
        if (rc == WEFT_OK) {
            rc = weft__ds_get(st, name, &ds);
            if (rc == WEFT_ENOTFOUND) {
                say(err, err_len, "no dataset '%s' (weft dataset create makes one)", name);
            }
        }
        if (rc == WEFT_OK) {
            rc = store_items(st, name, &items, ds.version + 1);
        }
        rc = weft__ds_end(st, rc);
    }
    if (rc == WEFT_OK) {
        if (added != NULL) {
            *added = items.n;
        }
        if (version != NULL) {
            *version = items.n > 0 ? ds.version + 1 : ds.version;
        }
    } else if (err != NULL && err_len > 0 && err[0] == '\0') {
        say(err, err_len, "%s", weft_strerror(rc));
    }
    weft_dataset_cleanup(&ds);
    weft__ds_items_cleanup(&items);
    weft__state_close(st);
    return rc;
}

weft_err
weft_dataset_create(const char *state_path,
                    const char *name,
                    const char *description,
                    const char *evaluators,
                    const struct weft_dataset_source *source,
                    size_t *added,
                    char *err,
                    size_t err_len)
{
    weft_err rc = WEFT_OK;

    say(err, err_len, "%s", "");
    if (added != NULL) {
        *added = 0;
    }
    if (!name_is_valid(name, err, err_len)) {
        return WEFT_EINVAL;
    }
    if (description != NULL && strlen(description) > WEFT_DATASET_DESC_MAX) {
        say(err, err_len, "%s", "description: expected at most 4096 bytes");
        return WEFT_ELIMIT;
    }
    rc = check_evaluators(evaluators, err, err_len);
    if (rc != WEFT_OK) {
        return rc;
    }
    return create_or_add(state_path, name, description, evaluators, source, true, added, NULL, err,
                         err_len);
}

weft_err
weft_dataset_add(const char *state_path,
                 const char *name,
                 const struct weft_dataset_source *source,
                 size_t *added,
                 uint64_t *version,
                 char *err,
                 size_t err_len)
{
    say(err, err_len, "%s", "");
    if (added != NULL) {
        *added = 0;
    }
    if (!name_is_valid(name, err, err_len)) {
        return WEFT_EINVAL;
    }
    return create_or_add(state_path, name, NULL, NULL, source, false, added, version, err, err_len);
}

weft_err
weft_datasets_list(const char *state_path, struct weft_dataset **out, size_t *count)
{
    struct rt_state *st = NULL;
    weft_err rc = WEFT_OK;

    if (out == NULL || count == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    *count = 0;
    rc = weft__state_open_existing(state_path, &st);
    if (rc == WEFT_OK) {
        rc = weft__ds_list(st, out, count);
    }
    weft__state_close(st);
    return rc;
}

weft_err
weft_dataset_show(const char *state_path,
                  const char *name,
                  uint64_t version,
                  struct weft_dataset *ds,
                  struct weft_dataset_item **items,
                  size_t *count)
{
    return weft_dataset_items_page(state_path, name, version, 0, SIZE_MAX, ds, items, count, NULL);
}

weft_err
weft_dataset_items_page(const char *state_path,
                        const char *name,
                        uint64_t version,
                        size_t offset,
                        size_t max,
                        struct weft_dataset *ds,
                        struct weft_dataset_item **items,
                        size_t *count,
                        size_t *total)
{
    struct weft_dataset found = {0};
    struct rt_state *st = NULL;
    weft_err rc = WEFT_OK;

    if (items == NULL || count == NULL || name == NULL) {
        return WEFT_EINVAL;
    }
    *items = NULL;
    *count = 0;
    if (ds != NULL) {
        memset(ds, 0, sizeof(*ds));
    }
    if (total != NULL) {
        *total = 0;
    }
    rc = weft__state_open_existing(state_path, &st);
    if (rc == WEFT_OK) {
        rc = weft__ds_get(st, name, &found);
    }
    if (rc == WEFT_OK && version > found.version) {
        rc = WEFT_EINVAL;
    }
    version = version == 0 ? found.version : version;
    if (rc == WEFT_OK && total != NULL) {
        rc = weft__ds_items_count(st, name, version, total);
    }
    if (rc == WEFT_OK && max > 0) {
        rc = weft__ds_items(st, name, version, offset, max, items, count);
    }
    weft__state_close(st);
    if (rc == WEFT_OK && ds != NULL) {
        *ds = found;
    } else {
        weft_dataset_cleanup(&found);
    }
    return rc;
}

/* The id of the current item @p ref (an id or a prefix of 4 or more) names among @p items. */
static const char *
match_item(const struct weft_dataset_item *items,
           size_t n,
           const char *ref,
           const char *name,
           char *err,
           size_t err_len)
{
    const char *hit = NULL;
    size_t len = strlen(ref);

    for (size_t i = 0; len >= 4 && i < n; i++) {
        if (strcmp(items[i].id, ref) == 0) {
            return items[i].id;
        }
        if (strncmp(items[i].id, ref, len) == 0) {
            if (hit != NULL) {
                snprintf(err, err_len, "item '%s' of dataset '%s': names several items", ref, name);
                return NULL;
            }
            hit = items[i].id;
        }
    }
    if (hit == NULL) {
        snprintf(err, err_len, "no item '%s' in the latest version of dataset '%s'", ref, name);
    }
    return hit;
}

/* Remove @p ids from the latest version of @p name as version @p version (in a transaction). */
static weft_err
remove_items(struct rt_state *st,
             const struct weft_dataset *ds,
             const char *const *ids,
             size_t id_count,
             size_t *removed,
             char *err,
             size_t err_len)
{
    struct weft_dataset_item *items = NULL;
    size_t n = 0;
    weft_err rc = weft__ds_items(st, ds->name, ds->version, 0, SIZE_MAX, &items, &n);

    for (size_t i = 0; rc == WEFT_OK && i < id_count; i++) {
        const char *id =
            ids[i] != NULL ? match_item(items, n, ids[i], ds->name, err, err_len) : NULL;
        bool is_found = false;

        rc = id == NULL ? WEFT_ENOTFOUND
                        : weft__ds_item_remove(st, ds->name, id, ds->version + 1, &is_found);
        if (rc == WEFT_OK && is_found) {
            (*removed)++;
        }
    }
    if (rc == WEFT_OK && *removed > 0) {
        rc = weft__ds_set_version(st, ds->name, ds->version + 1);
    }
    weft_dataset_items_free(items, n);
    return rc;
}

weft_err
weft_dataset_rm(const char *state_path,
                const char *name,
                const char *const *ids,
                size_t id_count,
                size_t *removed,
                uint64_t *version,
                char *err,
                size_t err_len)
{
    struct weft_dataset ds = {0};
    struct rt_state *st = NULL;
    size_t n = 0;
    weft_err rc = WEFT_OK;

    say(err, err_len, "%s", "");
    if (!name_is_valid(name, err, err_len) || (ids == NULL && id_count > 0)) {
        return WEFT_EINVAL;
    }
    rc = weft__state_open_existing(state_path, &st);
    if (rc == WEFT_OK) {
        rc = weft__ds_begin(st);
        if (rc == WEFT_OK) {
            rc = weft__ds_get(st, name, &ds);
            if (rc == WEFT_ENOTFOUND) {
                say(err, err_len, "no dataset '%s'", name);
            }
        }
        if (rc == WEFT_OK) {
            rc = remove_items(st, &ds, ids, id_count, &n, err, err_len);
        }
        rc = weft__ds_end(st, rc);
    }
    weft__state_close(st);
    if (rc == WEFT_OK) {
        if (removed != NULL) {
            *removed = n;
        }
        if (version != NULL) {
            *version = ds.version + (n > 0 ? 1 : 0);
        }
    } else if (err != NULL && err_len > 0 && err[0] == '\0') {
        say(err, err_len, "%s", weft_strerror(rc));
    }
    weft_dataset_cleanup(&ds);
    return rc;
}

weft_err
weft_dataset_drop(const char *state_path, const char *name)
{
    struct rt_state *st = NULL;
    weft_err rc = WEFT_OK;

    if (!name_is_valid(name, NULL, 0)) {
        return WEFT_EINVAL;
    }
    rc = weft__state_open_existing(state_path, &st);
    if (rc == WEFT_OK) {
        rc = weft__ds_begin(st);
        if (rc == WEFT_OK) {
            rc = weft__ds_drop(st, name);
        }
        rc = weft__ds_end(st, rc);
    }
    weft__state_close(st);
    return rc;
}
