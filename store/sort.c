/* store/sort.c - the sorts of a trace's outline (read.c, tree.c): items by a 64-bit key (a
 * span's start time), stably, then the runs of equal keys by a comparison of the caller's.
 *
 * Why not qsort(): ordering the 100,000 spans of a trace the explorer opens sorted them three
 * times with qsort() (nodes by start and id, then by start, end and name, then by id), a
 * comparison through a function pointer each, on 40- to 56-byte elements that glibc's merge
 * sort copies around: a fifth of the explorer's cold first part (docs/PERFORMANCE.md, "The
 * explorer"). Start times are integers: a least-significant-digit radix sort of (key, index)
 * pairs orders them in a few linear passes (a byte that every key shares, such as the high
 * bytes of times in one trace, is not a pass), and only spans that start at the same
 * nanosecond are compared, as before. Input already in key order (the nodes, sorted once by
 * read.c) is one pass over the keys.
 */
#include "store.h"

#include "base/mem.h"

#include <stdint.h>
#include <string.h>

struct keyed {
    uint64_t key;
    size_t index;
};

/* Stable merge sort of @p n indexes by @p cmp, @p tmp scratch of @p n: the runs of equal keys
 * are usually a few spans (insertion), but all of a trace's spans may start together. */
static void
merge_sort(size_t *a, size_t n, size_t *tmp, weft__store_cmp_fn cmp, const void *ctx)
{
    size_t half = n / 2;
    size_t i = 0;
    size_t j = half;
    size_t k = 0;

    if (n <= 16) {
        for (size_t x = 1; x < n; x++) {
            size_t v = a[x];
            size_t y = x;
            while (y > 0 && cmp(ctx, a[y - 1], v) > 0) {
                a[y] = a[y - 1];
                y--;
            }
            a[y] = v;
        }
        return;
    }
    merge_sort(a, half, tmp, cmp, ctx);
    merge_sort(a + half, n - half, tmp, cmp, ctx);
    while (i < half && j < n) {
        tmp[k++] = cmp(ctx, a[j], a[i]) < 0 ? a[j++] : a[i++];
    }
    while (i < half) {
        tmp[k++] = a[i++];
    }
    while (j < n) {
        tmp[k++] = a[j++];
    }
    memcpy(a, tmp, n * sizeof(*a));
}

/* Sort @p p (n pairs) by key, stably, by bytes from the least significant: 8 bits a pass,
 * passes skipped where every key has the same byte. @p q: scratch of n. The result is in
 * *p or *q: @return which. */
static struct keyed *
radix(struct keyed *p, struct keyed *q, size_t n)
{
    size_t count[8][256];

    memset(count, 0, sizeof(count));
    for (size_t i = 0; i < n; i++) {
        for (unsigned b = 0; b < 8; b++) {
            count[b][(p[i].key >> (8 * b)) & 0xff]++;
        }
    }
    for (unsigned b = 0; b < 8; b++) {
        size_t at = 0;
        struct keyed *swap = NULL;

        if (count[b][(p[0].key >> (8 * b)) & 0xff] == n) {
            continue; /* every key has this byte */
        }
        for (unsigned v = 0; v < 256; v++) {
            size_t c = count[b][v];
            count[b][v] = at;
            at += c;
        }
        for (size_t i = 0; i < n; i++) {
            q[count[b][(p[i].key >> (8 * b)) & 0xff]++] = p[i];
        }
        swap = p;
        p = q;
        q = swap;
    }
    return p;
}

weft_err
weft__store_sort(
    const uint64_t *key, size_t n, weft__store_cmp_fn tie, const void *ctx, size_t *order)
{
    bool is_sorted = true;
    size_t *tmp = NULL;

    for (size_t i = 1; i < n && is_sorted; i++) {
        is_sorted = key[i - 1] <= key[i];
    }
    if (is_sorted) {
        for (size_t i = 0; i < n; i++) {
            order[i] = i;
        }
    } else {
        struct keyed *p = weft__malloc(n * sizeof(*p));
        struct keyed *q = weft__malloc(n * sizeof(*q));
        const struct keyed *r = NULL;

        if (p == NULL || q == NULL) {
            weft__free(p);
            weft__free(q);
            return WEFT_ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            p[i].key = key[i];
            p[i].index = i;
        }
        r = radix(p, q, n);
        for (size_t i = 0; i < n; i++) {
            order[i] = r[i].index;
        }
        weft__free(p);
        weft__free(q);
    }
    /* Each run of equal keys, in index order so far, by the caller's comparison. */
    for (size_t i = 0; tie != NULL && i < n;) {
        size_t j = i + 1;

        while (j < n && key[order[j]] == key[order[i]]) {
            j++;
        }
        if (j - i > 1) {
            if (tmp == NULL && j - i > 16) {
                tmp = weft__malloc(n * sizeof(*tmp));
                if (tmp == NULL) {
                    return WEFT_ENOMEM;
                }
            }
            merge_sort(order + i, j - i, tmp, tie, ctx);
        }
        i = j;
    }
    weft__free(tmp);
    return WEFT_OK;
}
