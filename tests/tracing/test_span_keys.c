/* tests/tracing/test_span_keys.c - interned attribute keys (weft_key_intern()) and the
 * weft_span_set_*_k() setters: one handle per string, the key's redaction verdict taken once,
 * values still truncated and redacted as with the string setters, interned and string keys
 * naming the same attribute, limits, interning from two threads at once, and the bounded table
 * (this last test fills the process-wide table, so it runs last). */
#include "support/mem_exporter.h"
#include "support/weft_test.h"
#include "tracing/span.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LIT(s) s, sizeof(s) - 1

struct fixture {
    struct weft_provider *provider;
    struct weft_tracer *tracer;
    struct mem_exporter *mem;
};

/* A provider with a simple processor into a memory exporter. */
static void
fixture_open(struct fixture *f, const struct weft_span_limits *limits, weft_redact_fn redact)
{
    struct weft_provider_options opts = {.service_name = "keys"};

    opts.limits = limits;
    opts.redact = redact;
    memset(f, 0, sizeof(*f));
    assert_weft_ok(mem_provider_new(&opts, &f->provider, &f->tracer, &f->mem));
}

static void
fixture_close(struct fixture *f)
{
    weft_provider_shutdown(f->provider, 1000);
    weft_provider_free(f->provider);
}

static const struct weft_attr *
find_attr(const struct mem_span *s, const char *key)
{
    for (size_t i = 0; i < s->attr_count; i++) {
        if (strcmp(s->attrs[i].key, key) == 0) {
            return &s->attrs[i];
        }
    }
    return NULL;
}

static const struct weft_attr_key *
intern(const char *key)
{
    const struct weft_attr_key *k = NULL;

    assert_weft_ok(weft_key_intern(key, &k));
    assert_non_null(k);
    return k;
}

static void
test_keys_same_string_gives_same_handle(void **state)
{
    char buf[32];
    const struct weft_attr_key *a = NULL;
    const struct weft_attr_key *b = NULL;

    (void)state;
    a = intern("gen_ai.usage.input_tokens");
    b = intern("gen_ai.usage.input_tokens");
    assert_ptr_equal(a, b);
    assert_string_equal(weft_key_name(a), "gen_ai.usage.input_tokens");
    assert_ptr_not_equal(intern("gen_ai.usage.output_tokens"), a);
    /* The key is copied: the caller's buffer may change afterwards. */
    snprintf(buf, sizeof(buf), "%s", "weft.buffer.key");
    a = intern(buf);
    memset(buf, 'x', sizeof(buf) - 1);
    assert_string_equal(weft_key_name(a), "weft.buffer.key");
    assert_ptr_equal(intern("weft.buffer.key"), a);
    assert_string_equal(weft_key_name(NULL), "");
}

static void
test_keys_intern_rejects_bad_keys(void **state)
{
    char long_key[WEFT_KEY_MAX_LEN + 2];
    const struct weft_attr_key *k = intern("weft.placeholder");

    (void)state;
    assert_int_equal(weft_key_intern(NULL, &k), WEFT_EINVAL);
    assert_null(k);
    assert_int_equal(weft_key_intern("", &k), WEFT_EINVAL);
    assert_int_equal(weft_key_intern("a", NULL), WEFT_EINVAL);
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    assert_int_equal(weft_key_intern(long_key, &k), WEFT_EINVAL); /* 256 bytes */
    long_key[WEFT_KEY_MAX_LEN] = '\0';
    assert_weft_ok(weft_key_intern(long_key, &k)); /* 255 bytes */
    assert_int_equal(strlen(weft_key_name(k)), WEFT_KEY_MAX_LEN);
}

