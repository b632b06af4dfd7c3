/* tests/store/test_payload.c - content-addressed payloads (store/payload.c): texts come back
 * byte for byte, shared passages are stored once, a growing conversation re-stores about one
 * chunk, damage and missing records are errors, and out-of-memory at every allocation leaves
 * nothing broken. The records live in an in-memory table here; the span and state stores'
 * tables are tested with their backends. */
#include "support/failalloc.h"
#include "support/weft_test.h"

#include "base/buf.h"
#include "base/mem.h"
#include "store/payload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_MAX 4096

struct row {
    struct weft__payload_record rec;
    unsigned char *data;
};

struct table {
    struct row rows[TABLE_MAX];
    size_t count;
    size_t puts;       /* put() calls, also of records already there */
    size_t data_bytes; /* stored bytes */
    size_t gets;       /* get() calls */
};

static struct row *
find(struct table *t, const char *hash)
{
    for (size_t i = 0; i < t->count; i++) {
        if (strcmp(t->rows[i].rec.hash, hash) == 0) {
            return &t->rows[i];
        }
    }
    return NULL;
}

static bool
table_has(void *user, const char *hash)
{
    return find(user, hash) != NULL;
}

static weft_err
table_put(void *user, const struct weft__payload_record *rec)
{
    struct table *t = user;
    struct row *r = NULL;

    t->puts++;
    if (find(t, rec->hash) != NULL) {
        return WEFT_OK;
    }
    if (t->count == TABLE_MAX) {
        return WEFT_ELIMIT;
    }
    r = &t->rows[t->count];
    r->data = malloc(rec->len);
    if (r->data == NULL) {
        return WEFT_ENOMEM;
    }
    memcpy(r->data, rec->data, rec->len);
    r->rec = *rec;
    r->rec.data = r->data;
    t->data_bytes += rec->len;
    t->count++;
    return WEFT_OK;
}

static weft_err
table_get(void *user,
          const char *const *hashes,
          size_t count,
          weft__payload_each_fn each,
          void *each_user)
{
    struct table *t = user;

    t->gets++;
    for (size_t i = 0; i < count; i++) {
        struct row *r = find(t, hashes[i]);
        weft_err err = r != NULL ? each(&r->rec, each_user) : WEFT_OK;

        if (err != WEFT_OK) {
            return err;
        }
    }
    return WEFT_OK;
}

static void
table_free(struct table *t)
{
    for (size_t i = 0; i < t->count; i++) {
        free(t->rows[i].data);
    }
    free(t);
}

static struct table *
table_new(void)
{
    struct table *t = calloc(1, sizeof(*t));

    assert_non_null(t);
    return t;
}

static struct weft__payload_sink
sink_of(struct table *t, bool with_has)
{
    struct weft__payload_sink s = {.has = with_has ? table_has : NULL, .put = table_put, .user = t};

    return s;
}

static struct weft__payload_source
source_of(struct table *t)
{
    struct weft__payload_source s = {.get = table_get, .user = t};

    return s;
}

/* Pseudo-random printable text (a fixed LCG: the same every run). */
static char *
random_text(size_t len, unsigned seed)
{
    char *s = malloc(len + 1);
    uint32_t x = seed * 2654435761u + 1;

    assert_non_null(s);
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        s[i] = (char)(' ' + (x >> 16) % 95);
    }
    s[len] = '\0';
    return s;
}

static void
assert_round_trip(struct table *t, const char *ref, const char *text, size_t len)
{
    struct weft__payload_source src = source_of(t);
    struct weft__buf out;

    weft__buf_init(&out, 0);
    assert_weft_ok(weft__payload_get(ref, &src, &out));
    assert_int_equal(out.len, len);
    assert_memory_equal(out.data, text, len);
    weft__buf_cleanup(&out);
}

static void
test_payload_round_trip_of_every_size(void **state)
{
    static const size_t sizes[] = {512, 513, 700, 1500, 8192, 8193, 40000, 300000};
    struct table *t = table_new();
    struct weft__payload_sink sink = sink_of(t, true);
    char ref[WEFT__PAYLOAD_HEX_LEN + 1];
    char want[WEFT__PAYLOAD_HEX_LEN + 1];

    (void)state;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *text = random_text(sizes[i], (unsigned)i);

        assert_weft_ok(weft__payload_put(text, sizes[i], &sink, ref));
        weft__payload_hash(text, sizes[i], want);
        assert_string_equal(ref, want); /* the reference is the whole text's SHA-256 */
        assert_true(weft__payload_is_ref(ref));
        assert_round_trip(t, ref, text, sizes[i]);
        free(text);
    }
    table_free(t);
}

