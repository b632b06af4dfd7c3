/* tests/exporters/test_file.c - the file exporter: one OTLP JSON
 * ExportTraceServiceRequest per line per batch, appended (never truncating what
 * is there), parent directories created 0700 and the file 0600, nothing written
 * for an empty batch, and the failure paths (bad path, a device that refuses
 * writes: WEFT_EIO logged once with the path; export after shutdown). Span
 * batches are built by hand. */
#include "support/failalloc.h"
#include "support/weft_test.h"
#include "tracing/exporter.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#define MS 1000000ull
#define T0 1700000000000000000ull

static const struct weft_attr resource_attrs[] = {
    {"service.name", {WEFT_VALUE_STRING, 8, {.str = "svc-file"}}},
};
static const struct weft_resource resource = {resource_attrs, 1, 0, NULL};
static const struct weft_scope scope = {"weft.test", "1.0", NULL, NULL, 0};

struct fixture {
    char dir[64];
    char path[160];
};

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/weft-file-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/a/b/traces.jsonl", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_test_rmtree(f->dir);
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    free(f);
    return 0;
}

static struct weft_span_data
make_span(uint8_t trace, uint8_t id, const char *name)
{
    struct weft_span_data s;

    memset(&s, 0, sizeof(s));
    memset(s.trace_id, trace, WEFT_TRACE_ID_SIZE);
    s.span_id[7] = id;
    s.name = name;
    s.kind = WEFT_SPAN_KIND_INTERNAL;
    s.start_time_ns = T0;
    s.end_time_ns = T0 + 5 * MS;
    s.resource = &resource;
    s.scope = &scope;
    return s;
}

static weft_err
export_batch(struct weft_exporter *ex, const struct weft_span_data *spans, size_t n)
{
    const struct weft_span_data *ptrs[8];
    struct weft_export_result result = {0};

    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = &spans[i];
    }
    return ex->ops->export_batch(ex->self, ptrs, n, 0, &result);
}

/* The file's lines, each parsed as JSON; *count receives how many. */
static json_t *
read_lines(const char *path, size_t *count)
{
    FILE *fp = fopen(path, "r");
    json_t *lines = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t len = 0;

    assert_non_null(fp);
    while ((len = getline(&line, &cap, fp)) > 0) {
        json_error_t error;
        json_t *doc = NULL;

        assert_int_equal(line[len - 1], '\n'); /* every line is terminated */
        doc = json_loadb(line, (size_t)len, 0, &error);
        if (doc == NULL) {
            fail_msg("line is not JSON (%s): %s", error.text, line);
        }
        json_array_append_new(lines, doc);
    }
    free(line);
    fclose(fp);
    *count = json_array_size(lines);
    return lines;
}

/* The spans array of the only resource and scope of one request line. */
static json_t *
spans_of(json_t *request)
{
    json_t *rs = json_object_get(request, "resourceSpans");
    json_t *ss = NULL;

    assert_int_equal(json_array_size(rs), 1);
    ss = json_object_get(json_array_get(rs, 0), "scopeSpans");
    assert_int_equal(json_array_size(ss), 1);
    return json_object_get(json_array_get(ss, 0), "spans");
}

static void
test_file_writes_one_otlp_json_line_per_batch(void **state)
{
    struct fixture *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data first[2] = {make_span(0xab, 1, "plan"), make_span(0xab, 2, "act")};
    struct weft_span_data second = make_span(0xcd, 3, "reflect");
    json_t *lines = NULL;
    json_t *spans = NULL;
    size_t n = 0;

    assert_weft_ok(weft_file_exporter_new(f->path, &ex));
    assert_string_equal(weft_exporter_name(ex), "file");
    assert_weft_ok(export_batch(ex, first, 2));
    assert_weft_ok(export_batch(ex, &second, 1));
    /* Flushed after every batch: readable before the exporter is closed. */
    lines = read_lines(f->path, &n);
    assert_int_equal(n, 2);
    spans = spans_of(json_array_get(lines, 0));
    assert_int_equal(json_array_size(spans), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(spans, 0), "name")),
                        "plan");
    assert_string_equal(json_string_value(json_object_get(json_array_get(spans, 0), "traceId")),
                        "abababababababababababababababab");
    assert_string_equal(json_string_value(json_object_get(json_array_get(spans, 1), "spanId")),
                        "0000000000000002");
    spans = spans_of(json_array_get(lines, 1));
    assert_int_equal(json_array_size(spans), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(spans, 0), "name")),
                        "reflect");
    json_decref(lines);
    weft_exporter_free(ex);
}

