/* store/tree.c - tree order of one trace's spans: depth-first from the roots, siblings by
 * start time (then end time, then name), orphans and parent cycles broken out as roots, so that
 * every span appears exactly once. One walk serves both inputs: loaded spans
 * (weft__trace_tree(): whole-trace loads, and the renderer in report/) and the compact outline
 * nodes of a page or rows read (weft__store_node_tree()), so that a page, the rows and a whole
 * load agree on the order. Linear but for spans that start at the same nanosecond: one radix
 * sort by start (sort.c) and a map of span ids, as a 100,000-span trace is ordered on every cold
 * read of the explorer's rows (docs/PERFORMANCE.md, "The explorer").
 */
#include "store.h"

#include "base/mem.h"

#include <stdint.h>
#include <string.h>

/* What tree order reads of one span. weft__trace_tree() reads it from loaded spans; a page
 * read (weft_store_load_page()) from compact outline nodes, so that ordering a large trace does
 * not cost a whole weft_span_data per span. Both go through one walk, so they agree. */
struct tree_key {
    uint64_t start;
    uint64_t end;
    const char *name;
    const uint8_t *id;
    const uint8_t *parent;
    bool has_parent;
    bool is_parent_remote;
};

struct tree {
    const struct weft_span_data *const *spans; /* one of spans and nodes is set */
    const struct weft__store_node *nodes;
    size_t count;
    size_t *head; /* first child of each span, linked through next; roots under head[count] */
    size_t *next;
    size_t *node_depth;
    size_t *stack;
    bool *is_visited;
    size_t *order;
    size_t *depth;
    bool *is_orphan;
    size_t emitted;
};

static void
tree_key_at(const struct tree *t, size_t i, struct tree_key *k)
{
    if (t->spans != NULL) {
        const struct weft_span_data *s = t->spans[i];

        k->start = s->start_time_ns;
        k->end = s->end_time_ns;
        k->name = s->name;
        k->id = s->span_id;
        k->parent = s->parent_span_id;
        k->has_parent = s->has_parent;
        k->is_parent_remote = s->parent_is_remote;
    } else {
        const struct weft__store_node *n = &t->nodes[i];

        k->start = n->start;
        k->end = n->end;
        k->name = n->name;
        k->id = n->id;
        k->parent = n->parent;
        k->has_parent = n->has_parent;
        k->is_parent_remote = n->is_parent_remote;
    }
}

/* weft__store_has_parent() of a key: a zero parent id counts as none. */
static bool
key_has_parent(const struct tree_key *k)
{
    static const uint8_t zero[WEFT_SPAN_ID_SIZE];

    return k->has_parent && memcmp(k->parent, zero, WEFT_SPAN_ID_SIZE) != 0;
}

/* Emit the subtree under @p root depth-first. Child lists are linked latest first, so
 * pushing a list front to back pops its earliest span first. */
static void
walk(struct tree *t, size_t root)
{
    size_t top = 0;

    t->node_depth[root] = 0;
    t->stack[top++] = root;
    while (top > 0) {
        size_t i = t->stack[--top];
        struct tree_key k;

        if (t->is_visited[i]) {
            continue;
        }
        t->is_visited[i] = true;
        t->order[t->emitted] = i;
        t->depth[t->emitted] = t->node_depth[i];
        if (t->is_orphan != NULL) {
            tree_key_at(t, i, &k);
            t->is_orphan[t->emitted] =
                t->node_depth[i] == 0 && key_has_parent(&k) && !k.is_parent_remote;
        }
        t->emitted++;
        /* Each span is on exactly one list, so the stack never holds more than count. */
        for (size_t c = t->head[i]; c != SIZE_MAX; c = t->next[c]) {
            if (!t->is_visited[c]) {
                t->node_depth[c] = t->node_depth[i] + 1;
                t->stack[top++] = c;
            }
        }
    }
}

/* Of two spans that start together, the longer one first (it is more likely the parent), then
 * by name, then as given (weft__store_sort()'s tie, @p ctx the tree). */
static int
tie_by_end(const void *ctx, size_t a, size_t b)
{
    const struct tree *t = ctx;
    struct tree_key x;
    struct tree_key y;
    int c = 0;

    tree_key_at(t, a, &x);
    tree_key_at(t, b, &y);
    if (x.end != y.end) {
        return x.end > y.end ? -1 : 1;
    }
    c = strcmp(x.name != NULL ? x.name : "", y.name != NULL ? y.name : "");
    if (c != 0) {
        return c;
    }
    return a < b ? -1 : a > b;
}

/* A span id as the map's key (the 8 bytes as one word). */
static uint64_t
id_word(const uint8_t *id)
{
    uint64_t w = 0;

    _Static_assert(WEFT_SPAN_ID_SIZE == sizeof(w), "a span id is one 64-bit word");
    memcpy(&w, id, sizeof(w));
    return w;
}

/* The slot to start probing at for @p w: ids may be random or counters, so the bits are mixed
 * (a 64-bit finalizer) before the mask. */
static size_t
id_slot(uint64_t w, size_t mask)
{
    w ^= w >> 33;
    w *= 0xff51afd7ed558ccdu;
    w ^= w >> 33;
    return (size_t)w & mask;
}