/* A text with NUL bytes and every byte value comes back exactly (payloads are bytes). */
static void
test_payload_keeps_binary_bytes(void **state)
{
    struct table *t = table_new();
    struct weft__payload_sink sink = sink_of(t, false);
    char text[5000];
    char ref[WEFT__PAYLOAD_HEX_LEN + 1];

    (void)state;
    for (size_t i = 0; i < sizeof(text); i++) {
        text[i] = (char)(i * 7 % 256);
    }
    assert_weft_ok(weft__payload_put(text, sizeof(text), &sink, ref));
    assert_round_trip(t, ref, text, sizeof(text));
    table_free(t);
}

/* The conversation of a chat: each call sends the history so far plus one message. Stored
 * call after call, it costs about one new chunk per call, not the whole history again. */
static void
test_payload_growing_history_shares_its_chunks(void **state)
{
    struct table *t = table_new();
    struct weft__payload_sink sink = sink_of(t, true);
    struct weft__buf conv;
    size_t raw_total = 0;
    char ref[WEFT__PAYLOAD_HEX_LEN + 1];

    (void)state;
    weft__buf_init(&conv, 0);
    assert_weft_ok(weft__buf_append_str(&conv, "[{\"role\":\"system\",\"content\":\"You are"
                                               " a careful research agent.\"}"));
    for (unsigned turn = 0; turn < 50; turn++) {
        char *msg = random_text(600, 100 + turn);
        size_t before = conv.len;

        assert_weft_ok(weft__buf_printf(&conv, ",{\"role\":\"user\",\"content\":\"%s\"}]", msg));
        if (conv.len >= WEFT__PAYLOAD_MIN) {
            assert_weft_ok(weft__payload_put(conv.data, conv.len, &sink, ref));
            assert_round_trip(t, ref, conv.data, conv.len);
            raw_total += conv.len;
        }
        weft__buf_truncate(&conv, conv.len - 1); /* drop the "]" for the next message */
        assert_true(conv.len > before);
        free(msg);
    }
    /* 50 calls of a history growing to 30 KB: ~780 KB sent, ~30 KB of text once (random
     * printable text barely compresses) plus 32 bytes per chunk per call in the lists. */
    assert_true(raw_total > 700000);
    assert_true(t->data_bytes * 8 < raw_total);
    weft__buf_cleanup(&conv);
    table_free(t);
}

/* The same text twice is one record: the second put finds it by its reference. */
static void
test_payload_same_text_is_stored_once(void **state)
{
    struct table *t = table_new();
    struct weft__payload_sink sink = sink_of(t, true);
    char *text = random_text(20000, 7);
    char a[WEFT__PAYLOAD_HEX_LEN + 1];
    char b[WEFT__PAYLOAD_HEX_LEN + 1];
    size_t rows = 0;
    size_t puts = 0;

    (void)state;
    assert_weft_ok(weft__payload_put(text, 20000, &sink, a));
    rows = t->count;
    puts = t->puts;
    assert_true(rows > 2); /* chunks and their list */
    assert_weft_ok(weft__payload_put(text, 20000, &sink, b));
    assert_string_equal(a, b);
    assert_int_equal(t->count, rows);
    assert_int_equal(t->puts, puts); /* has() answered: nothing cut or put again */
    free(text);
    table_free(t);
}

/* Repetitive text compresses: a stored chunk is smaller than its text. */
static void
test_payload_compresses(void **state)
{
    struct table *t = table_new();
    struct weft__payload_sink sink = sink_of(t, true);
    struct weft__buf text;
    char ref[WEFT__PAYLOAD_HEX_LEN + 1];

    (void)state;
    weft__buf_init(&text, 0);
    for (int i = 0; i < 400; i++) {
        assert_weft_ok(
            weft__buf_printf(&text, "{\"role\":\"tool\",\"content\":\"row %d ok\"},", i));
    }
    assert_weft_ok(weft__payload_put(text.data, text.len, &sink, ref));
    assert_true(t->data_bytes * 3 < text.len);
    assert_round_trip(t, ref, text.data, text.len);
    weft__buf_cleanup(&text);
    table_free(t);
}

