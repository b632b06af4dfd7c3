/* runtime/state/state_rows.c - the rows both state backends read, turned into weft's structs
 * and JSON once (state_rows.h). Each reader takes a row through its backend's column accessors
 * and the column order both backends' SELECTs share; what differs between the databases (how a
 * boolean or a NULL reads) is the accessors' business, not the readers'.
 */
#include "runtime/state/state_rows.h"

#include "base/log.h"
#include "base/mem.h"

#include <stdio.h>
#include <string.h>

char *
weft__row_dup(const struct weft__state_row *row, int col, bool *is_oom)
{
    const char *v = weft__row_text(row, col);
    char *copy = NULL;

    if (v == NULL) {
        return NULL;
    }
    copy = weft__strdup(v);
    if (copy == NULL) {
        *is_oom = true;
    }
    return copy;
}

void
weft__row_copy(const struct weft__state_row *row, int col, char *out, size_t len)
{
    const char *v = weft__row_text(row, col);

    snprintf(out, len, "%s", v != NULL ? v : "");
}

void
weft__state_row_info(const struct weft__state_row *row, struct weft_run_info *info, bool *is_oom)
{
    info->run_id = weft__row_dup(row, 0, is_oom);
    info->workflow = weft__row_dup(row, 1, is_oom);
    info->workflow_path = weft__row_dup(row, 2, is_oom);
    info->session_id = weft__row_dup(row, 3, is_oom);
    info->input = weft__row_dup(row, 4, is_oom);
    info->status = weft__row_dup(row, 5, is_oom);
    info->reason = weft__row_dup(row, 6, is_oom);
    info->trace_id = weft__row_dup(row, 7, is_oom);
    info->root_span_id = weft__row_dup(row, 8, is_oom);
    info->resumed_from_trace = weft__row_dup(row, 9, is_oom);
    info->loops = weft__row_dup(row, 10, is_oom);
    info->started_ns = (uint64_t)weft__row_i64(row, 11);
    info->ended_ns = (uint64_t)weft__row_i64(row, 12);
    info->iterations = (size_t)weft__row_i64(row, 13);
    info->corrections = (size_t)weft__row_i64(row, 14);
    info->reward = weft__row_f64(row, 15);
    info->input_tokens = weft__row_i64(row, 16);
    info->output_tokens = weft__row_i64(row, 17);
    info->cost_usd = weft__row_f64(row, 18);
    info->step_count = (size_t)weft__row_i64(row, 19);
    weft__state_owner_view(info, weft__row_i64(row, 20), weft__row_text(row, 21),
                           (uint64_t)weft__row_i64(row, 22), (uint64_t)weft__row_i64(row, 23),
                           is_oom);
    info->origin_kind = weft__row_dup(row, 24, is_oom);
    info->origin_run_id = weft__row_dup(row, 25, is_oom);
    info->origin_step = weft__row_dup(row, 26, is_oom);
    info->is_pinned = weft__row_flag(row, 27);
    info->trace_sampling = weft__row_dup(row, 28, is_oom);
}

void
weft__state_row_step(const struct weft__state_row *row, struct state_step_row *out)
{
    memset(out, 0, sizeof(*out));
    out->id = weft__row_text(row, 0);
    out->actor = weft__row_text(row, 1);
    out->task = weft__row_text(row, 2);
    out->depends_on = weft__row_text(row, 3);
    out->status = weft__row_text(row, 4);
    out->attempts = (unsigned)weft__row_i64(row, 5);
    out->result = weft__row_text(row, 6);
    out->feedback = weft__row_text(row, 7);
    out->requested_by = weft__row_text(row, 8);
    out->executor = weft__row_text(row, 9);
    out->spec = weft__row_text(row, 10);
    out->parent = weft__row_text(row, 11);
    out->has_reward = !row->ops->is_null(row, 12);
    out->reward = weft__row_f64(row, 12);
    out->error_type = weft__row_text(row, 13);
    out->error = weft__row_text(row, 14);
    out->started_ns = (uint64_t)weft__row_i64(row, 15);
    out->ended_ns = (uint64_t)weft__row_i64(row, 16);
    out->task_uuid = weft__row_text(row, 17);
    out->retries = (unsigned)weft__row_i64(row, 18);
    out->is_dispatched = weft__row_flag(row, 19);
}