/* The slot of @p map (mask + 1 slots; @p keys: each mapped span's id word) that holds the span
 * of id word @p w, or the empty slot where it would go. */
static size_t
id_probe(const size_t *map, size_t mask, const uint64_t *keys, uint64_t w)
{
    size_t s = id_slot(w, mask);

    while (map[s] != SIZE_MAX && keys[map[s]] != w) {
        s = (s + 1) & mask;
    }
    return s;
}

/* Each span of @p t into @p map (mask + 1 slots) by its id, @p keys set to the id words; of
 * spans that share an id, the first. */
static void
map_ids(const struct tree *t, uint64_t *keys, size_t *map, size_t mask)
{
    for (size_t s = 0; s <= mask; s++) {
        map[s] = SIZE_MAX;
    }
    for (size_t i = 0; i < t->count; i++) {
        struct tree_key k;
        size_t s = 0;

        tree_key_at(t, i, &k);
        keys[i] = id_word(k.id);
        s = id_probe(map, mask, keys, keys[i]);
        if (map[s] == SIZE_MAX) {
            map[s] = i;
        }
    }
}

/* Tree order of t->count spans (t->spans or t->nodes) into t->order and t->depth (and
 * t->is_orphan): weft__trace_tree()'s contract. A parent is found in a map of span ids (open
 * addressing, at most half full; the first span of an id when two share it), siblings are
 * ordered by one sort of all spans by start (weft__store_sort()). */
static weft_err
tree_order(const struct tree *spec)
{
    struct tree t = *spec; /* the walk's scratch arrays go in this copy */
    size_t count = t.count;
    size_t *starts = NULL; /* span indexes, earliest first */
    uint64_t *keys = NULL; /* start times, then span ids as words */
    size_t *map = NULL;    /* span indexes by id; SIZE_MAX: empty */
    size_t mask = 0;
    bool *is_root = NULL;
    weft_err err = WEFT_OK;

    if (count == 0) {
        return WEFT_OK;
    }
    if (count > SIZE_MAX / sizeof(*map) / 4 - 1) {
        return WEFT_ENOMEM;
    }
    while (mask < count * 2 - 1) {
        mask = mask * 2 + 1;
    }
    starts = weft__malloc(count * sizeof(*starts));
    keys = weft__malloc(count * sizeof(*keys));
    map = weft__malloc((mask + 1) * sizeof(*map));
    t.head = weft__malloc((count + 1) * sizeof(*t.head));
    t.next = weft__malloc(count * sizeof(*t.next));
    t.node_depth = weft__malloc(count * sizeof(*t.node_depth));
    t.stack = weft__malloc(count * sizeof(*t.stack));
    t.is_visited = weft__calloc(count, sizeof(*t.is_visited));
    is_root = weft__calloc(count, sizeof(*is_root));
    if (starts == NULL || keys == NULL || map == NULL || t.head == NULL || t.next == NULL ||
        t.node_depth == NULL || t.stack == NULL || t.is_visited == NULL || is_root == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        struct tree_key k;

        tree_key_at(&t, i, &k);
        keys[i] = k.start;
        t.head[i] = SIZE_MAX;
    }
    t.head[count] = SIZE_MAX;
    err = weft__store_sort(keys, count, tie_by_end, &t, starts);
    if (err != WEFT_OK) {
        goto out;
    }
    map_ids(&t, keys, map, mask);
    /* Link every span under its parent (roots and orphans under head[count]), visiting them
     * in ascending start order and prepending, so each list runs latest first. */
    for (size_t k = 0; k < count; k++) {
        size_t i = starts[k];
        struct tree_key key;
        size_t p = count;

        tree_key_at(&t, i, &key);
        if (key.has_parent) {
            size_t found = map[id_probe(map, mask, keys, id_word(key.parent))];
            p = found != SIZE_MAX && found != i ? found : count;
        }
        is_root[i] = p == count;
        t.next[i] = t.head[p];
        t.head[p] = i;
    }
    /* Walk the roots earliest first; then break any parent cycle (spans no root reaches)
     * by walking its earliest span as a root, so every span is emitted exactly once. */
    for (size_t k = 0; k < count; k++) {
        size_t i = starts[k];

        if (is_root[i]) {
            walk(&t, i);
        }
    }
    for (size_t k = 0; k < count && t.emitted < count; k++) {
        if (!t.is_visited[starts[k]]) {
            walk(&t, starts[k]);
        }
    }
out:
    weft__free(starts);
    weft__free(keys);
    weft__free(map);
    weft__free(t.head);
    weft__free(t.next);
    weft__free(t.node_depth);
    weft__free(t.stack);
    weft__free(t.is_visited);
    weft__free(is_root);
    return err;
}

weft_err
weft__trace_tree(const struct weft_span_data *const *spans,
                 size_t count,
                 size_t *order,
                 size_t *depth,
                 bool *is_orphan)
{
    struct tree t = {
        .spans = spans, .count = count, .order = order, .depth = depth, .is_orphan = is_orphan};

    return tree_order(&t);
}

weft_err
weft__store_node_tree(const struct weft__store_node *nodes,
                      size_t count,
                      size_t *order,
                      size_t *depth)
{
    struct tree t = {.nodes = nodes, .count = count, .order = order, .depth = depth};

    return tree_order(&t);
}
