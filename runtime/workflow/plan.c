/* runtime/workflow/plan.c - plan steps, the router's queries over them, and plan checks.
 *
 * The queries answer in plan order: that order is the router's tie-break. Plans are tens of
 * steps in practice but thousands in long runs, and the engine asks after every step, so the
 * plan keeps what makes the questions cheap: an index of step ids (find, readiness), the count
 * of steps per status, and open_from, below which every step has ended (the next ready step
 * and the step in progress are searched from there). weft__plan_set_status() keeps the last
 * two; append and truncate keep the index.
 * Invariants: status_count[k] is the number of steps of status k; every step below open_from
 * has ended; ids (when ids_cap > 0) holds every step's index under its id, the lowest index
 * for an id given twice.
 */
#include "runtime/workflow/plan.h"

#include "base/mem.h"

#include <stdio.h>
#include <stdlib.h>
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
    json_decref(s->lesson);
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
    weft__free(plan->ids);
    memset(plan, 0, sizeof(*plan));
}

static bool
is_ended(step_status status)
{
    return status == STEP_COMPLETED || status == STEP_FAILED || status == STEP_SKIPPED;
}

static size_t
id_hash(const char *id)
{
    uint64_t h = 14695981039346656037ull;

    for (const unsigned char *p = (const unsigned char *)id; *p != '\0'; p++) {
        h = (h ^ *p) * 1099511628211ull;
    }
    return (size_t)(h ^ (h >> 32));
}

/* Put step @p i under its id, unless a lower index holds that id already. */
static void
ids_put(size_t *ids, size_t cap, const struct plan_step *steps, size_t i)
{
    size_t slot = id_hash(steps[i].id) & (cap - 1);

    while (ids[slot] != 0) {
        if (strcmp(steps[ids[slot] - 1].id, steps[i].id) == 0) {
            return;
        }
        slot = (slot + 1) & (cap - 1);
    }
    ids[slot] = i + 1;
}

/* Rebuild the index for the plan's steps with room for @p count of them. Out of memory the
 * plan keeps no index (ids_cap 0) and find scans: slower, never wrong. */
static void
ids_rebuild(struct plan *plan, size_t count)
{
    size_t cap = 16;
    size_t *ids = NULL;

    while (cap <= 2 * count) {
        cap *= 2;
    }
    ids = weft__calloc(cap, sizeof(*ids));
    weft__free(plan->ids);
    plan->ids = ids;
    plan->ids_cap = ids != NULL ? cap : 0;
    for (size_t i = 0; ids != NULL && i < plan->count; i++) {
        ids_put(ids, cap, plan->steps, i);
    }
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
    weft__uuid_v4(s.task_uuid);
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
    plan->status_count[STEP_PENDING]++; /* open_from <= its index: it has not ended */
    if (2 * plan->count >= plan->ids_cap) {
        ids_rebuild(plan, 2 * plan->count);
    } else {
        ids_put(plan->ids, plan->ids_cap, plan->steps, plan->count - 1);
    }
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
        struct plan_step *s = &plan->steps[--plan->count];
        plan->status_count[s->status]--;
        step_cleanup(s);
    }
    if (plan->open_from > plan->count) {
        plan->open_from = plan->count;
    }
    plan->version++;
    if (plan->ids_cap > 0) {
        ids_rebuild(plan, plan->count); /* rare: a failed append's undo */
    }
}

size_t
weft__plan_find(const struct plan *plan, const char *id)
{
    if (plan->ids_cap == 0) {
        for (size_t i = 0; i < plan->count; i++) {
            if (strcmp(plan->steps[i].id, id) == 0) {
                return i;
            }
        }
        return NONE;
    }
    for (size_t slot = id_hash(id) & (plan->ids_cap - 1); plan->ids[slot] != 0;
         slot = (slot + 1) & (plan->ids_cap - 1)) {
        if (strcmp(plan->steps[plan->ids[slot] - 1].id, id) == 0) {
            return plan->ids[slot] - 1;
        }
    }
    return NONE;
}

void
weft__plan_set_status(struct plan *plan, size_t i, step_status status)
{
    struct plan_step *s = &plan->steps[i];

    plan->status_count[s->status]--;
    plan->status_count[status]++;
    s->status = status;
    if (!is_ended(status) && i < plan->open_from) {
        plan->open_from = i;
    }
    while (plan->open_from < plan->count && is_ended(plan->steps[plan->open_from].status)) {
        plan->open_from++;
    }
}

void
weft__plan_step_set_status(struct plan *plan, struct plan_step *s, step_status status)
{
    if (plan->count > 0 && s >= plan->steps && s < plan->steps + plan->count) {
        weft__plan_set_status(plan, (size_t)(s - plan->steps), status);
    } else {
        s->status = status;
    }
}