/* A missing chunk, a damaged chunk and a bad reference are errors, and leave out unchanged. */
static void
test_payload_missing_or_damaged_records_are_errors(void **state)
{
    struct table *t = table_new();
    struct weft__payload_sink sink = sink_of(t, true);
    struct weft__payload_source src = source_of(t);
    char *text = random_text(30000, 9);
    char ref[WEFT__PAYLOAD_HEX_LEN + 1];
    struct weft__buf out;
    struct row *victim = NULL;

    (void)state;
    weft__buf_init(&out, 0);
    assert_weft_ok(weft__buf_append_str(&out, "kept"));
    assert_weft_ok(weft__payload_put(text, 30000, &sink, ref));
    assert_int_equal(weft__payload_get("abc", &src, &out), WEFT_EINVAL);
    assert_int_equal(
        weft__payload_get("0000000000000000000000000000000000000000000000000000000000000000", &src,
                          &out),
        WEFT_ENOTFOUND);
    /* Damage: flip a byte of a chunk's compressed data. */
    victim = &t->rows[1];
    assert_int_equal(victim->rec.kind, WEFT__PAYLOAD_TEXT);
    victim->data[victim->rec.len / 2] ^= 0x5a;
    assert_int_equal(weft__payload_get(ref, &src, &out), WEFT_EIO);
    victim->data[victim->rec.len / 2] ^= 0x5a;
    assert_round_trip(t, ref, text, 30000);
    /* Missing: rename a chunk so it is no longer found. */
    victim->rec.hash[0] = victim->rec.hash[0] == 'f' ? 'e' : 'f';
    assert_int_equal(weft__payload_get(ref, &src, &out), WEFT_ENOTFOUND);
    assert_int_equal(out.len, 4);
    assert_string_equal(out.data, "kept");
    weft__buf_cleanup(&out);
    free(text);
    table_free(t);
}

static void
test_payload_refuses_short_texts(void **state)
{
    struct table *t = table_new();
    struct weft__payload_sink sink = sink_of(t, true);
    char ref[WEFT__PAYLOAD_HEX_LEN + 1];

    (void)state;
    assert_int_equal(weft__payload_put("short", 5, &sink, ref), WEFT_EINVAL);
    assert_int_equal(t->count, 0);
    table_free(t);
}

/* A passage repeated inside one text (the same chunk at several places) comes back right. */
static void
test_payload_repeated_chunks_in_one_text(void **state)
{
    struct table *t = table_new();
    struct weft__payload_sink sink = sink_of(t, true);
    char *unit = random_text(9000, 11);
    char *text = malloc(9000 * 4 + 1);
    char ref[WEFT__PAYLOAD_HEX_LEN + 1];

    (void)state;
    assert_non_null(text);
    for (int i = 0; i < 4; i++) {
        memcpy(text + 9000 * i, unit, 9000);
    }
    assert_weft_ok(weft__payload_put(text, 36000, &sink, ref));
    assert_round_trip(t, ref, text, 36000);
    assert_true(t->data_bytes < 20000); /* the repeats share their chunks */
    free(unit);
    free(text);
    table_free(t);
}

static void
test_payload_out_of_memory_at_every_allocation(void **state)
{
    char *text = random_text(20000, 13);

    (void)state;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0;; budget++) {
        struct table *t = table_new();
        struct weft__payload_sink sink = sink_of(t, true);
        struct weft__payload_source src = source_of(t);
        char ref[WEFT__PAYLOAD_HEX_LEN + 1];
        struct weft__buf out;
        weft_err put_err = WEFT_OK;
        weft_err get_err = WEFT_OK;

        weft__buf_init(&out, 0);
        failalloc_budget = budget;
        put_err = weft__payload_put(text, 20000, &sink, ref);
        if (put_err == WEFT_OK) {
            get_err = weft__payload_get(ref, &src, &out);
        }
        failalloc_budget = -1;
        assert_true(put_err == WEFT_OK || put_err == WEFT_ENOMEM);
        assert_true(get_err == WEFT_OK || get_err == WEFT_ENOMEM);
        if (get_err == WEFT_OK && put_err == WEFT_OK) {
            assert_int_equal(out.len, 20000);
            assert_memory_equal(out.data, text, 20000);
        } else {
            assert_int_equal(out.len, 0);
        }
        weft__buf_cleanup(&out);
        table_free(t);
        if (put_err == WEFT_OK && get_err == WEFT_OK) {
            break;
        }
    }
    weft_set_allocator(NULL, NULL, NULL);
    free(text);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_payload_round_trip_of_every_size),
        cmocka_unit_test(test_payload_keeps_binary_bytes),
        cmocka_unit_test(test_payload_growing_history_shares_its_chunks),
        cmocka_unit_test(test_payload_same_text_is_stored_once),
        cmocka_unit_test(test_payload_compresses),
        cmocka_unit_test(test_payload_missing_or_damaged_records_are_errors),
        cmocka_unit_test(test_payload_refuses_short_texts),
        cmocka_unit_test(test_payload_repeated_chunks_in_one_text),
        cmocka_unit_test(test_payload_out_of_memory_at_every_allocation),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
