/* tests/runtime/test_attr_keys.c - the runtime's interned attribute keys
 * (runtime/common/attr_keys.h): the list itself (valid, unique keys; the GenAI ones spelled as
 * runtime/observe/semconv.h spells them), and spans that come out the same whether a key was
 * interned, could not be (the process-wide table was full) or was not yet asked for.
 *
 * The tests share the process-wide intern table and weft__rt_keys_init()'s once, so they run in
 * order: the spans before the initialisation first, then the table filled with half of the
 * runtime's keys in it, then the initialisation. */
#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include "runtime/common/attr_keys.h"
#include "runtime/observe/semconv.h"

#include <stdio.h>
#include <string.h>

struct fixture {
    struct weft_provider *provider;
    struct weft_tracer *tracer;
    struct mem_exporter *mem;
};

/* A provider with room for every key of the list, a simple processor into a memory exporter. */
static void
fixture_open(struct fixture *f)
{
    struct weft_provider_options opts = {.service_name = "rk"};
    struct weft_span_limits limits;

    weft_span_limits_from_env(&limits);
    limits.attr_count = 4 * WEFT__RK_COUNT;
    opts.limits = &limits;
    memset(f, 0, sizeof(*f));
    assert_weft_ok(mem_provider_new(&opts, &f->provider, &f->tracer, &f->mem));
}

static void
fixture_close(struct fixture *f)
{
    weft_provider_shutdown(f->provider, 1000);
    weft_provider_free(f->provider);
}

/* One attribute per key of the list, of each type in turn, through the wrappers (@p use_ids)
 * or the string setters with the keys' text (what the runtime did before the list). Values
 * include a secret-shaped one, so the redaction path is compared too. */
static void
record_all(struct fixture *f, const char *name, bool use_ids)
{
    static const char *const strs[] = {"a", "b"};
    struct weft_span *span = weft_span_start(f->tracer, name, NULL);

    for (size_t i = 0; i < WEFT__RK_COUNT; i++) {
        weft__rk_id id = (weft__rk_id)i;
        const char *key = weft__rk_names[i];
        const char *text = i % 10 == 5 ? "Bearer abcdefghijklmnopqrstuvwxyz0123456789" : key;

        switch (i % 5) {
        case 0:
            (void)(use_ids ? weft__rk_set_str(span, id, text) : weft_span_set_str(span, key, text));
            break;
        case 1:
            (void)(use_ids ? weft__rk_set_int(span, id, (int64_t)i)
                           : weft_span_set_int(span, key, (int64_t)i));
            break;
        case 2:
            (void)(use_ids ? weft__rk_set_double(span, id, (double)i / 4)
                           : weft_span_set_double(span, key, (double)i / 4));
            break;
        case 3:
            (void)(use_ids ? weft__rk_set_bool(span, id, i % 2 == 0)
                           : weft_span_set_bool(span, key, i % 2 == 0));
            break;
        default:
            (void)(use_ids ? weft__rk_set_str_array(span, id, strs, 2)
                           : weft_span_set_str_array(span, key, strs, 2));
            break;
        }
    }
    /* A later value replaces an earlier one in place, whichever setter wrote either. */
    (void)weft_span_set_str(span, weft__rk_names[WEFT__RK_STEP_ID], "again");
    (void)weft__rk_set_str(span, WEFT__RK_ERROR_TYPE, "again");
    weft_span_end(span, 0);
}

static void
assert_same_value(const struct weft_value *a, const struct weft_value *b)
{
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->len, b->len);
    switch (a->type) {
    case WEFT_VALUE_STRING:
        assert_memory_equal(a->u.str, b->u.str, a->len);
        break;
    case WEFT_VALUE_INT:
        assert_int_equal(a->u.i, b->u.i);
        break;
    case WEFT_VALUE_DOUBLE:
        assert_true(a->u.d == b->u.d);
        break;
    case WEFT_VALUE_BOOL:
        assert_int_equal(a->u.b, b->u.b);
        break;
    case WEFT_VALUE_STRING_ARRAY:
        for (size_t i = 0; i < a->len; i++) {
            assert_string_equal(a->u.strs[i], b->u.strs[i]);
        }
        break;
    default:
        fail_msg("unexpected value type %d", (int)a->type);
    }
}

/* Spans @p i and @p j carry the same attributes in the same order. */
static void
assert_same_attrs(struct fixture *f, size_t i, size_t j)
{
    const struct mem_span *a = mem_exporter_span(f->mem, i);
    const struct mem_span *b = mem_exporter_span(f->mem, j);

    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->attr_count, WEFT__RK_COUNT);
    assert_int_equal(a->attr_count, b->attr_count);
    assert_int_equal(a->dropped_attrs, b->dropped_attrs);
    for (size_t k = 0; k < a->attr_count; k++) {
        assert_string_equal(a->attrs[k].key, b->attrs[k].key);
        assert_same_value(&a->attrs[k].value, &b->attrs[k].value);
    }
}

static void
test_attr_keys_are_valid_and_unique(void **state)
{
    (void)state;
    for (size_t i = 0; i < WEFT__RK_COUNT; i++) {
        size_t len = strlen(weft__rk_names[i]);

        assert_true(len > 0 && len <= WEFT_KEY_MAX_LEN);
        for (size_t j = 0; j < i; j++) {
            assert_string_not_equal(weft__rk_names[i], weft__rk_names[j]);
        }
    }
}

