/* runtime/plan.c - plan steps, the router's queries over them, and plan checks.
 *
 * Plans are small (tens of steps in practice, a few thousand in benchmarks), so the queries
 * scan linearly in plan order: that order is the router's tie-break, and a scan keeps the
 * code obviously right.
 */
#include "plan.h"

#include "base/mem.h"

#include <stdio.h>
#include <string.h>

#define NONE ((size_t)-1)

static const char *const status_names[] = {"pending", "in_progress", "completed",
                                           "failed",  "paused",      "skipped"};

bool
weft__step_status_parse(const char *name, step_status *out)
{
    for (size_t i = 0; i < sizeof(status_names) / sizeof(status_names[0]); i++) {
        if (strcmp(name, status_names[i]) == 0) {
            *out = (step_status)i;
            return true;
        }
    }
    return false;
}

static const char *const executor_names[] = {"agent", "command", "file_writer", "http_call"};

const char *
weft__step_executor_name(step_executor executor)
{
    if ((size_t)executor >= sizeof(executor_names) / sizeof(executor_names[0])) {
        return "unknown";
    }
    return executor_names[executor];
}

bool
weft__step_executor_parse(const char *name, step_executor *out)
{
    for (size_t i = 0; i < sizeof(executor_names) / sizeof(executor_names[0]); i++) {
        if (strcmp(name, executor_names[i]) == 0) {
            *out = (step_executor)i;
            return true;
        }
    }
    return false;
}

const char *
weft__step_status_name(step_status status)
{
    if ((size_t)status >= sizeof(status_names) / sizeof(status_names[0])) {
        return "unknown";
    }
    return status_names[status];
}

void
weft__plan_init(struct plan *plan)
{
    memset(plan, 0, sizeof(*plan));
    plan->next_number = 1;
}

static void
step_cleanup(struct plan_step *s)
{
    weft__free(s->id);
    weft__free(s->task);
    for (size_t i = 0; i < s->depends_count; i++) {
        weft__free(s->depends_on[i]);
    }
    weft__free(s->depends_on);
    weft__free(s->result);
    weft__free(s->feedback);
    weft__free(s->requested_by);
    weft__free(s->parent);
    weft__free(s->extra_input);
    weft__free(s->error_type);
    json_decref(s->spec);
    json_decref(s->error);
}

void
weft__plan_cleanup(struct plan *plan)
{
    if (plan == NULL) {
        return;
    }
    for (size_t i = 0; i < plan->count; i++) {
        step_cleanup(&plan->steps[i]);
    }
    weft__free(plan->steps);
    memset(plan, 0, sizeof(*plan));
}

weft_err
weft__plan_append(struct plan *plan,
                  const char *id,
                  size_t agent,
                  const char *task,
                  const char *const *depends_on,
                  size_t depends_count,
                  size_t *index)
{
    struct plan_step s;
    char generated[32];
    size_t number = plan->next_number;

    if (plan->count >= PLAN_MAX_STEPS) {
        return WEFT_ELIMIT;
    }
    if (id == NULL) {
        /* Skip numbers an explicit id already took ("s3" given by a workflow's plan). */
        do {
            snprintf(generated, sizeof(generated), "s%zu", number++);
        } while (weft__plan_find(plan, generated) != NONE);
        id = generated;
    }
    memset(&s, 0, sizeof(s));
    s.flow_node = -1;
    s.item = -1;
    if (plan->count == plan->cap) {
        size_t cap = plan->cap == 0 ? 8 : plan->cap * 2;
        struct plan_step *grown = weft__realloc(plan->steps, cap * sizeof(*grown));
        if (grown == NULL) {
            return WEFT_ENOMEM;
        }
        plan->steps = grown;
        plan->cap = cap;
    }
    s.id = weft__strdup(id);
    s.task = weft__strdup(task != NULL ? task : "");
    s.agent = agent;
    if (depends_count > 0) {
        s.depends_on = weft__calloc(depends_count, sizeof(*s.depends_on));
        if (s.depends_on == NULL) {
            goto fail;
        }
        for (size_t i = 0; i < depends_count; i++) {
            s.depends_on[i] = weft__strdup(depends_on[i]);
            if (s.depends_on[i] == NULL) {
                s.depends_count = i;
                goto fail;
            }
        }
        s.depends_count = depends_count;
    }
    if (s.id == NULL || s.task == NULL) {
        goto fail;
    }
    plan->steps[plan->count] = s;
    if (index != NULL) {
        *index = plan->count;
    }
    plan->count++;
    plan->version++;
    if (id == generated) {
        plan->next_number = number;
    }
    return WEFT_OK;
fail:
    step_cleanup(&s);
    return WEFT_ENOMEM;
}