static void
test_file_creates_private_file_and_directories(void **state)
{
    struct fixture *f = *state;
    struct weft_exporter *ex = NULL;
    char dir[200];
    struct stat st;

    assert_weft_ok(weft_file_exporter_new(f->path, &ex));
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    snprintf(dir, sizeof(dir), "%s/a/b", f->dir);
    assert_int_equal(stat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    weft_exporter_free(ex);
}

static void
test_file_appends_to_existing_content(void **state)
{
    struct fixture *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data span = make_span(0x11, 1, "again");
    char path[200];
    char buf[16];
    FILE *fp = NULL;
    size_t n = 0;
    json_t *lines = NULL;

    snprintf(path, sizeof(path), "%s/existing.jsonl", f->dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("{\"earlier\":1}\n", fp);
    fclose(fp);
    assert_weft_ok(weft_file_exporter_new(path, &ex));
    assert_weft_ok(export_batch(ex, &span, 1));
    weft_exporter_free(ex);
    /* A second exporter on the same file appends too (a restarted agent). */
    assert_weft_ok(weft_file_exporter_new(path, &ex));
    assert_weft_ok(export_batch(ex, &span, 1));
    weft_exporter_free(ex);
    lines = read_lines(path, &n);
    assert_int_equal(n, 3);
    assert_non_null(json_object_get(json_array_get(lines, 0), "earlier"));
    assert_int_equal(json_array_size(spans_of(json_array_get(lines, 2))), 1);
    json_decref(lines);
    fp = fopen(path, "r");
    assert_non_null(fp);
    assert_non_null(fgets(buf, sizeof(buf), fp));
    assert_string_equal(buf, "{\"earlier\":1}\n");
    fclose(fp);
}

static void
test_file_empty_batch_writes_nothing(void **state)
{
    struct fixture *f = *state;
    struct weft_exporter *ex = NULL;
    struct stat st;

    assert_weft_ok(weft_file_exporter_new(f->path, &ex));
    assert_weft_ok(export_batch(ex, NULL, 0));
    assert_weft_ok(ex->ops->force_flush(ex->self, 0));
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_size, 0);
    weft_exporter_free(ex);
}

static void
test_file_bad_path_returns_eio_and_logs_it(void **state)
{
    struct fixture *f = *state;
    struct weft_exporter *ex = NULL;
    char blocker[160];
    char path[200];
    FILE *fp = NULL;

    snprintf(blocker, sizeof(blocker), "%s/plain-file", f->dir);
    fp = fopen(blocker, "w");
    assert_non_null(fp);
    fclose(fp);
    snprintf(path, sizeof(path), "%s/sub/traces.jsonl", blocker);
    weft_test_capture_logs();
    assert_weft_err(weft_file_exporter_new(path, &ex), WEFT_EIO);
    assert_null(ex);
    assert_non_null(strstr(weft_test_logs(), path));
    weft_test_clear_logs();
    assert_weft_err(weft_file_exporter_new(f->dir, &ex), WEFT_EIO); /* a directory */
    assert_non_null(strstr(weft_test_logs(), f->dir));
    assert_weft_err(weft_file_exporter_new("", &ex), WEFT_EINVAL);
    assert_weft_err(weft_file_exporter_new(NULL, &ex), WEFT_EINVAL);
    assert_weft_err(weft_file_exporter_new(path, NULL), WEFT_EINVAL);
}

static void
test_file_write_failure_returns_eio_logged_once(void **state)
{
    struct fixture *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data span = make_span(0x22, 1, "lost");
    const char *logs = NULL;
    struct rlimit old_limit;
    struct rlimit no_bytes;
    struct sigaction ignore;
    struct sigaction old_action;
    struct stat st;

    /* A file size limit of 0 bytes makes every write(2) to the file fail (EFBIG, with
     * SIGXFSZ ignored) on any machine, where /dev/full may be missing: the test never skips. */
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
    no_bytes = old_limit;
    no_bytes.rlim_cur = 0;
    memset(&ignore, 0, sizeof(ignore));
    ignore.sa_handler = SIG_IGN;
    assert_int_equal(sigaction(SIGXFSZ, &ignore, &old_action), 0);
    weft_test_capture_logs();
    assert_weft_ok(weft_file_exporter_new(f->path, &ex));
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &no_bytes), 0);
    assert_weft_err(export_batch(ex, &span, 1), WEFT_EIO);
    assert_weft_err(export_batch(ex, &span, 1), WEFT_EIO);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
    assert_int_equal(sigaction(SIGXFSZ, &old_action, NULL), 0);
    logs = weft_test_logs();
    assert_non_null(strstr(logs, f->path));
    assert_null(strstr(strstr(logs, f->path) + 1, f->path)); /* once */
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_size, 0);
    weft_exporter_free(ex);
}

static void
test_file_export_after_shutdown_is_refused(void **state)
{
    struct fixture *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data span = make_span(0x33, 1, "late");
    struct stat st;

    assert_weft_ok(weft_file_exporter_new(f->path, &ex));
    assert_weft_ok(ex->ops->shutdown(ex->self, 0));
    assert_weft_err(export_batch(ex, &span, 1), WEFT_ESTATE);
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(st.st_size, 0);
    weft_exporter_free(ex);
}

/* A batch that fails for want of memory writes nothing: every line in the file stays whole. */
static void
test_file_fails_cleanly_out_of_memory(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data spans[2] = {make_span(0x44, 1, "one"), make_span(0x44, 2, "two")};
    bool is_done = false;
    size_t n = 0;
    json_t *lines = NULL;

    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < 1000 && !is_done; budget++) {
        struct weft_exporter *ex = NULL;
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft_file_exporter_new(f->path, &ex);
        if (err == WEFT_OK) {
            err = export_batch(ex, spans, 2);
            is_done = err == WEFT_OK;
        }
        failalloc_budget = -1;
        assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        weft_exporter_free(ex);
    }
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    lines = read_lines(f->path, &n);
    assert_int_equal(n, 1);
    json_decref(lines);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_file_writes_one_otlp_json_line_per_batch),
        T(test_file_creates_private_file_and_directories),
        T(test_file_appends_to_existing_content),
        T(test_file_empty_batch_writes_nothing),
        T(test_file_bad_path_returns_eio_and_logs_it),
        T(test_file_write_failure_returns_eio_logged_once),
        T(test_file_export_after_shutdown_is_refused),
        T(test_file_fails_cleanly_out_of_memory),
#undef T
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
