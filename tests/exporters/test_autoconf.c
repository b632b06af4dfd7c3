/* tests/exporters/test_autoconf.c - the exporter registry and OTEL_TRACES_EXPORTER wiring:
 * the registry's entries are complete and found by name, each named exporter gets its own
 * processor in list order, LANGFUSE_* implies Langfuse once, unknown names are reported with
 * every valid name and skipped, "none" adds nothing, a disabled SDK opens nothing, and spans
 * reach every destination (file, store, and OTLP to a real receiver). */
#include "support/http_receiver.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char home[256];

static int
setup(void **state)
{
    (void)state;
    snprintf(home, sizeof(home), "/tmp/weft-autoconf-XXXXXX");
    assert_non_null(mkdtemp(home));
    weft_test_setenv("WEFT_HOME", home);
    weft_test_setenv("WEFT_TRACES_FILE", NULL);
    weft_test_setenv("OTEL_SDK_DISABLED", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
    weft_test_setenv("LANGFUSE_HOST", NULL);
    weft_test_setenv("LANGFUSE_PUBLIC_KEY", NULL);
    weft_test_setenv("LANGFUSE_SECRET_KEY", NULL);
    return 0;
}

static int
teardown(void **state)
{

    (void)state;
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    weft_test_setenv("OTEL_SDK_DISABLED", NULL);
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", NULL);
    weft_test_setenv("LANGFUSE_HOST", NULL);
    weft_test_setenv("LANGFUSE_PUBLIC_KEY", NULL);
    weft_test_setenv("LANGFUSE_SECRET_KEY", NULL);
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    weft_test_rmtree(home);
    return 0;
}

static void
emit_one(struct weft_provider *p)
{
    struct weft_tracer *t = NULL;

    assert_weft_ok(weft_provider_get_tracer(p, "autoconf", NULL, &t));
    weft_span_end(weft_span_start(t, "autoconf-span", NULL), 0);
}

static void
test_autoconf_file_and_store_receive_spans_unknown_name_reported(void **state)
{
    struct weft_provider *p = NULL;
    struct weft_store *store = NULL;
    struct weft_trace_summary *list = NULL;
    size_t n = 0;
    char path[512];
    char line[8192];
    FILE *fp = NULL;

    (void)state;
    weft_test_capture_logs();
    weft_test_setenv("OTEL_TRACES_EXPORTER", "file, store,bogus,none");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_err(weft_provider_add_env_exporters(p, "otlp"), WEFT_EINVAL);
    assert_non_null(strstr(weft_test_logs(), "bogus"));
    assert_non_null(weft_provider_processor(p, 0));
    assert_non_null(weft_provider_processor(p, 1));
    assert_null(weft_provider_processor(p, 2));
    emit_one(p);
    assert_weft_ok(weft_provider_shutdown(p, 5000));
    weft_provider_free(p);

    snprintf(path, sizeof(path), "%s/traces.jsonl", home);
    fp = fopen(path, "r");
    assert_non_null(fp);
    assert_non_null(fgets(line, sizeof(line), fp));
    assert_non_null(strstr(line, "\"autoconf-span\""));
    fclose(fp);

    assert_weft_ok(weft_store_open(NULL, &store)); /* the default path under WEFT_HOME */
    assert_weft_ok(weft_store_list_traces(store, 10, &list, &n));
    assert_int_equal(n, 1);
    assert_string_equal(list[0].root_name, "autoconf-span");
    weft_trace_summaries_free(list, n);
    weft_store_close(store);
}

static void
test_autoconf_default_list_is_used_when_unset(void **state)
{
    struct weft_provider *p = NULL;
    char path[512];
    struct stat st;

    (void)state;
    weft_test_setenv("OTEL_TRACES_EXPORTER", NULL);
    snprintf(path, sizeof(path), "%s/custom.jsonl", home);
    weft_test_setenv("WEFT_TRACES_FILE", path);
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_ok(weft_provider_add_env_exporters(p, "file"));
    emit_one(p);
    assert_weft_ok(weft_provider_shutdown(p, 5000));
    weft_provider_free(p);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > 0);
}

