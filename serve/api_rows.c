/* serve/api_rows.c - the explorer's rows of a trace, `view=rows` (weft.rows/v1, docs/serve.md):
 * the waterfall's rows in tree order as columns, in parts (offset, limit), so that the page
 * draws its first screen from a small first part and appends the rest behind it.
 *
 * Why columns: a row of the older view=waterfall is an array with a 16-digit id, a name and
 * times in ns (about 70 bytes a span); here the names are a table and each row an index into
 * it, the ids one string, times integers of microseconds after the trace's first start, the
 * status a digit, and markers and the critical path lists of row indexes: about 40 bytes a span
 * before gzip and under 20 after, on random span ids. The document is written by hand, not as
 * a jansson tree: 100,000 rows are seven arrays of numbers, and a tree of them cost more than
 * reading the trace.
 *
 * The critical path is computed here, over the whole trace and in ns, whatever part is asked
 * (each part lists the rows of its own range): the chain from the root through the child that
 * ends last, Jaeger's definition (see critical_path()).
 */
#include "api_int.h"

#include "base/mem.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/store.h>
#include <weft/weft.h>

#define UNIT_NS 1000u /* the rows' time unit: 1 µs, as Jaeger keeps times */

/* A growable body. It is handed to the server as the reply (freed with free()), so it is
 * grown with realloc(), not weft__malloc(). The first failure sticks. */
struct out {
    char *p;
    size_t len;
    size_t cap;
    bool is_oom;
};

