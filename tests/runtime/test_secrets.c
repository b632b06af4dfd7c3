/* tests/runtime/test_secrets.c - configured secrets never reach anything weft writes
 * (runtime/common/secrets.c, include/weft/secrets.h), wrong-typed model answers are LLM errors,
 * boolean environment variables accept the documented forms, and the databases are private.
 *
 * The end-to-end tests run the real `weft` binary as a child against a real OpenAI-compatible
 * server on 127.0.0.1 (tests/support/openai_server.c) whose answers, and a file a tool reads,
 * repeat the API key; then every file under WEFT_HOME (state.db, weft.db and their WAL files),
 * the traces file, the --record file and the captured terminal output are searched for it.
 * The key has no credential shape ("sk-...", "Bearer ..."), so only the registry can catch it. */
#define _GNU_SOURCE /* memmem */

#include "support/openai_server.h"
#include "support/otlp_sink.h"
#include "support/weft_test.h"

#include "base/env.h"
#include "runtime/common/secrets.h"

#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define WEFT_BIN WEFT_BINARY_DIR "/weft"
#define KEY      "local-key-7f3a9c21e5b04d68aa"

struct fx {
    char dir[256];
};

static int
setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-secrets-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    weft_secrets_clear();
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    weft_secrets_clear();
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    weft_test_rmtree(f->dir);
    free(f);
    return 0;
}

static void
put_file(const char *path, const char *text)
{
    FILE *out = fopen(path, "w");

    assert_non_null(out);
    fputs(text, out);
    fclose(out);
}