static void
test_autoconf_otlp_reaches_the_receiver(void **state)
{
    struct http_receiver *rx = NULL;
    struct weft_provider *p = NULL;
    char url[128];

    (void)state;
    assert_int_equal(http_receiver_start(&rx), 0);
    weft_test_setenv("OTEL_TRACES_EXPORTER", "otlp");
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", http_receiver_url(rx, "", url, sizeof(url)));
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_ok(weft_provider_add_env_exporters(p, NULL));
    emit_one(p);
    assert_weft_ok(weft_provider_shutdown(p, 5000));
    weft_provider_free(p);
    assert_int_equal(http_receiver_count(rx), 1);
    assert_string_equal(http_receiver_request(rx, 0)->path, "/v1/traces");
    http_receiver_stop(rx);
}

static void
test_autoconf_none_and_disabled_add_nothing(void **state)
{
    struct weft_provider *p = NULL;
    char path[512];
    struct stat st;

    (void)state;
    weft_test_setenv("OTEL_TRACES_EXPORTER", "none");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_ok(weft_provider_add_env_exporters(p, "store"));
    assert_null(weft_provider_processor(p, 0));
    weft_provider_free(p);

    weft_test_setenv("OTEL_TRACES_EXPORTER", "file,store");
    weft_test_setenv("OTEL_SDK_DISABLED", "true");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_ok(weft_provider_add_env_exporters(p, NULL));
    assert_null(weft_provider_processor(p, 0));
    weft_provider_free(p);
    snprintf(path, sizeof(path), "%s/weft.db", home);
    assert_int_not_equal(stat(path, &st), 0); /* nothing was opened */
}

static bool
is_table_text(const char *s)
{
    /* Text that goes into a Markdown table cell as is: present, one line, no cell separator. */
    return s != NULL && s[0] != '\0' && strchr(s, '|') == NULL && strchr(s, '\n') == NULL;
}

static void
test_autoconf_registry_entries_are_complete_and_findable(void **state)
{
    const char *const expected[] = {"otlp", "langfuse", "store", "file", "console", "none"};
    const struct weft_exporter_info *e = NULL;
    size_t count = 0;

    (void)state;
    for (size_t i = 0; (e = weft_exporter_info_at(i)) != NULL; i++) {
        assert_true(i < sizeof(expected) / sizeof(expected[0]));
        assert_string_equal(e->name, expected[i]);
        assert_ptr_equal(weft_exporter_info_find(e->name), e);
        assert_true(is_table_text(e->description));
        if (strcmp(e->name, "none") == 0) {
            assert_null(e->processor);
        } else {
            assert_non_null(e->processor);
            assert_true(strcmp(e->processor, "batch") == 0 || strcmp(e->processor, "simple") == 0);
        }
        assert_true(e->env_count == 0 || e->env != NULL);
        for (size_t v = 0; v < e->env_count; v++) {
            const char *name = e->env[v].name;

            assert_true(strncmp(name, "OTEL_", 5) == 0 || strncmp(name, "WEFT_", 5) == 0 ||
                        strncmp(name, "LANGFUSE_", 9) == 0);
            assert_true(is_table_text(e->env[v].meaning));
            assert_true(e->env[v].default_value == NULL || is_table_text(e->env[v].default_value));
            for (size_t w = 0; w < v; w++) {
                assert_string_not_equal(e->env[w].name, name); /* listed once */
            }
        }
        count++;
    }
    assert_int_equal(count, sizeof(expected) / sizeof(expected[0]));
    assert_null(weft_exporter_info_at(count));
    assert_null(weft_exporter_info_find("OTLP")); /* names are exact, as the list is read */
    assert_null(weft_exporter_info_find("bogus"));
    assert_null(weft_exporter_info_find(NULL));
    assert_string_equal(weft_exporter_info_find("console")->processor, "simple");
    assert_string_equal(weft_exporter_info_find("otlp")->env[0].name,
                        "OTEL_EXPORTER_OTLP_ENDPOINT");
}

