/* tests/runtime/test_embeddings.c - skill memory with an embeddings endpoint
 * (runtime/memory/embed.c, runtime/memory/memory.c, docs/memory.md "Embeddings"), against a fake
 * OpenAI-compatible server (tests/support/embed_server.h) whose vectors put synonyms close
 * together:
 * - a task that shares no word with a stored one but means the same is found by its vector
 *   (the retrieval span's documents carry both scores); an unrelated one is not shown;
 * - the embeddings calls are `embeddings {model}` spans with the GenAI attributes, under the
 *   retrieval span (lookup) and the agent span (save), and the vector is stored with the skill;
 * - an endpoint that is down, answers 500, garbage or a vector of the wrong length: the run
 *   completes, ranks by text, warns once naming the endpoint, counts the error by error.type;
 * - the API key reaches the server and nothing else: no span, no log line, no byte of the store;
 * - bad "memory.embeddings" values are load errors naming the field.
 */
#include "runtime/memory/embed.h"
#include "runtime/state/state.h"
#include "support/embed_server.h"
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

#define KEY "sk-weft-test-SECRET-4242"

struct fx {
    char dir[256];
    char state[300];
    char base[128];
    struct embed_server *srv;
    struct otlp_sink *sink;
    struct weft_workflow *wf;
    struct weft_run_result *r;
    struct weft_run_options ro;
    struct weft_meter *meter;
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-embed-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->state, sizeof(f->state), "%s/state.db", f->dir);
    assert_int_equal(embed_server_start(&f->srv), 0);
    embed_server_base_url(f->srv, f->base, sizeof(f->base));
    embed_server_expect_key(f->srv, KEY);
    weft_test_setenv("WEFT_TEST_EMBED_KEY", KEY);
    f->sink = otlp_sink_new();
    assert_weft_ok(weft_meter_new(NULL, &f->meter));
    f->ro.provider = otlp_sink_provider(f->sink);
    f->ro.state_path = f->state;
    f->ro.workspace = f->dir;
    f->ro.capture_content = 1;
    f->ro.meter = f->meter;
    weft_test_capture_logs();
    weft_test_clear_logs();
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_run_result_free(f->r);
    weft_workflow_free(f->wf);
    otlp_sink_free(f->sink);
    weft_meter_free(f->meter);
    embed_server_stop(f->srv);
    weft_test_setenv("WEFT_TEST_EMBED_KEY", NULL);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

/* A one-step workflow for agent "a" on @p task, embeddings at @p base (extra keys @p extra). */
static void
load_task(struct fx *f, const char *base, const char *extra, const char *task)
{
    char text[2048];
    char path[512];
    struct weft_diags d = {0};

    weft_test_write_file(
        f->dir, "script.json",
        "{\"responses\": {\"a\": {\"act\": [{\"content\": \"use an iterative loop\"}]}}}");
    snprintf(text, sizeof(text),
             "{\"name\": \"emb\", \"memory\": {\"skills\": true, \"min_score\": 0.3,"
             " \"embeddings\": {\"base_url\": \"%s\", \"model\": \"fake-embed\","
             " \"api_key_env\": \"WEFT_TEST_EMBED_KEY\"%s}},"
             " \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": \"script.json\"}},"
             " \"agents\": [{\"name\": \"a\"}],"
             " \"plan\": [{\"id\": \"s1\", \"agent\": \"a\", \"task\": \"%s\"}]}",
             base, extra, task);
    weft_test_write_file(f->dir, "wf.json", text);
    snprintf(path, sizeof(path), "%s/wf.json", f->dir);
    weft_workflow_free(f->wf);
    f->wf = NULL;
    if (weft_workflow_load(path, &f->wf, &d) != WEFT_OK) {
        char line[512];
        fail_msg("%s", d.count > 0 ? weft_diag_format(&d.items[0], line, sizeof(line)) : path);
    }
    weft_diags_cleanup(&d);
}