size_t
weft__plan_in_progress(const struct plan *plan)
{
    for (size_t i = plan->open_from; i < plan->count; i++) {
        if (plan->steps[i].status == STEP_IN_PROGRESS && !plan->steps[i].is_running) {
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

    /* Only a failed or skipped step can block others: the common case costs nothing. */
    is_changed = plan->status_count[STEP_FAILED] + plan->status_count[STEP_SKIPPED] > 0;
    while (is_changed) {
        is_changed = false;
        for (size_t i = plan->open_from; i < plan->count; i++) {
            struct plan_step *s = &plan->steps[i];
            if (s->status == STEP_PENDING && dependency_blocked(plan, s)) {
                weft__plan_set_status(plan, i, STEP_SKIPPED);
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
    for (size_t i = plan->open_from; i < plan->count; i++) {
        const struct plan_step *s = &plan->steps[i];
        if ((s->status == STEP_PENDING || s->status == STEP_PAUSED) && !s->is_running &&
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
    return (size_t)status < STEP_STATUS_COUNT ? plan->status_count[status] : 0;
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

/* An id with its position, sorted by id: dependency lookups are a binary search, so checking
 * a plan of PLAN_MAX_STEPS steps stays O(n log n) instead of a scan per dependency. */
struct check_key {
    const char *id;
    size_t index;
};

static int
key_cmp(const void *a, const void *b)
{
    const struct check_key *x = a;
    const struct check_key *y = b;
    int c = strcmp(x->id, y->id);

    if (c != 0) {
        return c;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

static size_t
check_find(const struct check_key *keys, size_t n, const char *id)
{
    size_t lo = 0;
    size_t hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(keys[mid].id, id);
        if (c == 0) {
            return keys[mid].index;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NONE;
}

/* Write "dependency cycle: a -> b -> ... -> a" for the nodes stack[start..depth] closed by
 * @p next. */
static void
cycle_message(
    struct plan_check *check, const size_t *stack, size_t start, size_t depth, size_t next)
{
    size_t len = (size_t)snprintf(check->message, sizeof(check->message), "dependency cycle: ");

    for (size_t k = start; k <= depth && len < sizeof(check->message); k++) {
        len += (size_t)snprintf(check->message + len, sizeof(check->message) - len, "%s -> ",
                                check->ids[stack[k]]);
    }
    if (len < sizeof(check->message)) {
        snprintf(check->message + len, sizeof(check->message) - len, "%s", check->ids[next]);
    }
    check->bad_index = next;
}

/* Depth-first search from @p root with three colours and an explicit stack (a chain of
 * PLAN_MAX_STEPS dependencies must not recurse that deep); on a back edge, describe the
 * cycle. @p pos[node] is the position of the node on the stack while it is grey. */
static bool
find_cycle(struct plan_check *check,
           const struct check_key *keys,
           size_t nkeys,
           size_t root,
           unsigned char *colour,
           size_t *stack,
           size_t *next_dep,
           size_t *pos)
{
    size_t depth = 0;

    stack[0] = root;
    next_dep[0] = 0;
    pos[root] = 0;
    colour[root] = 1;
    for (;;) {
        size_t node = stack[depth];
        size_t next = NONE;

        if (next_dep[depth] == check->dep_counts[node]) {
            colour[node] = 2;
            if (depth == 0) {
                return false;
            }
            depth--;
            continue;
        }
        next = check_find(keys, nkeys, check->deps[node][next_dep[depth]++]);
        if (next == NONE || colour[next] == 2) {
            continue;
        }
        if (colour[next] == 1) {
            cycle_message(check, stack, pos[next], depth, next);
            return true;
        }
        depth++;
        stack[depth] = next;
        next_dep[depth] = 0;
        pos[next] = depth;
        colour[next] = 1;
    }
}

weft_err
weft__plan_check_run(struct plan_check *check)
{
    struct check_key *keys = NULL;
    unsigned char *colour = NULL;
    size_t *stack = NULL;
    size_t *next_dep = NULL;
    size_t *pos = NULL;
    size_t nkeys = 0;
    size_t duplicate = NONE;
    weft_err err = WEFT_OK;

    if (check->is_oom) {
        return WEFT_ENOMEM;
    }
    keys = weft__calloc(check->count + 1, sizeof(*keys));
    colour = weft__calloc(check->count + 1, 1);
    stack = weft__calloc(check->count + 1, sizeof(*stack));
    next_dep = weft__calloc(check->count + 1, sizeof(*next_dep));
    pos = weft__calloc(check->count + 1, sizeof(*pos));
    if (keys == NULL || colour == NULL || stack == NULL || next_dep == NULL || pos == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < check->count; i++) {
        if (check->ids[i] != NULL) {
            keys[nkeys].id = check->ids[i];
            keys[nkeys].index = i;
            nkeys++;
        }
    }
    qsort(keys, nkeys, sizeof(*keys), key_cmp);
    /* The first step (in plan order) whose id an earlier step already has. */
    for (size_t k = 1; k < nkeys; k++) {
        if (strcmp(keys[k - 1].id, keys[k].id) == 0 &&
            (duplicate == NONE || keys[k].index < duplicate)) {
            duplicate = keys[k].index;
        }
    }
    for (size_t i = 0; i < check->count; i++) {
        if (check->ids[i] == NULL) {
            continue;
        }
        if (i == duplicate) {
            check->bad_index = i;
            snprintf(check->message, sizeof(check->message), "duplicate step id '%s'",
                     check->ids[i]);
            err = WEFT_EPARSE;
            goto out;
        }
        for (size_t d = 0; d < check->dep_counts[i]; d++) {
            const char *dep = check->deps[i][d];
            if (dep == NULL || check_find(keys, nkeys, dep) == NONE) {
                check->bad_index = i;
                snprintf(check->message, sizeof(check->message), "depends_on: unknown step '%s'",
                         dep != NULL ? dep : "(null)");
                err = WEFT_EPARSE;
                goto out;
            }
            if (strcmp(dep, check->ids[i]) == 0) {
                check->bad_index = i;
                snprintf(check->message, sizeof(check->message), "step '%s' depends on itself",
                         dep);
                err = WEFT_EPARSE;
                goto out;
            }
        }
    }
    for (size_t i = 0; i < check->count; i++) {
        if (check->ids[i] != NULL && colour[i] == 0 &&
            find_cycle(check, keys, nkeys, i, colour, stack, next_dep, pos)) {
            err = WEFT_EPARSE;
            goto out;
        }
    }
out:
    weft__free(keys);
    weft__free(colour);
    weft__free(stack);
    weft__free(next_dep);
    weft__free(pos);
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