void
weft__state_row_correction(const struct weft__state_row *row, struct weft_run_correction *out)
{
    out->seq = (unsigned)weft__row_i64(row, 0);
    out->failed_step = (char *)weft__row_text(row, 1);
    out->error_type = (char *)weft__row_text(row, 2);
    out->inserted = (char *)weft__row_text(row, 3);
    out->depends_before = (char *)weft__row_text(row, 4);
    out->depends_after = (char *)weft__row_text(row, 5);
    out->created_ns = (uint64_t)weft__row_i64(row, 6);
}

weft_err
weft__state_row_message(const struct weft__state_row *row, void *ctx)
{
    const char *route = weft__row_text(row, 2);
    json_t *m = json_pack("{s:s, s:s, s:o}", "role", weft__row_text(row, 0), "content",
                          weft__row_text(row, 1), "route",
                          route != NULL ? json_string(route) : json_null());

    if (m == NULL || json_array_append_new((json_t *)ctx, m) != 0) {
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

weft_err
weft__state_row_cursor(const struct weft__state_row *row, void *ctx)
{
    json_t **cursors = ctx;
    const char *queue = weft__row_text(row, 0);

    if (*cursors == NULL) {
        *cursors = json_object();
    }
    if (*cursors == NULL || queue == NULL ||
        json_object_set_new(*cursors, queue, json_integer(weft__row_i64(row, 1))) != 0) {
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

weft_err
weft__state_row_exchange_count(const struct weft__state_row *row, void *ctx)
{
    char key[512];

    snprintf(key, sizeof(key), "%s/%s", weft__row_text(row, 0), weft__row_text(row, 1));
    if (json_object_set_new((json_t *)ctx, key, json_integer(weft__row_i64(row, 2))) != 0) {
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

void
weft__state_row_skill(const struct weft__state_row *row, struct weft__skill *s, bool *is_oom)
{
    memset(s, 0, sizeof(*s));
    weft__row_copy(row, 0, s->id, sizeof(s->id));
    s->agent = weft__row_dup(row, 1, is_oom);
    s->task = weft__row_dup(row, 2, is_oom);
    s->solution = weft__row_dup(row, 3, is_oom);
    s->workflow = weft__row_dup(row, 4, is_oom);
    s->run_id = weft__row_dup(row, 5, is_oom);
    weft__row_copy(row, 6, s->trace_id, sizeof(s->trace_id));
    weft__row_copy(row, 7, s->span_id, sizeof(s->span_id));
    s->reward = weft__row_f64(row, 8);
    s->created_ns = (uint64_t)weft__row_i64(row, 9);
    s->last_used_ns = (uint64_t)weft__row_i64(row, 10);
    s->uses = (uint64_t)weft__row_i64(row, 11);
}

weft_err
weft__state_row_skills(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_skills_read *r = ctx;
    double score = 0.0;
    bool is_oom = false;

    if (r->is_done || r->n == r->cap) {
        weft__state_row_enough(row);
        return WEFT_OK;
    }
    if (r->has_score) {
        score = weft__row_f64(row, 12);
        if (r->is_rank) {
            score = score > 0.0 ? score / (score + 1.0) : 0.0;
        }
        if (score < r->min_score) {
            r->is_done = true; /* rows come best first */
            weft__state_row_enough(row);
            return WEFT_OK;
        }
    }
    if (r->n == r->rows_cap) {
        size_t cap = r->rows_cap * 2 + 8;
        struct weft__skill *grown = weft__realloc(r->rows, cap * sizeof(*grown));
        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        r->rows = grown;
        r->rows_cap = cap;
    }
    weft__state_row_skill(row, &r->rows[r->n], &is_oom);
    r->rows[r->n++].score = score;
    return is_oom ? WEFT_ENOMEM : WEFT_OK;
}

weft_err
weft__state_skills_take(struct weft__state_skills_read *r,
                        weft_err err,
                        struct weft__skill **out,
                        size_t *count)
{
    if (err != WEFT_OK) {
        weft__skills_free(r->rows, r->n);
        return err;
    }
    *out = r->rows;
    *count = r->n;
    return WEFT_OK;
}

void
weft__state_row_team(const struct weft__state_row *row, struct weft__state_team *t, bool *is_oom)
{
    weft__row_copy(row, 0, t->id, sizeof(t->id));
    t->name = weft__row_dup(row, 1, is_oom);
    t->path = weft__row_dup(row, 2, is_oom);
    t->goal = weft__row_dup(row, 3, is_oom);
    t->document = weft__row_dup(row, 4, is_oom);
    t->run_id = weft__row_dup(row, 5, is_oom);
    t->created_ns = (uint64_t)weft__row_i64(row, 6);
}

weft_err
weft__state_row_dead(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_dead_scan *scan = ctx;
    struct weft__state_dead *d = NULL;
    weft_err err = WEFT_OK;

    if (weft__state_owner_is_alive(weft__row_i64(row, 7), weft__row_text(row, 2),
                                   (uint64_t)weft__row_i64(row, 8), scan->now)) {
        return WEFT_OK;
    }
    if (*scan->n == scan->cap) {
        size_t cap = scan->cap * 2 + 4;
        struct weft__state_dead *grown = weft__realloc(*scan->dead, cap * sizeof(*grown));
        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        *scan->dead = grown;
        scan->cap = cap;
    }
    d = &(*scan->dead)[(*scan->n)++];
    memset(d, 0, sizeof(*d));
    for (int i = 0; i < 7; i++) {
        const char *v = weft__row_text(row, i);
        d->text[i] = v != NULL ? weft__strdup(v) : NULL;
        if (v != NULL && d->text[i] == NULL) {
            err = WEFT_ENOMEM;
        }
    }
    d->pid = weft__row_i64(row, 7);
    d->root_started_ns = (uint64_t)weft__row_i64(row, 9);
    d->ended_ns =
        weft__state_dead_end(d, (uint64_t)weft__row_i64(row, 8), (uint64_t)weft__row_i64(row, 11),
                             (uint64_t)weft__row_i64(row, 10));
    return err;
}

weft_err
weft__state_row_open_step(const struct weft__state_row *row, void *ctx)
{
    return weft__state_dead_add_step(ctx, weft__row_text(row, 0), weft__row_text(row, 1),
                                     weft__row_text(row, 2), (uint64_t)weft__row_i64(row, 3));
}

weft_err
weft__state_row_lease(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_lease_read *r = ctx;
    const char *token = weft__row_text(row, 2);
    const char *host = weft__row_text(row, 1);

    if (r->has_row) {
        return WEFT_OK;
    }
    r->has_row = true;
    if (token == NULL || strcmp(token, r->own_token) == 0 ||
        !weft__state_owner_is_alive(weft__row_i64(row, 0), host, (uint64_t)weft__row_i64(row, 4),
                                    r->now)) {
        return WEFT_OK;
    }
    r->holder->pid = weft__row_i64(row, 0);
    snprintf(r->holder->host, sizeof(r->holder->host), "%s", host != NULL ? host : "?");
    r->holder->since_ns = (uint64_t)weft__row_i64(row, 3);
    r->holder->heartbeat_ns = (uint64_t)weft__row_i64(row, 4);
    return WEFT_ESTATE;
}

const char *
weft__state_row_payload(const struct weft__state_row *row,
                        int col,
                        int ref_col,
                        const struct weft__payload_source *src,
                        const char *where,
                        struct weft__buf *buf,
                        bool *is_oom)
{
    const char *ref = weft__row_text(row, ref_col);
    weft_err err = WEFT_OK;

    if (ref == NULL) {
        return weft__row_text(row, col);
    }
    weft__buf_reset(buf);
    err = weft__payload_get(ref, src, buf);
    if (err != WEFT_OK) {
        *is_oom = err == WEFT_ENOMEM;
        if (where != NULL) {
            WEFT_LOG(WEFT_LOG_WARN, "state: payload %.12s on %s: %s", ref, where,
                     weft_strerror(err));
        } else {
            WEFT_LOG(WEFT_LOG_WARN, "state: payload %.12s: %s", ref, weft_strerror(err));
        }
        return NULL;
    }
    return buf->data;
}

weft_err
weft__state_row_first(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_first *first = ctx;

    if (first->has_row) {
        return WEFT_OK;
    }
    first->has_row = true;
    weft__state_row_enough(row);
    return first->fn(row, first->ctx);
}

weft_err
weft__state_row_int(const struct weft__state_row *row, void *ctx)
{
    *(int64_t *)ctx = weft__row_i64(row, 0);
    return WEFT_OK;
}

weft_err
weft__state_row_int_pair(const struct weft__state_row *row, void *ctx)
{
    ((int64_t *)ctx)[0] = weft__row_i64(row, 0);
    ((int64_t *)ctx)[1] = weft__row_i64(row, 1);
    return WEFT_OK;
}

weft_err
weft__state_row_bool(const struct weft__state_row *row, void *ctx)
{
    *(bool *)ctx = weft__row_flag(row, 0);
    return WEFT_OK;
}

weft_err
weft__state_row_strdup(const struct weft__state_row *row, void *ctx)
{
    char **out = ctx;

    *out = weft__strdup(weft__row_str(row, 0));
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

weft_err
weft__state_row_text_into(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_text_out *t = ctx;

    t->is_null = row->ops->is_null(row, 0);
    weft__row_copy(row, 0, t->out, t->len);
    return WEFT_OK;
}

weft_err
weft__state_row_step_each(const struct weft__state_row *row, void *ctx)
{
    const struct weft__state_each *e = ctx;
    struct state_step_row step;

    weft__state_row_step(row, &step);
    return e->step_fn(&step, e->user_data);
}

weft_err
weft__state_row_correction_each(const struct weft__state_row *row, void *ctx)
{
    const struct weft__state_each *e = ctx;
    struct weft_run_correction c;

    weft__state_row_correction(row, &c);
    return e->correction_fn(&c, e->user_data);
}

weft_err
weft__state_row_gc_each(const struct weft__state_row *row, void *ctx)
{
    const struct weft__state_each *e = ctx;

    return e->gc_fn(weft__row_str(row, 0), (uint64_t)weft__row_i64(row, 1), e->user_data);
}

weft_err
weft__state_row_info_first(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_info_read *r = ctx;

    if (!r->has_row) {
        weft__state_row_info(row, r->info, &r->is_oom);
        r->has_row = true;
    }
    return WEFT_OK;
}

weft_err
weft__state_row_resolve(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_resolve *r = ctx;
    const char *id = weft__row_text(row, 0);

    if (r->is_exact || id == NULL) {
        return WEFT_OK;
    }
    if (r->matches == 0) {
        snprintf(r->out, r->out_len, "%s", id);
    }
    r->matches++;
    if (strcmp(id, r->ref) == 0) {
        r->matches = 1;
        r->is_exact = true;
    }
    return WEFT_OK;
}

weft_err
weft__state_resolve_end(const struct weft__state_resolve *r, char *err, size_t err_len)
{
    if (r->matches == 1) {
        return WEFT_OK;
    }
    if (r->matches > 1) {
        snprintf(err, err_len, "'%.64s' matches several runs", r->ref);
        return WEFT_EINVAL;
    }
    snprintf(err, err_len, "no run '%.64s'", r->ref);
    return WEFT_ENOTFOUND;
}

weft_err
weft__state_row_teams(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_teams_read *r = ctx;
    bool is_oom = false;

    if (r->n == r->cap) {
        weft__state_row_enough(row);
        return WEFT_OK;
    }
    if (r->n == r->rows_cap) {
        size_t cap = r->rows_cap * 2 + 8;
        struct weft__state_team *grown = weft__realloc(r->rows, cap * sizeof(*grown));
        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        r->rows = grown;
        r->rows_cap = cap;
    }
    memset(&r->rows[r->n], 0, sizeof(r->rows[r->n]));
    weft__state_row_team(row, &r->rows[r->n++], &is_oom);
    return is_oom ? WEFT_ENOMEM : WEFT_OK;
}

weft_err
weft__state_teams_take(struct weft__state_teams_read *r,
                       weft_err err,
                       struct weft__state_team **out,
                       size_t *count)
{
    if (err != WEFT_OK) {
        weft__state_teams_free(r->rows, r->n);
        return err;
    }
    *out = r->rows;
    *count = r->n;
    return WEFT_OK;
}

void
weft__state_payload_read_init(struct weft__state_payload_read *r,
                              const struct weft__payload_source *src,
                              const char *where)
{
    memset(r, 0, sizeof(*r));
    r->src = *src;
    r->where = where;
    r->err = WEFT_ENOTFOUND;
    weft__buf_init(&r->buf[0], 0);
    weft__buf_init(&r->buf[1], 0);
}

void
weft__state_payload_read_cleanup(struct weft__state_payload_read *r)
{
    weft__buf_cleanup(&r->buf[0]);
    weft__buf_cleanup(&r->buf[1]);
}

weft_err
weft__state_row_script(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_payload_read *r = ctx;
    bool is_oom = false;
    const char *text = weft__state_row_payload(row, 2, 3, &r->src, r->where, &r->buf[0], &is_oom);
    json_t *entry = text != NULL ? json_loads(text, 0, NULL) : NULL;

    r->n +=
        weft__state_script_add(r->responses, weft__row_text(row, 0), weft__row_text(row, 1), entry)
            ? 1
            : 0;
    return is_oom ? WEFT_ENOMEM : WEFT_OK;
}

weft_err
weft__state_row_tool_result(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_payload_read *r = ctx;
    struct weft__state_tool_result t;
    bool is_oom = false;

    t.step_id = weft__row_text(row, 0);
    t.attempt = (unsigned)weft__row_i64(row, 1);
    t.seq = (unsigned)weft__row_i64(row, 2);
    t.tool = weft__row_text(row, 3);
    t.kind = weft__row_text(row, 4);
    t.request = weft__state_row_payload(row, 5, 7, &r->src, r->where, &r->buf[0], &is_oom);
    t.outcome = weft__state_row_payload(row, 6, 8, &r->src, r->where, &r->buf[1], &is_oom);
    if (is_oom) {
        return WEFT_ENOMEM;
    }
    if (t.request == NULL || t.outcome == NULL) {
        return WEFT_OK;
    }
    return r->tool_fn(&t, r->user_data);
}

weft_err
weft__state_row_snapshot(const struct weft__state_row *row, void *ctx)
{
    struct weft__state_payload_read *r = ctx;
    const char *text = NULL;
    bool is_oom = false;

    if (row->ops->is_null(row, 0) && row->ops->is_null(row, 1)) {
        return WEFT_OK;
    }
    text = weft__state_row_payload(row, 0, 1, &r->src, r->where, &r->buf[0], &is_oom);
    *r->out = text != NULL ? weft__strdup(text) : NULL;
    r->err = is_oom || (text != NULL && *r->out == NULL) ? WEFT_ENOMEM
             : text == NULL                              ? WEFT_EIO
                                                         : WEFT_OK;
    return WEFT_OK;
}