static void
run(struct fx *f)
{
    char error[512] = "";

    weft_run_result_free(f->r);
    f->r = NULL;
    if (weft_run(f->wf, &f->ro, &f->r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run: %s", error);
    }
    assert_int_equal(f->r->status, WEFT_RUN_COMPLETED);
    otlp_sink_collect(f->sink);
}

static bool
count_vector(const char *id, const float *values, void *user_data)
{
    (void)id;
    (void)values;
    (*(size_t *)user_data)++;
    return true;
}

/* How many vectors of "fake-embed" agent "a" has in the store. */
static size_t
stored_vectors(const struct fx *f)
{
    struct rt_state *st = NULL;
    size_t n = 0;
    char err[256];

    assert_weft_ok(weft__state_open(f->state, &st, err, sizeof(err)));
    assert_weft_ok(
        weft__state_skill_vectors_each(st, "a", "fake-embed", EMBED_SERVER_DIMS, count_vector, &n));
    weft__state_close(st);
    return n;
}

static void
test_embeddings_vector_only_match_is_shown(void **state)
{
    struct fx *f = *state;
    json_t *retrieval = NULL;
    json_t *emb = NULL;
    json_t *docs = NULL;
    json_t *chat = NULL;
    char buf[300];

    load_task(f, f->base, "", "Compute the Fibonacci series");
    run(f);
    /* One lookup (nothing stored yet) and one save, both embedded. */
    assert_int_equal(embed_server_request_count(f->srv), 2);
    assert_string_equal(embed_server_request_path(f->srv, 1, buf, sizeof(buf)), "/v1/embeddings");
    assert_string_equal(embed_server_request_auth(f->srv, 1, buf, sizeof(buf)), "Bearer " KEY);
    assert_string_equal(
        json_string_value(json_object_get(embed_server_request_body(f->srv, 1), "model")),
        "fake-embed");
    assert_string_equal(
        json_string_value(json_object_get(embed_server_request_body(f->srv, 1), "input")),
        "Compute the Fibonacci series");
    assert_int_equal(stored_vectors(f), 1);
    /* The save's span is under the agent span. */
    emb = otlp_sink_find(f->sink, "embeddings fake-embed", 1);
    assert_non_null(emb);
    assert_string_equal(otlp_span_attr(emb, "weft.skills.operation"), "save");
    assert_non_null(strstr(otlp_span_attr(otlp_sink_parent(f->sink, emb), "gen_ai.operation.name"),
                           "invoke_agent"));

    /* No word in common, the same meaning. */
    load_task(f, f->base, "", "calculate fib sequence");
    run(f);
    retrieval = otlp_sink_find(f->sink, "retrieval weft.skills", 1);
    assert_non_null(retrieval);
    assert_string_equal(otlp_span_attr(retrieval, "weft.skills.hits"), "1");
    assert_string_equal(otlp_span_attr(retrieval, "weft.skills.ranking"), "text+vector");
    docs = json_loads(otlp_span_attr(retrieval, "gen_ai.retrieval.documents"), 0, NULL);
    assert_non_null(docs);
    assert_true(json_real_value(json_object_get(json_array_get(docs, 0), "text_score")) == 0.0);
    assert_true(json_real_value(json_object_get(json_array_get(docs, 0), "vector_score")) > 0.8);
    assert_true(json_real_value(json_object_get(json_array_get(docs, 0), "score")) > 0.4);
    json_decref(docs);
    /* The lookup's embeddings span: a child of the retrieval span, with the GenAI attributes. */
    emb = otlp_sink_find(f->sink, "embeddings fake-embed", 2);
    assert_non_null(emb);
    assert_ptr_equal(otlp_sink_parent(f->sink, emb), retrieval);
    assert_string_equal(otlp_span_attr(emb, "gen_ai.operation.name"), "embeddings");
    assert_string_equal(otlp_span_attr(emb, "gen_ai.request.model"), "fake-embed");
    assert_string_equal(otlp_span_attr(emb, "gen_ai.usage.input_tokens"), "3");
    assert_string_equal(otlp_span_attr(emb, "server.address"), "127.0.0.1");
    assert_non_null(otlp_span_attr(emb, "server.port"));
    assert_string_equal(otlp_span_attr(emb, "gen_ai.embeddings.dimension.count"), "32");
    assert_string_equal(otlp_span_attr(emb, "openinference.span.kind"), "EMBEDDING");
    assert_int_equal(json_integer_value(json_object_get(emb, "kind")), 3); /* CLIENT */
    assert_string_equal(otlp_span_attr(emb, "error.type"), "");
    chat = otlp_sink_find(f->sink, "chat m", 1);
    assert_non_null(chat);
    assert_non_null(strstr(otlp_span_attr(chat, "gen_ai.input.messages"), "iterative loop"));
    assert_true(weft_test_prom_has(f->meter, "weft_skills_embeddings_total{"));
    assert_true(weft_test_prom_has(f->meter, "outcome=\"hit\""));
}

static void
test_embeddings_unrelated_task_is_not_shown(void **state)
{
    struct fx *f = *state;
    json_t *retrieval = NULL;

    load_task(f, f->base, "", "Compute the Fibonacci series");
    run(f);
    load_task(f, f->base, "", "paint the fence blue");
    run(f);
    retrieval = otlp_sink_find(f->sink, "retrieval weft.skills", 1);
    assert_non_null(retrieval);
    assert_string_equal(otlp_span_attr(retrieval, "weft.skills.ranking"), "text+vector");
    assert_string_equal(otlp_span_attr(retrieval, "weft.skills.hits"), "0");
    assert_string_equal(otlp_span_attr(retrieval, "gen_ai.retrieval.documents"), "[]");
}

/* How many lines of @p logs contain @p needle. */
static size_t
lines_with(const char *logs, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(logs, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

static void
test_embeddings_endpoint_down_falls_back_to_text_and_counts(void **state)
{
    struct fx *f = *state;
    struct embed_server *gone = NULL;
    char base[128];
    char endpoint[160];
    json_t *retrieval = NULL;
    json_t *emb = NULL;

    /* A port nothing listens on any more. */
    assert_int_equal(embed_server_start(&gone), 0);
    embed_server_base_url(gone, base, sizeof(base));
    embed_server_stop(gone);
    snprintf(endpoint, sizeof(endpoint), "%s/embeddings", base);

    load_task(f, base, "", "Compute the Fibonacci series");
    run(f);
    assert_int_equal(stored_vectors(f), 0); /* kept without a vector */
    /* Two failed calls (lookup, save), one warning naming the endpoint. */
    assert_int_equal(lines_with(weft_test_logs(), "memory.embeddings"), 1);
    assert_int_equal(lines_with(weft_test_logs(), endpoint), 1);
    emb = otlp_sink_find(f->sink, "embeddings fake-embed", 0);
    assert_non_null(emb);
    assert_string_equal(otlp_span_attr(emb, "error.type"), "connection");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(emb, "status"), "code")),
                     2);

    /* Shared words still find it, by text. */
    load_task(f, base, "", "compute fibonacci series fast");
    run(f);
    retrieval = otlp_sink_find(f->sink, "retrieval weft.skills", 1);
    assert_string_equal(otlp_span_attr(retrieval, "weft.skills.hits"), "1");
    assert_string_equal(otlp_span_attr(retrieval, "weft.skills.ranking"), "text");
    assert_int_equal(lines_with(weft_test_logs(), "memory.embeddings"), 2); /* once per run */
    assert_true(weft_test_prom_has(f->meter, "weft_skills_embedding_errors_total{"));
    assert_true(weft_test_prom_has(f->meter, "error_type=\"connection\""));
    assert_true(weft_test_prom_has(f->meter, "operation=\"lookup\""));
    assert_true(weft_test_prom_has(f->meter, "operation=\"save\""));
}

