/* runtime/memory/skills.c - skill memory read back and pruned through the public API
 * (include/weft/skills.h, `weft skills`), over the state store's skill functions (state.h).
 *
 * A missing SQLite file is "no skills" for the caller to explain (WEFT_ENOTFOUND), never a new
 * empty file: reading must not create state. A PostgreSQL state (a URL) is always opened.
 */
#include "runtime/state/state.h"

#include "base/log.h"
#include "base/mem.h"

#include <string.h>
#include <unistd.h>
#include <weft/skills.h>

/* A copy of @p s, or NULL (with *is_oom set when @p s was not NULL). */
static char *
dup_or_null(const char *s, bool *is_oom)
{
    char *copy = NULL;

    if (s == NULL || s[0] == '\0') {
        return NULL;
    }
    copy = weft__strdup(s);
    *is_oom = *is_oom || copy == NULL;
    return copy;
}

/* The public records of @p in (taking its strings over) into a new array. */
static weft_err
publish(struct weft__skill *in, size_t n, struct weft_skill **out)
{
    struct weft_skill *skills = NULL;
    bool is_oom = false;

    *out = NULL;
    if (n == 0) {
        return WEFT_OK;
    }
    skills = weft__calloc(n, sizeof(*skills));
    if (skills == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        skills[i].id = dup_or_null(in[i].id, &is_oom);
        skills[i].trace_id = dup_or_null(in[i].trace_id, &is_oom);
        skills[i].span_id = dup_or_null(in[i].span_id, &is_oom);
        skills[i].agent = in[i].agent;
        skills[i].task = in[i].task;
        skills[i].solution = in[i].solution;
        skills[i].workflow = in[i].workflow;
        skills[i].run_id = in[i].run_id;
        in[i].agent = in[i].task = in[i].solution = in[i].workflow = in[i].run_id = NULL;
        skills[i].reward = in[i].reward;
        skills[i].created_ns = in[i].created_ns;
        skills[i].last_used_ns = in[i].last_used_ns;
        skills[i].uses = in[i].uses;
    }
    if (is_oom) {
        weft_skills_free(skills, n);
        return WEFT_ENOMEM;
    }
    *out = skills;
    return WEFT_OK;
}

weft_err
weft_skills_list(
    const char *state_path, const char *agent, size_t limit, struct weft_skill **out, size_t *count)
{
    struct rt_state *st = NULL;
    struct weft__skill *found = NULL;
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (out == NULL || count == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    *count = 0;
    if (limit > WEFT_SKILLS_LIST_MAX) {
        return WEFT_EINVAL;
    }
    err = weft__state_open_existing(state_path, &st);
    if (err == WEFT_OK) {
        err = weft__state_skills_list(st, agent, limit, &found, &n);
    }
    weft__state_close(st);
    if (err == WEFT_OK) {
        err = publish(found, n, out);
    }
    weft__skills_free(found, n);
    if (err == WEFT_OK) {
        *count = n;
    }
    return err;
}

weft_err
weft_skill_show(const char *state_path, const char *id_or_prefix, struct weft_skill **out)
{
    struct rt_state *st = NULL;
    struct weft__skill found;
    weft_err err = WEFT_OK;

    memset(&found, 0, sizeof(found));
    if (out == NULL || id_or_prefix == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (!weft__skill_ref_is_valid(id_or_prefix)) {
        return WEFT_EINVAL;
    }
    err = weft__state_open_existing(state_path, &st);
    if (err == WEFT_OK) {
        err = weft__state_skill_get(st, id_or_prefix, &found);
    }
    weft__state_close(st);
    if (err == WEFT_OK) {
        err = publish(&found, 1, out);
    }
    weft__skill_cleanup(&found);
    return err;
}

weft_err
weft_skills_forget(const char *state_path,
                   const char *id_or_prefix,
                   const char *agent,
                   size_t *removed)
{
    struct rt_state *st = NULL;
    weft_err err = WEFT_OK;

    if (removed != NULL) {
        *removed = 0;
    }
    if ((id_or_prefix == NULL && agent == NULL) ||
        (id_or_prefix != NULL && !weft__skill_ref_is_valid(id_or_prefix))) {
        return WEFT_EINVAL;
    }
    err = weft__state_open_existing(state_path, &st);
    if (err == WEFT_OK) {
        err = weft__state_skills_forget(st, id_or_prefix, agent, removed);
    }
    weft__state_close(st);
    return err;
}

void
weft_skills_free(struct weft_skill *skills, size_t count)
{
    if (skills == NULL) {
        return;
    }
    for (size_t i = 0; i < count; i++) {
        weft__free(skills[i].id);
        weft__free(skills[i].agent);
        weft__free(skills[i].task);
        weft__free(skills[i].solution);
        weft__free(skills[i].workflow);
        weft__free(skills[i].run_id);
        weft__free(skills[i].trace_id);
        weft__free(skills[i].span_id);
    }
    weft__free(skills);
}