static void
test_attr_keys_genai_names_are_semconv_names(void **state)
{
    (void)state;
    assert_string_equal(weft__rk_names[WEFT__RK_ERROR_TYPE], WEFT__ERROR_TYPE);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_AGENT_DESCRIPTION], WEFT__GENAI_AGENT_DESC);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_AGENT_NAME], WEFT__GENAI_AGENT_NAME);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_INPUT_MESSAGES], WEFT__GENAI_INPUT_MESSAGES);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_OPERATION_NAME], WEFT__GENAI_OPERATION_NAME);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_OUTPUT_MESSAGES],
                        WEFT__GENAI_OUTPUT_MESSAGES);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_OUTPUT_TYPE], WEFT__GENAI_OUTPUT_TYPE);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_REQUEST_MAX_TOKENS],
                        WEFT__GENAI_REQUEST_MAX_TOKENS);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_REQUEST_TEMPERATURE],
                        WEFT__GENAI_REQUEST_TEMPERATURE);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_RESPONSE_FINISH_REASONS],
                        WEFT__GENAI_RESPONSE_FINISH);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_RESPONSE_ID], WEFT__GENAI_RESPONSE_ID);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_RESPONSE_MODEL], WEFT__GENAI_RESPONSE_MODEL);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_SYSTEM_INSTRUCTIONS],
                        WEFT__GENAI_SYSTEM_INSTRUCTIONS);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_TOOL_CALL_ARGUMENTS],
                        WEFT__GENAI_TOOL_CALL_ARGUMENTS);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_TOOL_CALL_ID], WEFT__GENAI_TOOL_CALL_ID);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_TOOL_CALL_RESULT],
                        WEFT__GENAI_TOOL_CALL_RESULT);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_TOOL_NAME], WEFT__GENAI_TOOL_NAME);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_TOOL_TYPE], WEFT__GENAI_TOOL_TYPE);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_USAGE_INPUT_TOKENS],
                        WEFT__GENAI_USAGE_INPUT);
    assert_string_equal(weft__rk_names[WEFT__RK_GEN_AI_USAGE_OUTPUT_TOKENS],
                        WEFT__GENAI_USAGE_OUTPUT);
    assert_string_equal(weft__rk_names[WEFT__RK_SAMPLING_DECISION], WEFT_SAMPLING_DECISION_ATTR);
    assert_string_equal(weft__rk_names[WEFT__RK_SAMPLING_RULE], WEFT_SAMPLING_RULE_ATTR);
}

/* Before weft__rt_keys_init() every handle is NULL and the wrappers take the string path. */
static void
test_attr_keys_before_init_record_as_string_keys(void **state)
{
    struct fixture f;

    (void)state;
    for (size_t i = 0; i < WEFT__RK_COUNT; i++) {
        assert_null(weft__rk_key((weft__rk_id)i));
    }
    fixture_open(&f);
    record_all(&f, "strings", false);
    record_all(&f, "ids", true);
    assert_int_equal(mem_exporter_count(f.mem), 2);
    assert_same_attrs(&f, 0, 1);
    assert_int_equal(weft__rk_set_str(NULL, WEFT__RK_STEP_ID, "x"), WEFT_EINVAL);
    assert_int_equal(weft__rk_set_str(weft_span_start(NULL, "", NULL), WEFT__RK_STEP_ID, NULL),
                     WEFT_EINVAL);
    fixture_close(&f);
}

/* With the table full and only every other key of the list in it, initialisation gives those
 * keys their handles and leaves the others NULL; either way the spans do not change. */
static void
test_attr_keys_full_table_records_the_same_spans(void **state)
{
    struct fixture f;
    char junk[32];
    weft_err err = WEFT_OK;

    (void)state;
    for (size_t i = 0; i < WEFT__RK_COUNT; i += 2) {
        const struct weft_attr_key *k = NULL;
        assert_weft_ok(weft_key_intern(weft__rk_names[i], &k));
    }
    for (size_t n = 0; err == WEFT_OK && n <= WEFT_KEY_INTERN_MAX; n++) {
        const struct weft_attr_key *k = NULL;
        snprintf(junk, sizeof(junk), "test.junk.%zu", n);
        err = weft_key_intern(junk, &k);
    }
    assert_int_equal(err, WEFT_ELIMIT);
    weft__rt_keys_init();
    weft__rt_keys_init(); /* once: a second call changes nothing */
    for (size_t i = 0; i < WEFT__RK_COUNT; i++) {
        const struct weft_attr_key *k = weft__rk_key((weft__rk_id)i);
        if (i % 2 == 0) {
            assert_non_null(k);
            assert_string_equal(weft_key_name(k), weft__rk_names[i]);
        } else {
            assert_null(k);
        }
    }
    fixture_open(&f);
    record_all(&f, "strings", false);
    record_all(&f, "ids", true);
    assert_int_equal(mem_exporter_count(f.mem), 2);
    assert_same_attrs(&f, 0, 1);
    assert_int_equal(weft__rk_set_int(NULL, WEFT__RK_STEP_ATTEMPT, 1), WEFT_EINVAL);
    fixture_close(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attr_keys_are_valid_and_unique),
        cmocka_unit_test(test_attr_keys_genai_names_are_semconv_names),
        cmocka_unit_test(test_attr_keys_before_init_record_as_string_keys),
        cmocka_unit_test(test_attr_keys_full_table_records_the_same_spans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