void
weft__plan_truncate(struct plan *plan, size_t count)
{
    while (plan->count > count) {
        step_cleanup(&plan->steps[--plan->count]);
    }
    plan->version++;
}

size_t
weft__plan_find(const struct plan *plan, const char *id)
{
    for (size_t i = 0; i < plan->count; i++) {
        if (strcmp(plan->steps[i].id, id) == 0) {
            return i;
        }
    }
    return NONE;
}

size_t
weft__plan_in_progress(const struct plan *plan)
{
    for (size_t i = 0; i < plan->count; i++) {
        if (plan->steps[i].status == STEP_IN_PROGRESS) {
            return i;
        }
    }
    return NONE;
}

static bool
dependency_blocked(const struct plan *plan, const struct plan_step *s)
{
    for (size_t d = 0; d < s->depends_count; d++) {
        size_t j = weft__plan_find(plan, s->depends_on[d]);
        if (j == NONE || plan->steps[j].status == STEP_FAILED ||
            plan->steps[j].status == STEP_SKIPPED) {
            return true;
        }
    }
    return false;
}

size_t
weft__plan_skip_blocked(struct plan *plan)
{
    size_t skipped = 0;
    bool is_changed = false;

    /* Only a failed or skipped step can block others: the common case costs one scan. */
    for (size_t i = 0; i < plan->count && !is_changed; i++) {
        is_changed = plan->steps[i].status == STEP_FAILED || plan->steps[i].status == STEP_SKIPPED;
    }
    while (is_changed) {
        is_changed = false;
        for (size_t i = 0; i < plan->count; i++) {
            struct plan_step *s = &plan->steps[i];
            if (s->status == STEP_PENDING && dependency_blocked(plan, s)) {
                s->status = STEP_SKIPPED;
                skipped++;
                is_changed = true;
            }
        }
    }
    return skipped;
}

bool
weft__plan_is_ready(const struct plan *plan, size_t i)
{
    const struct plan_step *s = &plan->steps[i];

    for (size_t d = 0; d < s->depends_count; d++) {
        size_t j = weft__plan_find(plan, s->depends_on[d]);
        if (j == NONE || plan->steps[j].status != STEP_COMPLETED) {
            return false;
        }
    }
    return true;
}

size_t
weft__plan_next_ready(const struct plan *plan, size_t agent)
{
    for (size_t i = 0; i < plan->count; i++) {
        const struct plan_step *s = &plan->steps[i];
        if ((s->status == STEP_PENDING || s->status == STEP_PAUSED) &&
            (agent == NONE || (s->executor == EXEC_AGENT && s->agent == agent)) &&
            weft__plan_is_ready(plan, i)) {
            return i;
        }
    }
    return NONE;
}