static void
test_keys_classify_secret_names_once(void **state)
{
    (void)state;
    /* The verdict the string setters reach on every call (the last dotted segment names a
     * secret), taken when the key is interned. */
    assert_true(intern("llm.api_key")->may_secret);
    assert_true(intern("http.request.header.authorization")->may_secret);
    assert_true(intern("openai.Token")->may_secret);
    assert_true(intern("db.password")->may_secret);
    assert_false(intern("gen_ai.usage.input_tokens")->may_secret);
    assert_false(intern("gen_ai.operation.name")->may_secret);
    assert_false(intern("weft.step.status")->may_secret);
}

static void
test_keys_values_redacted_as_with_string_keys(void **state)
{
    struct fixture f;
    struct weft_span *span = NULL;
    const struct mem_span *s = NULL;

    (void)state;
    fixture_open(&f, NULL, NULL);
    span = weft_span_start(f.tracer, "s", NULL);
    /* A secret-named key: the value is replaced whole, short or long. */
    assert_weft_ok(weft_span_set_str_k(span, intern("llm.api_key"), "short"));
    assert_weft_ok(weft_span_set_string_k(span, intern("app.token"), LIT("a-much-longer-value")));
    /* An ordinary key: secret shapes inside the value are replaced, the rest is kept. */
    assert_weft_ok(weft_span_set_str_k(span, intern("note"), "use Bearer abcdefghijklmnop"));
    assert_weft_ok(weft_span_set_str_k(span, intern("prompt"), "key sk-abcdefghijklmnopqrstu!"));
    assert_weft_ok(weft_span_set_str_k(span, intern("weft.step.status"), "completed"));
    assert_weft_ok(weft_span_set_string_k(span, intern("empty"), NULL, 0));
    weft_span_end(span, 0);
    s = mem_exporter_span(f.mem, 0);
    assert_int_equal(s->attr_count, 6);
    assert_string_equal(find_attr(s, "llm.api_key")->value.u.str, WEFT_REDACTED);
    assert_string_equal(find_attr(s, "app.token")->value.u.str, WEFT_REDACTED);
    assert_string_equal(find_attr(s, "note")->value.u.str, "use Bearer " WEFT_REDACTED);
    assert_string_equal(find_attr(s, "prompt")->value.u.str, "key " WEFT_REDACTED "!");
    assert_string_equal(find_attr(s, "weft.step.status")->value.u.str, "completed");
    assert_string_equal(find_attr(s, "empty")->value.u.str, "");
    fixture_close(&f);
}

/* A callback that replaces the value of "k1". */
static const char *
redact_k1(const char *key,
          const char *value,
          size_t len,
          char *scratch,
          size_t scratch_len,
          void *user_data)
{
    (void)value;
    (void)len;
    (void)scratch;
    (void)scratch_len;
    (void)user_data;
    return strcmp(key, "k1") == 0 ? "hidden" : NULL;
}

static void
test_keys_values_pass_limit_and_callback(void **state)
{
    struct weft_span_limits limits;
    struct fixture f;
    struct weft_span *span = NULL;
    const struct mem_span *s = NULL;

    (void)state;
    weft_span_limits_from_env(&limits);
    limits.attr_value_length = 4;
    fixture_open(&f, &limits, redact_k1);
    span = weft_span_start(f.tracer, "s", NULL);
    assert_weft_ok(weft_span_set_str_k(span, intern("k1"), "visible"));
    assert_weft_ok(weft_span_set_str_k(span, intern("k2"), "truncated"));
    weft_span_end(span, 0);
    s = mem_exporter_span(f.mem, 0);
    assert_string_equal(find_attr(s, "k1")->value.u.str, "hidd");
    assert_string_equal(find_attr(s, "k2")->value.u.str, "trun");
    fixture_close(&f);
}