static void
test_autoconf_unknown_name_lists_every_valid_name(void **state)
{
    struct weft_provider *p = NULL;
    const struct weft_exporter_info *e = NULL;
    const char *logs = NULL;

    (void)state;
    weft_test_capture_logs();
    weft_test_setenv("OTEL_TRACES_EXPORTER", "stroe");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_err(weft_provider_add_env_exporters(p, NULL), WEFT_EINVAL);
    assert_null(weft_provider_processor(p, 0));
    weft_provider_free(p);
    logs = weft_test_logs();
    assert_non_null(strstr(logs, "unknown exporter 'stroe'"));
    for (size_t i = 0; (e = weft_exporter_info_at(i)) != NULL; i++) {
        char quoted[64];

        snprintf(quoted, sizeof(quoted), " %s%s", e->name, e->name[0] == 'n' ? ";" : ",");
        assert_non_null(strstr(logs, quoted));
    }
}

static void
test_autoconf_processors_follow_the_list_with_registry_names(void **state)
{
    struct weft_provider *p = NULL;

    (void)state;
    weft_test_setenv("OTEL_TRACES_EXPORTER", "console,store , file,otlp");
    weft_test_setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_ok(weft_provider_add_env_exporters(p, NULL));
    assert_string_equal(weft_processor_exporter_name(weft_provider_processor(p, 0)), "console");
    assert_string_equal(weft_processor_exporter_name(weft_provider_processor(p, 1)), "store");
    assert_string_equal(weft_processor_exporter_name(weft_provider_processor(p, 2)), "file");
    assert_string_equal(weft_processor_exporter_name(weft_provider_processor(p, 3)), "otlp");
    assert_null(weft_provider_processor(p, 4));
    assert_weft_ok(weft_provider_shutdown(p, 5000));
    weft_provider_free(p);
}

static void
test_autoconf_langfuse_keys_imply_langfuse_once(void **state)
{
    struct weft_provider *p = NULL;

    (void)state;
    weft_test_setenv("LANGFUSE_HOST", "http://127.0.0.1:9");
    weft_test_setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-test");
    weft_test_setenv("LANGFUSE_SECRET_KEY", "sk-lf-test");
    weft_test_setenv("OTEL_TRACES_EXPORTER", "store");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_ok(weft_provider_add_env_exporters(p, NULL));
    assert_string_equal(weft_processor_exporter_name(weft_provider_processor(p, 0)), "store");
    assert_string_equal(weft_processor_exporter_name(weft_provider_processor(p, 1)), "langfuse");
    assert_null(weft_provider_processor(p, 2));
    assert_weft_ok(weft_provider_shutdown(p, 5000));
    weft_provider_free(p);

    weft_test_setenv("OTEL_TRACES_EXPORTER", "langfuse,store");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_weft_ok(weft_provider_add_env_exporters(p, NULL));
    assert_string_equal(weft_processor_exporter_name(weft_provider_processor(p, 0)), "langfuse");
    assert_string_equal(weft_processor_exporter_name(weft_provider_processor(p, 1)), "store");
    assert_null(weft_provider_processor(p, 2));
    assert_weft_ok(weft_provider_shutdown(p, 5000));
    weft_provider_free(p);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_autoconf_file_and_store_receive_spans_unknown_name_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_autoconf_default_list_is_used_when_unset, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_autoconf_otlp_reaches_the_receiver, setup, teardown),
        cmocka_unit_test_setup_teardown(test_autoconf_none_and_disabled_add_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_autoconf_registry_entries_are_complete_and_findable,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_autoconf_unknown_name_lists_every_valid_name, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_autoconf_processors_follow_the_list_with_registry_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_autoconf_langfuse_keys_imply_langfuse_once, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