size_t
weft__plan_count_status(const struct plan *plan, step_status status)
{
    size_t n = 0;

    for (size_t i = 0; i < plan->count; i++) {
        n += plan->steps[i].status == status;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* Checks                                                                                      */

void
weft__plan_check_init(struct plan_check *check)
{
    memset(check, 0, sizeof(*check));
}

void
weft__plan_check_add(struct plan_check *check,
                     const char *id,
                     const char *const *deps,
                     size_t dep_count)
{
    if (check->count == check->cap) {
        size_t cap = check->cap == 0 ? 8 : check->cap * 2;
        char **ids = weft__realloc(check->ids, cap * sizeof(*ids));
        const char *const **d = NULL;
        size_t *n = NULL;
        if (ids == NULL) {
            check->is_oom = true;
            return;
        }
        check->ids = ids;
        d = weft__realloc((void *)check->deps, cap * sizeof(*d));
        if (d == NULL) {
            check->is_oom = true;
            return;
        }
        check->deps = d;
        n = weft__realloc(check->dep_counts, cap * sizeof(*n));
        if (n == NULL) {
            check->is_oom = true;
            return;
        }
        check->dep_counts = n;
        check->cap = cap;
    }
    check->ids[check->count] = (char *)id;
    check->deps[check->count] = deps;
    check->dep_counts[check->count] = dep_count;
    check->count++;
}

static size_t
check_find(const struct plan_check *check, const char *id)
{
    for (size_t i = 0; i < check->count; i++) {
        if (check->ids[i] != NULL && strcmp(check->ids[i], id) == 0) {
            return i;
        }
    }
    return NONE;
}

/* Depth-first search with three colours; on a back edge, write the cycle into message. */
static bool
find_cycle(
    struct plan_check *check, size_t node, unsigned char *colour, size_t *stack, size_t depth)
{
    colour[node] = 1;
    stack[depth] = node;
    for (size_t d = 0; d < check->dep_counts[node]; d++) {
        size_t next = check_find(check, check->deps[node][d]);
        if (next == NONE) {
            continue;
        }
        if (colour[next] == 1) {
            size_t len = 0;
            size_t start = 0;
            while (stack[start] != next) {
                start++;
            }
            len = (size_t)snprintf(check->message, sizeof(check->message), "dependency cycle: ");
            for (size_t k = start; k <= depth && len < sizeof(check->message); k++) {
                len += (size_t)snprintf(check->message + len, sizeof(check->message) - len,
                                        "%s -> ", check->ids[stack[k]]);
            }
            if (len < sizeof(check->message)) {
                snprintf(check->message + len, sizeof(check->message) - len, "%s",
                         check->ids[next]);
            }
            check->bad_index = next;
            return true;
        }
        if (colour[next] == 0 && find_cycle(check, next, colour, stack, depth + 1)) {
            return true;
        }
    }
    colour[node] = 2;
    return false;
}

weft_err
weft__plan_check_run(struct plan_check *check)
{
    unsigned char *colour = NULL;
    size_t *stack = NULL;
    weft_err err = WEFT_OK;

    if (check->is_oom) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < check->count; i++) {
        if (check->ids[i] == NULL) {
            continue;
        }
        for (size_t j = 0; j < i; j++) {
            if (check->ids[j] != NULL && strcmp(check->ids[i], check->ids[j]) == 0) {
                check->bad_index = i;
                snprintf(check->message, sizeof(check->message), "duplicate step id '%s'",
                         check->ids[i]);
                return WEFT_EPARSE;
            }
        }
        for (size_t d = 0; d < check->dep_counts[i]; d++) {
            const char *dep = check->deps[i][d];
            if (dep == NULL || check_find(check, dep) == NONE) {
                check->bad_index = i;
                snprintf(check->message, sizeof(check->message), "depends_on: unknown step '%s'",
                         dep != NULL ? dep : "(null)");
                return WEFT_EPARSE;
            }
            if (strcmp(dep, check->ids[i]) == 0) {
                check->bad_index = i;
                snprintf(check->message, sizeof(check->message), "step '%s' depends on itself",
                         dep);
                return WEFT_EPARSE;
            }
        }
    }
    colour = weft__calloc(check->count + 1, 1);
    stack = weft__calloc(check->count + 1, sizeof(*stack));
    if (colour == NULL || stack == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < check->count; i++) {
        if (check->ids[i] != NULL && colour[i] == 0 && find_cycle(check, i, colour, stack, 0)) {
            err = WEFT_EPARSE;
            goto out;
        }
    }
out:
    weft__free(colour);
    weft__free(stack);
    return err;
}

void
weft__plan_check_cleanup(struct plan_check *check)
{
    weft__free(check->ids);
    weft__free((void *)check->deps);
    weft__free(check->dep_counts);
    memset(check, 0, sizeof(*check));
}