static void
test_keys_share_attributes_with_string_keys(void **state)
{
    struct fixture f;
    struct weft_span *span = NULL;
    const struct mem_span *s = NULL;
    const struct weft_attr_key *id = intern("weft.step.id");

    (void)state;
    fixture_open(&f, NULL, NULL);
    span = weft_span_start(f.tracer, "s", NULL);
    assert_weft_ok(weft_span_set_int(span, "weft.step.id", 1));
    assert_weft_ok(weft_span_set_int_k(span, id, 2)); /* replaces */
    assert_weft_ok(weft_span_set_double_k(span, intern("score"), 0.5));
    assert_weft_ok(weft_span_set_str(span, "score", "high")); /* replaces, with a string */
    assert_weft_ok(weft_span_set_bool_k(span, intern("final"), true));
    assert_weft_ok(weft_span_set_bool_k(span, intern("final"), false)); /* replaces */
    assert_weft_ok(weft_span_set_str_k(span, intern("status"), "a"));
    assert_weft_ok(weft_span_set_string_k(span, intern("status"), LIT("b"))); /* replaces */
    weft_span_end(span, 0);
    s = mem_exporter_span(f.mem, 0);
    assert_int_equal(s->attr_count, 4);
    assert_int_equal(find_attr(s, "weft.step.id")->value.u.i, 2);
    assert_string_equal(find_attr(s, "score")->value.u.str, "high");
    assert_false(find_attr(s, "final")->value.u.b);
    assert_string_equal(find_attr(s, "status")->value.u.str, "b");
    fixture_close(&f);
}

static void
test_keys_setters_check_arguments_and_limits(void **state)
{
    struct weft_span_limits limits;
    struct fixture f;
    struct weft_span *span = NULL;
    const struct mem_span *s = NULL;
    const struct weft_attr_key *k = intern("weft.k");
    char name[16];

    (void)state;
    assert_int_equal(weft_span_set_int_k(NULL, k, 1), WEFT_EINVAL);
    weft_span_limits_from_env(&limits);
    limits.attr_count = 12; /* past the 8 inline slots: the array grows */
    fixture_open(&f, &limits, NULL);
    span = weft_span_start(f.tracer, "s", NULL);
    assert_int_equal(weft_span_set_int_k(span, NULL, 1), WEFT_EINVAL);
    assert_int_equal(weft_span_set_str_k(span, k, NULL), WEFT_EINVAL);
    assert_int_equal(weft_span_set_string_k(span, k, NULL, 3), WEFT_EINVAL);
    for (int i = 0; i < 12; i++) {
        snprintf(name, sizeof(name), "k.%d", i);
        assert_weft_ok(weft_span_set_int_k(span, intern(name), i));
    }
    assert_int_equal(weft_span_set_int_k(span, k, 1), WEFT_ELIMIT);
    assert_int_equal(weft_span_set_str_k(span, k, "x"), WEFT_ELIMIT);
    assert_weft_ok(weft_span_set_int_k(span, intern("k.3"), 33)); /* replacing still works */
    weft_span_end(span, 0);
    /* A non-recording span accepts the calls and records nothing; so does an ended one. */
    assert_weft_ok(weft_span_set_double_k(span, k, 1.0));
    s = mem_exporter_span(f.mem, 0);
    assert_int_equal(s->attr_count, 12);
    assert_int_equal(s->dropped_attrs, 2);
    assert_int_equal(find_attr(s, "k.3")->value.u.i, 33);
    assert_int_equal(find_attr(s, "k.11")->value.u.i, 11);
    fixture_close(&f);
}

static void
test_keys_disabled_sdk_records_nothing(void **state)
{
    struct weft_provider_options opts = {.disabled = true};
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_span *span = NULL;

    (void)state;
    assert_weft_ok(weft_provider_new(&opts, &provider));
    assert_weft_ok(weft_provider_get_tracer(provider, "t", NULL, &tracer));
    span = weft_span_start(tracer, "s", NULL);
    assert_weft_ok(weft_span_set_str_k(span, intern("a"), "v"));
    assert_weft_ok(weft_span_set_bool_k(span, intern("b"), true));
    /* The inline forms of the string-key setters keep the functions' results. */
    assert_weft_ok(weft_span_set_str(span, "a", "v"));
    assert_int_equal(weft_span_set_str(span, NULL, "v"), WEFT_EINVAL);
    assert_int_equal(weft_span_set_int(span, NULL, 1), WEFT_EINVAL);
    assert_int_equal(weft_span_set_double(NULL, "a", 1.0), WEFT_EINVAL);
    assert_weft_ok(weft_span_set_bool(span, "b", true));
    weft_span_end(span, 0);
    weft_span_end(NULL, 0);
    assert_false(weft_span_is_recording(span));
    weft_provider_free(provider);
}