/* 500, garbage and a vector of the wrong length: each falls back, with its error.type. */
static void
test_embeddings_bad_answers_fall_back_with_their_error_type(void **state)
{
    struct fx *f = *state;
    static const struct {
        embed_mode mode;
        const char *type;
    } cases[] = {
        {EMBED_MODE_500, "500"},
        {EMBED_MODE_GARBAGE, "invalid_response"},
        {EMBED_MODE_WRONG_DIMS, "dimension_mismatch"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *emb = NULL;

        embed_server_set_mode(f->srv, cases[i].mode);
        load_task(f, f->base, ", \"dimensions\": 32", "Compute the Fibonacci series");
        run(f);
        emb = otlp_sink_find(f->sink, "embeddings fake-embed", 2 * i);
        assert_non_null(emb);
        assert_string_equal(otlp_span_attr(emb, "error.type"), cases[i].type);
        assert_string_equal(otlp_span_attr(otlp_sink_find(f->sink, "retrieval weft.skills", i),
                                           "weft.skills.ranking"),
                            "text");
    }
    assert_int_equal(stored_vectors(f), 0);
    assert_true(weft_test_prom_has(f->meter, "error_type=\"500\""));
    assert_true(weft_test_prom_has(f->meter, "error_type=\"invalid_response\""));
    assert_true(weft_test_prom_has(f->meter, "error_type=\"dimension_mismatch\""));
    /* "dimensions" is sent to the endpoint. */
    assert_int_equal(
        json_integer_value(json_object_get(embed_server_request_body(f->srv, 0), "dimensions")),
        32);
}

/* Does the file at @p path hold @p needle anywhere (binary-safe)? */
static bool
file_has(const char *path, const char *needle)
{
    FILE *in = fopen(path, "rb");
    char *data = NULL;
    size_t len = 0;
    size_t cap = 0;
    size_t got = 0;
    bool has = false;

    if (in == NULL) {
        return false;
    }
    do {
        if (len + 65536 > cap) {
            cap = cap * 2 + 65536;
            data = realloc(data, cap);
            assert_non_null(data);
        }
        got = fread(data + len, 1, cap - len, in);
        len += got;
    } while (got > 0);
    fclose(in);
    for (size_t i = 0; !has && i + strlen(needle) <= len; i++) {
        has = memcmp(data + i, needle, strlen(needle)) == 0;
    }
    free(data);
    return has;
}

static void
test_embeddings_key_never_in_spans_logs_or_store(void **state)
{
    struct fx *f = *state;
    size_t len = 0;
    const char *raw = NULL;
    char wal[320];

    load_task(f, f->base, "", "Compute the Fibonacci series");
    run(f);
    load_task(f, f->base, "", "calculate fib sequence");
    run(f);
    /* The server saw the key (so it was sent) ... */
    assert_true(embed_server_request_count(f->srv) >= 4);
    /* ... and an error path logs too: a wrong key, one warning. */
    embed_server_expect_key(f->srv, "another-key");
    run(f);
    assert_int_equal(lines_with(weft_test_logs(), "memory.embeddings"), 1);
    assert_non_null(strstr(weft_test_logs(), "401"));
    raw = otlp_sink_raw(f->sink, &len);
    assert_non_null(raw);
    assert_null(strstr(raw, "SECRET"));
    assert_null(strstr(weft_test_logs(), "SECRET"));
    assert_false(file_has(f->state, "SECRET"));
    snprintf(wal, sizeof(wal), "%s-wal", f->state);
    assert_false(file_has(wal, "SECRET"));
}

/* Each bad value is a load error naming the file's field and what was expected. */
static void
test_embeddings_bad_config_is_a_load_error(void **state)
{
    struct fx *f = *state;
    static const struct {
        const char *embeddings;
        const char *path;
        const char *expected;
    } cases[] = {
        {"{\"model\": \"m\"}", "memory.embeddings.base_url", "required"},
        {"{\"base_url\": \"ftp://x\", \"model\": \"m\"}", "memory.embeddings.base_url",
         "http:// or https://"},
        {"{\"base_url\": \"http://x/v1\"}", "memory.embeddings.model", "required"},
        {"{\"base_url\": \"http://x/v1\", \"model\": \"m\", \"weight\": 1.5}",
         "memory.embeddings.weight", "[0, 1]"},
        {"{\"base_url\": \"http://x/v1\", \"model\": \"m\", \"timeout_s\": -1}",
         "memory.embeddings.timeout_s", "number"},
        {"{\"base_url\": \"http://x/v1\", \"model\": \"m\", \"dimensions\": 0}",
         "memory.embeddings.dimensions", "integer"},
        {"{\"base_url\": \"http://x/v1\", \"model\": \"m\", \"api_key\": \"k\"}",
         "memory.embeddings.api_key", "unknown key"},
        {"\"http://x/v1\"", "memory.embeddings", "expected object"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[1024];
        char path[512];
        char line[512];
        struct weft_diags d = {0};
        struct weft_workflow *wf = NULL;

        snprintf(text, sizeof(text),
                 "{\"name\": \"bad\", \"memory\": {\"skills\": true, \"embeddings\": %s},"
                 " \"models\": {\"m\": {\"provider\": \"scripted\", \"script\": \"s.json\"}},"
                 " \"agents\": [{\"name\": \"a\"}]}",
                 cases[i].embeddings);
        weft_test_write_file(f->dir, "s.json", "{\"responses\": {}}");
        weft_test_write_file(f->dir, "bad.json", text);
        snprintf(path, sizeof(path), "%s/bad.json", f->dir);
        assert_int_not_equal(weft_workflow_load(path, &wf, &d), WEFT_OK);
        assert_true(d.count >= 1);
        weft_diag_format(&d.items[0], line, sizeof(line));
        if (strstr(line, cases[i].path) == NULL || strstr(line, cases[i].expected) == NULL ||
            strstr(line, "bad.json") == NULL) {
            fail_msg("case %zu: %s", i, line);
        }
        weft_diags_cleanup(&d);
    }
}

/* The client alone: the real wire format parsed, and what is refused. */
static void
test_embeddings_parse_takes_openai_answers_only(void **state)
{
    static const char ok[] = "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
                             "\"embedding\":[0.5,-0.25,1e-3]}],\"model\":\"m\","
                             "\"usage\":{\"prompt_tokens\":7,\"total_tokens\":7}}";
    static const char *const bad[] = {
        "",
        "[]",
        "{\"data\":[]}",
        "{\"data\":[{\"embedding\":\"AAAA\"}]}",
        "{\"data\":[{\"embedding\":[0,0,0]}]}",
        "{\"data\":[{\"embedding\":[1,\"x\"]}]}",
        "{\"data\":[{\"embedding\":[1]}],\"usage\":{\"prompt_tokens\":-1}}",
    };
    struct rt_embedding v;
    struct rt_embed_error e;

    (void)state;
    assert_weft_ok(weft__rt_embed_parse(ok, strlen(ok), &v, &e));
    assert_int_equal(v.dims, 3);
    assert_true(v.values[1] == -0.25f);
    assert_int_equal(v.input_tokens, 7);
    weft__rt_embedding_cleanup(&v);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(weft__rt_embed_parse(bad[i], strlen(bad[i]), &v, &e), WEFT_EPARSE);
        assert_string_equal(e.type, "invalid_response");
        assert_null(v.values);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_embeddings_vector_only_match_is_shown, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_embeddings_unrelated_task_is_not_shown, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_embeddings_endpoint_down_falls_back_to_text_and_counts,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_embeddings_bad_answers_fall_back_with_their_error_type,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_embeddings_key_never_in_spans_logs_or_store, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_embeddings_bad_config_is_a_load_error, setup,
                                        teardown),
        cmocka_unit_test(test_embeddings_parse_takes_openai_answers_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