/* Whole file into a new string (NULL when it cannot be read); *len its size. */
static char *
slurp(const char *path, size_t *len)
{
    FILE *in = fopen(path, "rb");
    char *buf = NULL;
    long n = 0;

    if (in == NULL) {
        return NULL;
    }
    fseek(in, 0, SEEK_END);
    n = ftell(in);
    fseek(in, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    *len = fread(buf, 1, (size_t)n, in);
    buf[*len] = '\0';
    fclose(in);
    return buf;
}

static bool
file_has(const char *path, const char *needle)
{
    size_t len = 0;
    char *buf = slurp(path, &len);
    bool found = buf != NULL && memmem(buf, len, needle, strlen(needle)) != NULL;

    free(buf);
    return found;
}

/* ---- the registry ------------------------------------------------------------------------ */

static void
test_secrets_scrub_names_the_variable_never_the_value(void **state)
{
    char *out = NULL;
    const char *text = "key=" KEY "; again " KEY ".";

    (void)state;
    assert_weft_ok(weft_secrets_add("MY_API_KEY", KEY));
    assert_weft_ok(weft_secrets_scrub(text, strlen(text), &out));
    assert_non_null(out);
    assert_string_equal(out, "key=[REDACTED:MY_API_KEY]; again [REDACTED:MY_API_KEY].");
    weft_secrets_text_free(out);
    /* Nothing to scrub: no copy. */
    assert_weft_ok(weft_secrets_scrub("plain text", 10, &out));
    assert_null(out);
}

static void
test_secrets_short_values_and_bad_names_are_refused(void **state)
{
    (void)state;
    assert_weft_err(weft_secrets_add("SHORT", "1234567"), WEFT_EINVAL);
    assert_weft_err(weft_secrets_add("", KEY), WEFT_EINVAL);
    assert_weft_err(weft_secrets_add("BAD NAME", KEY), WEFT_EINVAL);
    assert_weft_err(weft_secrets_add(NULL, KEY), WEFT_EINVAL);
    assert_weft_err(weft_secrets_add("X", NULL), WEFT_EINVAL);
    assert_int_equal(weft_secrets_count(), 0);
}

static void
test_secrets_base64_form_and_longest_first(void **state)
{
    char *out = NULL;
    /* base64("local-key-7f3a9c21e5b04d68aa") */
    const char *text = "auth bG9jYWwta2V5LTdmM2E5YzIxZTViMDRkNjhhYQ== and " KEY "-suffix";

    (void)state;
    assert_weft_ok(weft_secrets_add("K", KEY));
    assert_weft_ok(weft_secrets_add("LONG", KEY "-suffix"));
    assert_weft_ok(weft_secrets_scrub(text, strlen(text), &out));
    assert_string_equal(out, "auth [REDACTED:K] and [REDACTED:LONG]");
    weft_secrets_text_free(out);
}

static void
test_secrets_registry_is_bounded(void **state)
{
    char value[32];
    weft_err last = WEFT_OK;

    (void)state;
    weft_test_capture_logs();
    for (int i = 0; i < WEFT_SECRETS_MAX + 8; i++) {
        snprintf(value, sizeof(value), "value-%04d-xxxx", i);
        last = weft_secrets_add("V", value);
    }
    assert_weft_err(last, WEFT_ELIMIT);
    assert_int_equal(weft_secrets_count(), WEFT_SECRETS_MAX);
    assert_non_null(strstr(weft_test_logs(), "not scrubbed"));
    /* Registering a value twice is a no-op. */
    weft_secrets_clear();
    assert_weft_ok(weft_secrets_add("K", KEY));
    size_t n = weft_secrets_count();
    assert_weft_ok(weft_secrets_add("K", KEY));
    assert_int_equal(weft_secrets_count(), n);
}

static void
test_secrets_load_reads_every_configured_source(void **state)
{
    char *out = NULL;
    const char *text = "otlp=tok-0123456789 lf=pk-lf-0123456789/sk-lf-0123456789 "
                       "basic=cGstbGYtMDEyMzQ1Njc4OTpzay1sZi0wMTIzNDU2Nzg5 hook=hook-secret-42";

    (void)state;
    weft_test_setenv("OTEL_EXPORTER_OTLP_HEADERS",
                     "x-team=a,Authorization=Bearer%20tok-0123456789");
    weft_test_setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-0123456789");
    weft_test_setenv("LANGFUSE_SECRET_KEY", "sk-lf-0123456789");
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_AUTHORIZATION", "Token hook-secret-42");
    weft__rt_secrets_load(NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_HEADERS", NULL);
    weft_test_setenv("LANGFUSE_PUBLIC_KEY", NULL);
    weft_test_setenv("LANGFUSE_SECRET_KEY", NULL);
    weft_test_setenv("WEFT_WATCHDOG_WEBHOOK_AUTHORIZATION", NULL);
    assert_weft_ok(weft_secrets_scrub(text, strlen(text), &out));
    assert_non_null(out);
    assert_string_equal(out, "otlp=[REDACTED:OTEL_EXPORTER_OTLP_HEADERS] "
                             "lf=[REDACTED:LANGFUSE_PUBLIC_KEY]/[REDACTED:LANGFUSE_SECRET_KEY] "
                             "basic=[REDACTED:LANGFUSE_SECRET_KEY] "
                             "hook=[REDACTED:WEFT_WATCHDOG_WEBHOOK_AUTHORIZATION]");
    weft_secrets_text_free(out);
}

/* ---- end to end: the weft binary against a local server that repeats the key ---------- */

struct run {
    int status;
    char out_path[300];
    char err_path[300];
};

static struct run
run_weft(struct fx *f, const char *const *args)
{
    char *argv[16];
    size_t argc = 0;
    posix_spawn_file_actions_t actions;
    pid_t pid = 0;
    int status = 0;
    struct run r;

    memset(&r, 0, sizeof(r));
    snprintf(r.out_path, sizeof(r.out_path), "%s/stdout", f->dir);
    snprintf(r.err_path, sizeof(r.err_path), "%s/stderr", f->dir);
    argv[argc++] = (char *)WEFT_BIN;
    for (; args[argc - 1] != NULL; argc++) {
        assert_true(argc < 15);
        argv[argc] = (char *)args[argc - 1];
    }
    argv[argc] = NULL;
    assert_int_equal(posix_spawn_file_actions_init(&actions), 0);
    assert_int_equal(posix_spawn_file_actions_addopen(&actions, 1, r.out_path,
                                                      O_WRONLY | O_CREAT | O_TRUNC, 0600),
                     0);
    assert_int_equal(posix_spawn_file_actions_addopen(&actions, 2, r.err_path,
                                                      O_WRONLY | O_CREAT | O_TRUNC, 0600),
                     0);
    assert_int_equal(posix_spawn(&pid, WEFT_BIN, &actions, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    r.status = WEXITSTATUS(status);
    return r;
}

static char leaked_in[512];

static int
check_no_key(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)ftw;
    if (type == FTW_F && S_ISREG(sb->st_mode) && file_has(path, KEY)) {
        snprintf(leaked_in, sizeof(leaked_in), "%s", path);
        return 1;
    }
    return 0;
}

static void
run_leaky_workflow(struct fx *f, const char *capture)
{
    struct openai_server *srv = NULL;
    char base[128];
    char home[300];
    char ws[300];
    char wf[300];
    char rec[300];
    char traces[300];
    char path[400];
    char text[1024];
    struct run r;
    struct stat sb;
    mode_t old_mask = umask(022); /* the usual default, which made state.db 0644 */

    assert_int_equal(openai_server_start(&srv), 0);
    openai_server_expect_key(srv, KEY);
    snprintf(home, sizeof(home), "%s/home", f->dir);
    snprintf(ws, sizeof(ws), "%s/ws", f->dir);
    snprintf(wf, sizeof(wf), "%s/wf.json", f->dir);
    snprintf(rec, sizeof(rec), "%s/rec.json", f->dir);
    snprintf(traces, sizeof(traces), "%s/traces.jsonl", f->dir);
    assert_int_equal(mkdir(ws, 0700), 0);
    snprintf(path, sizeof(path), "%s/secret.txt", ws);
    put_file(path, "the deployment key is " KEY "\n");
    snprintf(text, sizeof(text),
             "{\"name\": \"leak\", \"models\": {\"default\": {\"provider\": \"openai\", "
             "\"model\": \"gpt-4o-mini\", \"base_url\": \"%s\", \"api_key_env\": "
             "\"OPENAI_API_KEY\", \"max_retries\": 0, \"timeout_s\": 20}}, "
             "\"agents\": [{\"name\": \"reader\", \"instructions\": \"Read secret.txt.\", "
             "\"tools\": [\"read_file\", \"write_file\"], \"max_tool_rounds\": 4}], "
             "\"plan\": [{\"id\": \"read\", \"agent\": \"reader\", \"task\": \"Read "
             "secret.txt and tell me what it says.\"}]}",
             openai_server_base_url(srv, base, sizeof(base)));
    put_file(wf, text);
    /* The model repeats the key in tool arguments, a tool output repeats it (read_file of
     * secret.txt), and the final answer repeats it. */
    openai_server_push_tool_call(srv, "call_1", "write_file",
                                 "{\"path\": \"copy.txt\", \"content\": \"" KEY "\"}", 10, 5);
    openai_server_push_tool_call(srv, "call_2", "read_file", "{\"path\": \"secret.txt\"}", 10, 5);
    openai_server_push_text(srv, "The file says the key is " KEY ".", 10, 5);

    weft_test_setenv("OPENAI_API_KEY", KEY);
    weft_test_setenv("WEFT_HOME", home);
    weft_test_setenv("OTEL_TRACES_EXPORTER", "store,file");
    weft_test_setenv("WEFT_TRACES_FILE", traces);
    weft_test_setenv("WEFT_CAPTURE_CONTENT", capture);
    weft_test_setenv("OTEL_METRICS_EXPORTER", "none");
    r = run_weft(f, (const char *const[]){"run", wf, "--record", rec, "--workspace", ws,
                                          "--color=never", NULL});
    weft_test_setenv("OPENAI_API_KEY", NULL);
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    weft_test_setenv("WEFT_TRACES_FILE", NULL);
    weft_test_setenv("WEFT_CAPTURE_CONTENT", NULL);
    weft_test_setenv("OTEL_METRICS_EXPORTER", NULL);
    umask(old_mask);
    if (r.status != 0) {
        size_t len = 0;
        char *err = slurp(r.err_path, &len);
        print_message("weft run exited %d:\n%s\n", r.status, err != NULL ? err : "");
        free(err);
    }
    assert_int_equal(r.status, 0);
    assert_int_equal(openai_server_request_count(srv), 3);
    /* The key went to the server, as it must. */
    assert_non_null(strstr(openai_server_request_headers(srv, 0), KEY));
    /* The tool output reached the model scrubbed: the third request carries it. */
    assert_null(strstr(openai_server_request_text(srv, 2), KEY));
    assert_non_null(strstr(openai_server_request_text(srv, 2), "[REDACTED:OPENAI_API_KEY]"));
    openai_server_stop(srv);

    /* Nowhere else: terminal, recording, traces file, every file under WEFT_HOME. */
    assert_false(file_has(r.out_path, KEY));
    assert_false(file_has(r.err_path, KEY));
    assert_true(
        file_has(r.out_path, "output:  The file says the key is [REDACTED:OPENAI_API_KEY]"));
    assert_true(file_has(rec, "[REDACTED:OPENAI_API_KEY]"));
    assert_false(file_has(rec, KEY));
    assert_true(file_has(traces, "chat gpt-4o-mini"));
    assert_false(file_has(traces, KEY));
    snprintf(path, sizeof(path), "%s/copy.txt", ws);
    assert_false(file_has(path, KEY)); /* the tool ran with the scrubbed arguments */
    leaked_in[0] = '\0';
    assert_int_equal(nftw(home, check_no_key, 16, FTW_PHYS), 0);
    assert_string_equal(leaked_in, "");
    snprintf(path, sizeof(path), "%s/state.db", home);
    assert_true(file_has(path, "[REDACTED:OPENAI_API_KEY]")); /* the answer was kept, scrubbed */

    /* Both databases are private, whatever the umask. */
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    snprintf(path, sizeof(path), "%s/weft.db", home);
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
}

static void
test_secrets_key_repeated_by_answers_and_tools_is_written_nowhere(void **state)
{
    run_leaky_workflow(*state, NULL);
}

static void
test_secrets_key_is_written_nowhere_with_capture_content(void **state)
{
    struct fx *f = *state;
    char traces[300];

    run_leaky_workflow(f, "true");
    /* Capture was on: the content is on the spans, scrubbed. */
    snprintf(traces, sizeof(traces), "%s/traces.jsonl", f->dir);
    assert_true(file_has(traces, "gen_ai.input.messages"));
    assert_true(file_has(traces, "[REDACTED:OPENAI_API_KEY]"));
}

/* ---- environment booleans ------------------------------------------------------------------ */

static void
test_secrets_env_bool_accepts_the_documented_forms(void **state)
{
    static const char *const yes[] = {"1", "true", "TRUE", "yes", "Yes", "on", "ON"};
    static const char *const no[] = {"0", "false", "False", "no", "NO", "off", "Off"};

    (void)state;
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        weft_test_setenv("WEFT_TEST_BOOL", yes[i]);
        assert_true(weft__env_bool("WEFT_TEST_BOOL", false));
        weft_test_setenv("WEFT_TEST_BOOL", no[i]);
        assert_false(weft__env_bool("WEFT_TEST_BOOL", true));
    }
    /* Garbage warns, naming the variable and the forms, and keeps the default. */
    weft_test_capture_logs();
    weft_test_setenv("WEFT_TEST_BOOL", "maybe");
    assert_true(weft__env_bool("WEFT_TEST_BOOL", true));
    assert_non_null(strstr(weft_test_logs(), "WEFT_TEST_BOOL=maybe: expected true/false, 1/0"));
    /* OTel's own variables keep the specification's rule. */
    weft_test_setenv("WEFT_TEST_BOOL", "1");
    assert_false(weft__env_bool_otel("WEFT_TEST_BOOL", false));
    weft_test_setenv("WEFT_TEST_BOOL", "True");
    assert_true(weft__env_bool_otel("WEFT_TEST_BOOL", false));
    weft_test_setenv("WEFT_TEST_BOOL", NULL);
}

/* In-process runs recorded by a real OTLP receiver (tests/support/otlp_sink.c). */
static struct weft_run_result *
run_inline(struct fx *f, struct otlp_sink *sink, const char *workflow, const char *script)
{
    struct weft_workflow *wf = NULL;
    struct weft_run_result *r = NULL;
    struct weft_run_options ro;
    struct weft_diags d = {0};
    char path[400];
    char state_path[400];
    char error[512] = "";

    snprintf(path, sizeof(path), "%s/script.json", f->dir);
    if (script != NULL) {
        put_file(path, script);
    }
    snprintf(path, sizeof(path), "%s/wf.json", f->dir);
    put_file(path, workflow);
    snprintf(state_path, sizeof(state_path), "%s/state.db", f->dir);
    assert_weft_ok(weft_workflow_load(path, &wf, &d));
    weft_diags_cleanup(&d);
    memset(&ro, 0, sizeof(ro));
    ro.provider = otlp_sink_provider(sink);
    ro.state_path = state_path;
    ro.workspace = f->dir;
    ro.capture_content = -1;
    ro.input = "hello";
    if (weft_run(wf, &ro, &r, error, sizeof(error)) != WEFT_OK) {
        fail_msg("weft_run: %s", error);
    }
    weft_workflow_free(wf);
    otlp_sink_collect(sink);
    return r;
}

static void
test_secrets_capture_content_1_turns_capture_on(void **state)
{
    struct fx *f = *state;
    struct otlp_sink *sink = otlp_sink_new();
    struct weft_run_result *r = NULL;
    json_t *chat = NULL;

    weft_test_setenv("WEFT_CAPTURE_CONTENT", "1");
    r = run_inline(f, sink,
                   "{\"name\": \"c\", \"models\": {\"m\": {\"provider\": \"scripted\", \"model\": "
                   "\"toy\", \"script\": \"script.json\"}}, \"agents\": [{\"name\": \"a\"}], "
                   "\"plan\": [{\"agent\": \"a\", \"task\": \"say hi\"}]}",
                   "{\"version\": 1, \"responses\": {\"a\": {\"act\": [{\"content\": \"hi "
                   "there\"}]}}}");
    weft_test_setenv("WEFT_CAPTURE_CONTENT", NULL);
    assert_int_equal(r->status, WEFT_RUN_COMPLETED);
    chat = otlp_sink_find(sink, "chat toy", 0);
    assert_non_null(chat);
    assert_non_null(strstr(otlp_span_attr(chat, "gen_ai.input.messages"), "say hi"));
    assert_non_null(strstr(otlp_span_attr(chat, "gen_ai.output.messages"), "hi there"));
    weft_run_result_free(r);
    otlp_sink_free(sink);
}

/* ---- wrong-typed answers through a whole run ------------------------------------------- */

static void
test_secrets_wrong_typed_answer_fails_the_step_with_error_type(void **state)
{
    struct fx *f = *state;
    struct otlp_sink *sink = otlp_sink_new();
    struct openai_server *srv = NULL;
    struct weft_run_result *r = NULL;
    char base[128];
    char wf[1024];
    json_t *chat = NULL;

    assert_int_equal(openai_server_start(&srv), 0);
    openai_server_push(srv, &(struct openai_reply){.raw_body = "{\"choices\": [{\"message\": "
                                                               "{\"role\": \"assistant\", "
                                                               "\"content\": 12}}]}"});
    snprintf(wf, sizeof(wf),
             "{\"name\": \"t\", \"models\": {\"m\": {\"provider\": \"openai\", \"model\": "
             "\"gpt-4o-mini\", \"base_url\": \"%s\", \"max_retries\": 0}}, \"agents\": "
             "[{\"name\": \"a\"}], \"plan\": [{\"agent\": \"a\", \"task\": \"t\"}]}",
             openai_server_base_url(srv, base, sizeof(base)));
    r = run_inline(f, sink, wf, NULL);
    assert_int_not_equal(r->status, WEFT_RUN_COMPLETED);
    chat = otlp_sink_find(sink, "chat gpt-4o-mini", 0);
    assert_non_null(chat);
    assert_string_equal(otlp_span_attr(chat, "error.type"), "invalid_response");
    assert_non_null(
        strstr(json_string_value(json_object_get(json_object_get(chat, "status"), "message")),
               "choices[0].message.content: expected string or null, got integer"));
    weft_run_result_free(r);
    openai_server_stop(srv);
    otlp_sink_free(sink);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_secrets_scrub_names_the_variable_never_the_value),
        T(test_secrets_short_values_and_bad_names_are_refused),
        T(test_secrets_base64_form_and_longest_first),
        T(test_secrets_registry_is_bounded),
        T(test_secrets_load_reads_every_configured_source),
        T(test_secrets_key_repeated_by_answers_and_tools_is_written_nowhere),
        T(test_secrets_key_is_written_nowhere_with_capture_content),
        T(test_secrets_env_bool_accepts_the_documented_forms),
        T(test_secrets_capture_content_1_turns_capture_on),
        T(test_secrets_wrong_typed_answer_fails_the_step_with_error_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