/* ---- two threads intern the same keys at once ------------------------------------------ */

#define RACE_KEYS 200

struct race {
    bool reverse;
    pthread_barrier_t *go;
    const struct weft_attr_key *got[RACE_KEYS];
    int failures;
};

static void *
race_thread(void *arg)
{
    struct race *r = arg;
    char name[32];

    pthread_barrier_wait(r->go);
    for (int n = 0; n < RACE_KEYS; n++) {
        int i = r->reverse ? RACE_KEYS - 1 - n : n;

        snprintf(name, sizeof(name), "race.key.%d", i);
        if (weft_key_intern(name, &r->got[i]) != WEFT_OK ||
            strcmp(weft_key_name(r->got[i]), name) != 0) {
            r->failures++;
        }
    }
    return NULL;
}

static void
test_keys_intern_from_two_threads_agrees(void **state)
{
    pthread_barrier_t go;
    struct race r[2];
    pthread_t t[2];

    (void)state;
    memset(r, 0, sizeof(r));
    pthread_barrier_init(&go, NULL, 2);
    for (int i = 0; i < 2; i++) {
        r[i].reverse = i == 1;
        r[i].go = &go;
        assert_int_equal(pthread_create(&t[i], NULL, race_thread, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
    }
    pthread_barrier_destroy(&go);
    assert_int_equal(r[0].failures + r[1].failures, 0);
    for (int i = 0; i < RACE_KEYS; i++) {
        assert_ptr_equal(r[0].got[i], r[1].got[i]);
    }
}

/* Runs last: it fills the process-wide table. */
static void
test_keys_full_table_refuses_new_keys(void **state)
{
    const struct weft_attr_key *before = intern("weft.before.full");
    const struct weft_attr_key *k = NULL;
    char name[32];
    int added = 0;
    weft_err err = WEFT_OK;

    (void)state;
    for (int i = 0; i <= WEFT_KEY_INTERN_MAX; i++) {
        snprintf(name, sizeof(name), "fill.%d", i);
        err = weft_key_intern(name, &k);
        if (err != WEFT_OK) {
            break;
        }
        added++;
    }
    assert_int_equal(err, WEFT_ELIMIT);
    assert_null(k);
    assert_true(added > WEFT_KEY_INTERN_MAX - 300 && added < WEFT_KEY_INTERN_MAX);
    /* Full: new keys keep failing, known keys still resolve. */
    assert_int_equal(weft_key_intern("one.more", &k), WEFT_ELIMIT);
    assert_ptr_equal(intern("weft.before.full"), before);
    assert_ptr_equal(intern("fill.0"), intern("fill.0"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_same_string_gives_same_handle),
        cmocka_unit_test(test_keys_intern_rejects_bad_keys),
        cmocka_unit_test(test_keys_classify_secret_names_once),
        cmocka_unit_test(test_keys_values_redacted_as_with_string_keys),
        cmocka_unit_test(test_keys_values_pass_limit_and_callback),
        cmocka_unit_test(test_keys_share_attributes_with_string_keys),
        cmocka_unit_test(test_keys_setters_check_arguments_and_limits),
        cmocka_unit_test(test_keys_disabled_sdk_records_nothing),
        cmocka_unit_test(test_keys_intern_from_two_threads_agrees),
        cmocka_unit_test(test_keys_full_table_refuses_new_keys),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