static void
put(struct out *o, const char *s, size_t n)
{
    if (o->is_oom) {
        return;
    }
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap < 4096 ? 4096 : o->cap;
        char *grown = NULL;

        while (cap < o->len + n + 1) {
            cap *= 2;
        }
        grown = realloc(o->p, cap);
        if (grown == NULL) {
            o->is_oom = true;
            return;
        }
        o->p = grown;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void
put_str(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* @p v in decimal; by hand: snprintf() of the 700,000 numbers of a 100,000-row part was a
 * third of writing it. */
static void
put_u64(struct out *o, uint64_t v)
{
    char b[24];
    size_t i = sizeof(b);

    do {
        b[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    put(o, b + i, sizeof(b) - i);
}

/* @p s as a JSON string (the store keeps names as valid UTF-8: only quotes, backslashes and
 * control characters need escapes). */
static void
put_json_str(struct out *o, const char *s)
{
    size_t run = 0;

    put(o, "\"", 1);
    for (size_t i = 0; s[i] != '\0'; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];

        if (c >= 0x20 && c != '"' && c != '\\') {
            continue;
        }
        put(o, s + run, i - run);
        snprintf(esc, sizeof(esc), c == '"' || c == '\\' ? "\\%c" : "\\u%04x", c);
        put_str(o, esc);
        run = i + 1;
    }
    put_str(o, s + run);
    put(o, "\"", 1);
}

/* ----------------------------------------------------------------------------------------- */
/* The names table                                                                            */

/* Distinct names of a part, by open addressing on their text: a trace has few (a name per
 * kind of step or call), so the table stays small however many rows there are. */
struct names {
    const char **slot; /* NULL: empty */
    size_t *index;     /* the name's place in the table sent */
    size_t cap;        /* a power of two, at least twice the count */
    size_t count;
};

static uint64_t
hash(const char *s)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */

    for (; *s != '\0'; s++) {
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    }
    return h;
}

static bool
names_grow(struct names *t)
{
    size_t cap = t->cap == 0 ? 64 : t->cap * 2;
    const char **slot = calloc(cap, sizeof(*slot));
    size_t *index = calloc(cap, sizeof(*index));

    if (slot == NULL || index == NULL) {
        free(slot);
        free(index);
        return false;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (t->slot[i] != NULL) {
            size_t k = hash(t->slot[i]) & (cap - 1);
            while (slot[k] != NULL) {
                k = (k + 1) & (cap - 1);
            }
            slot[k] = t->slot[i];
            index[k] = t->index[i];
        }
    }
    free(t->slot);
    free(t->index);
    t->slot = slot;
    t->index = index;
    t->cap = cap;
    return true;
}

/* The index of @p name, added (and written to @p table_out) when new; SIZE_MAX on ENOMEM. */
static size_t
names_index(struct names *t, const char *name, struct out *table_out)
{
    size_t k = 0;

    if ((t->count + 1) * 2 > t->cap && !names_grow(t)) {
        return SIZE_MAX;
    }
    k = hash(name) & (t->cap - 1);
    while (t->slot[k] != NULL && strcmp(t->slot[k], name) != 0) {
        k = (k + 1) & (t->cap - 1);
    }
    if (t->slot[k] == NULL) {
        t->slot[k] = name;
        t->index[k] = t->count++;
        put(table_out, t->count > 1 ? "," : "", t->count > 1 ? 1 : 0);
        put_json_str(table_out, name);
    }
    return t->index[k];
}

/* ----------------------------------------------------------------------------------------- */
/* The critical path                                                                          */

struct kid {
    size_t parent;
    uint64_t end; /* clipped */
    size_t row;
};

/* Children by parent, then latest (clipped) end first, then tree order (the earlier start). */
static int
kid_order(const void *a, const void *b)
{
    const struct kid *x = a;
    const struct kid *y = b;

    if (x->parent != y->parent) {
        return x->parent < y->parent ? -1 : 1;
    }
    if (x->end != y->end) {
        return x->end > y->end ? -1 : 1;
    }
    return x->row < y->row ? -1 : x->row > y->row;
}

/* Each row's time clipped to its parent's, top-down (tree order puts parents first); a child
 * wholly outside its parent's time is left out (*keep false), and its subtree with it. */
static void
clip(const struct weft_trace_row *r, size_t n, uint64_t *cs, uint64_t *ce, bool *keep)
{
    for (size_t i = 0; i < n; i++) {
        size_t p = r[i].parent;
        uint64_t s = r[i].start_time_ns;
        uint64_t e = r[i].end_time_ns > s ? r[i].end_time_ns : s;

        keep[i] = i == 0 || (p != SIZE_MAX && keep[p] && s < ce[p] && e > cs[p]);
        cs[i] = keep[i] && i > 0 && s < cs[p] ? cs[p] : s;
        ce[i] = keep[i] && i > 0 && e > ce[p] ? ce[p] : e;
    }
}

/* Mark (@p on[i]) the rows of the critical path of the trace rooted at row 0: the root, then
 * repeatedly the child that ends last (children clipped to their parent's time, ties to the
 * earlier one); in that child the same, down to a span with no child; back in its parent, the
 * child that ends last by the time the one just left started, and so on up to the root. This is
 * Jaeger UI's criticalPath but for one thing: a child that ends exactly when the next one
 * starts counts (Jaeger asks for an end strictly before, which in microseconds drops every
 * other step of a sequence whose steps follow each other at once). Every span the walk enters
 * is on the path; other roots (orphans) are not. Each child is entered at most once (next[]
 * moves past it), so the walk is linear after the sort. @return false on ENOMEM. */
static bool
critical_path(const struct weft_trace_row *r, size_t n, bool *on)
{
    uint64_t *cs = malloc(n * sizeof(*cs));
    uint64_t *ce = malloc(n * sizeof(*ce));
    bool *keep = malloc(n * sizeof(*keep));
    struct kid *kids = malloc(n * sizeof(*kids));
    size_t *next = malloc(n * sizeof(*next)); /* each row's next child to look at, in kids */
    size_t *last = malloc(n * sizeof(*last)); /* one past its last child */
    size_t m = 0;
    bool ok =
        cs != NULL && ce != NULL && keep != NULL && kids != NULL && next != NULL && last != NULL;

    if (ok) {
        clip(r, n, cs, ce, keep);
        for (size_t i = 1; i < n; i++) {
            if (keep[i]) {
                kids[m++] = (struct kid){r[i].parent, ce[i], i};
            }
        }
        qsort(kids, m, sizeof(*kids), kid_order);
        for (size_t i = 0; i < n; i++) {
            next[i] = last[i] = 0;
            on[i] = false;
        }
        for (size_t k = m; k-- > 0;) {
            next[kids[k].parent] = k;
            last[kids[k].parent] = last[kids[k].parent] == 0 ? k + 1 : last[kids[k].parent];
        }
        size_t cur = 0;
        uint64_t bound = ce[0];
        bool is_back = false;
        on[0] = true;
        for (;;) {
            while (is_back && next[cur] < last[cur] && kids[next[cur]].end > bound) {
                next[cur]++;
            }
            if (next[cur] < last[cur]) {
                size_t k = next[cur]++;
                cur = kids[k].row;
                on[cur] = true;
                bound = ce[cur];
                is_back = false;
            } else if (cur == 0) {
                break;
            } else {
                bound = cs[cur];
                cur = r[cur].parent;
                is_back = true;
            }
        }
    }
    free(cs);
    free(ce);
    free(keep);
    free(kids);
    free(next);
    free(last);
    return ok;
}

/* ----------------------------------------------------------------------------------------- */
/* The document                                                                               */

/* The columns of rows [@p from, @p to) into @p o; @p t0 the trace's first start. */
static void
put_columns(struct out *o,
            const struct weft_trace_row *r,
            size_t from,
            size_t to,
            uint64_t t0,
            const bool *crit)
{
    static const char *const cols[] = {"depth", "start", "dur", "status"};
    struct out table = {0};
    struct names names = {0};
    char hex[WEFT_SPAN_ID_SIZE * 2 + 1];

    put_str(o, ",\"id\":\"");
    for (size_t i = from; i < to; i++) {
        weft_hex_encode(r[i].span_id, WEFT_SPAN_ID_SIZE, hex);
        put(o, hex, WEFT_SPAN_ID_SIZE * 2);
    }
    put_str(o, "\",\"name\":[");
    for (size_t i = from; i < to; i++) {
        size_t k = names_index(&names, r[i].name, &table);
        o->is_oom = o->is_oom || k == SIZE_MAX;
        put(o, ",", i > from ? 1 : 0);
        put_u64(o, k);
    }
    put_str(o, "],\"names\":[");
    put(o, table.p != NULL ? table.p : "", table.len);
    o->is_oom = o->is_oom || table.is_oom;
    free(table.p);
    free(names.slot);
    free(names.index);
    for (size_t c = 0; c < sizeof(cols) / sizeof(cols[0]); c++) {
        put_str(o, "],\"");
        put_str(o, cols[c]);
        put_str(o, "\":[");
        for (size_t i = from; i < to; i++) {
            uint64_t s = (r[i].start_time_ns - t0) / UNIT_NS;
            uint64_t e = r[i].end_time_ns > r[i].start_time_ns
                             ? (r[i].end_time_ns - t0 + UNIT_NS - 1) / UNIT_NS
                             : s;
            uint64_t v = c == 0   ? r[i].depth
                         : c == 1 ? s
                         : c == 2 ? e - s
                                  : (r[i].status_code == WEFT_STATUS_ERROR ? 2u
                                     : r[i].status_code == WEFT_STATUS_OK  ? 1u
                                                                           : 0u);
            put(o, ",", i > from ? 1 : 0);
            put_u64(o, v);
        }
    }
    for (size_t c = 0; c < 2; c++) {
        bool first = true;
        put_str(o, c == 0 ? "],\"marker\":[" : "],\"critical\":[");
        for (size_t i = from; i < to; i++) {
            if (c == 0 ? r[i].is_marker : crit[i]) {
                put(o, ",", first ? 0 : 1);
                put_u64(o, i);
                first = false;
            }
        }
    }
    put_str(o, "]}");
}

struct weft__rows_view *
weft__api_rows_view(struct weft_trace_rows *rows)
{
    struct weft__rows_view *v = weft__calloc(1, sizeof(*v));
    const struct weft_trace_row *r = weft_trace_rows_get(rows);
    size_t n = weft_trace_rows_count(rows);

    if (v == NULL) {
        weft_trace_rows_free(rows);
        return NULL;
    }
    v->rows = rows;
    v->r = r;
    v->n = n;
    v->refs = 1;
    v->t0 = UINT64_MAX;
    v->bytes = sizeof(*v) + n * (sizeof(*r) + sizeof(*v->crit));
    v->crit = calloc(n > 0 ? n : 1, sizeof(*v->crit));
    for (size_t i = 0; i < n; i++) {
        v->t0 = r[i].start_time_ns < v->t0 ? r[i].start_time_ns : v->t0;
        v->errors += r[i].status_code == WEFT_STATUS_ERROR;
        v->bytes += strlen(r[i].name) + 1;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t e = r[i].end_time_ns > r[i].start_time_ns ? r[i].end_time_ns : r[i].start_time_ns;
        e = (e - v->t0 + UNIT_NS - 1) / UNIT_NS;
        v->end = e > v->end ? e : v->end;
    }
    if (v->crit == NULL || (n > 0 && !critical_path(r, n, v->crit))) {
        weft__rows_view_release(NULL, v);
        return NULL;
    }
    return v;
}

void
weft__api_rows_reply(struct weft__api_reply *reply,
                     json_t *head,
                     const struct weft__rows_view *view,
                     size_t offset,
                     size_t limit)
{
    size_t n = view->n;
    size_t from = offset < n ? offset : n;
    size_t to = n - from < limit ? n : from + limit;
    char *text = NULL;
    struct out o = {0};

    if (head != NULL) {
        json_object_set_new(head, "error_count", json_integer((json_int_t)view->errors));
        json_object_set_new(head, "offset", json_integer((json_int_t)from));
        json_object_set_new(head, "count", json_integer((json_int_t)(to - from)));
        json_object_set_new(head, "unit_ns", json_integer(UNIT_NS));
        json_object_set_new(head, "end", json_integer((json_int_t)view->end));
        text = json_dumps(head, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(head);
    if (text == NULL) {
        weft__api_reply_json(reply, 503, NULL);
        return;
    }
    put(&o, text, strlen(text) - 1); /* without its closing brace: the columns follow */
    free(text);
    put_columns(&o, view->r, from, to, view->t0, view->crit);
    if (o.is_oom) {
        free(o.p);
        weft__api_reply_json(reply, 503, NULL);
        return;
    }
    reply->status = 200;
    reply->body = o.p;
    reply->len = o.len;
    reply->is_numeric = true;
}
