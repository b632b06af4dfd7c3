/* tests/exporters/test_console.c - the console exporter: spans are held until their trace's
 * root ends and then printed as one tree; kind, errors, durations and key attributes appear
 * on the span's line; the hold is bounded (the oldest trace is printed incomplete, not
 * dropped); orphans and late spans come out, marked, on flush and shutdown. Output goes to an
 * open_memstream stream; span batches are built by hand. */
#include "support/failalloc.h"
#include "support/weft_test.h"
#include "tracing/exporter.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MS 1000000ull
#define T0 1700000000000000000ull

static const struct weft_attr resource_attrs[] = {
    {"service.name", {WEFT_VALUE_STRING, 11, {.str = "svc-console"}}},
};
static const struct weft_resource resource = {resource_attrs, 1, 0, NULL};
static const struct weft_scope scope = {"weft.test", NULL, NULL, NULL, 0};

struct fixture {
    char *text;
    size_t len;
    FILE *stream;
    struct weft_exporter *ex;
};

static int
setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    f->stream = open_memstream(&f->text, &f->len);
    assert_non_null(f->stream);
    assert_weft_ok(weft_console_exporter_new(f->stream, &f->ex));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    struct fixture *f = *state;

    weft_exporter_free(f->ex);
    fclose(f->stream);
    free(f->text);
    weft_set_allocator(NULL, NULL, NULL);
    free(f);
    return 0;
}

/* What the exporter has printed so far. */
static const char *
output(struct fixture *f)
{
    fflush(f->stream);
    return f->text != NULL ? f->text : "";
}

static size_t
count_of(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

/* Span @p id (parent @p parent, 0 for none) of the trace whose id bytes are all @p trace. */
static struct weft_span_data
make_span(
    uint8_t trace, uint8_t id, uint8_t parent, const char *name, uint64_t start_ms, uint64_t dur_ns)
{
    struct weft_span_data s;

    memset(&s, 0, sizeof(s));
    memset(s.trace_id, trace, WEFT_TRACE_ID_SIZE);
    s.span_id[7] = id;
    s.span_id[0] = 0x10; /* never all zero, also for id 0 */
    if (parent != 0) {
        s.parent_span_id[7] = parent;
        s.parent_span_id[0] = 0x10;
        s.has_parent = true;
    }
    s.name = name;
    s.kind = WEFT_SPAN_KIND_INTERNAL;
    s.start_time_ns = T0 + start_ms * MS;
    s.end_time_ns = s.start_time_ns + dur_ns;
    s.resource = &resource;
    s.scope = &scope;
    return s;
}

static weft_err
export_one(struct fixture *f, const struct weft_span_data *span)
{
    struct weft_export_result result = {0};

    return f->ex->ops->export_batch(f->ex->self, &span, 1, 0, &result);
}

static void
test_console_holds_spans_until_the_root_ends(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data child = make_span(0xaa, 2, 1, "plan supervisor", 10, 50 * MS);
    struct weft_span_data grandchild = make_span(0xaa, 3, 2, "chat gpt-4o", 20, 30 * MS);
    struct weft_span_data root = make_span(0xaa, 1, 0, "invoke_workflow demo", 0, 200 * MS);
    const char *text = NULL;
    const char *root_line = NULL;
    const char *child_line = NULL;
    const char *grandchild_line = NULL;

    assert_string_equal(weft_exporter_name(f->ex), "console");
    assert_weft_ok(export_one(f, &grandchild));
    assert_weft_ok(export_one(f, &child));
    assert_string_equal(output(f), ""); /* nothing until the root ends */
    assert_weft_ok(export_one(f, &root));
    text = output(f);
    assert_non_null(strstr(text, "trace aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    assert_non_null(strstr(text, "service=svc-console"));
    assert_non_null(strstr(text, "spans=3"));
    root_line = strstr(text, "\ninvoke_workflow demo ");
    child_line = strstr(text, "\n\xe2\x94\x94\xe2\x94\x80 plan supervisor ");
    grandchild_line = strstr(text, "\n   \xe2\x94\x94\xe2\x94\x80 chat gpt-4o ");
    assert_non_null(root_line);
    assert_non_null(child_line);
    assert_non_null(grandchild_line);
    assert_true(root_line < child_line && child_line < grandchild_line);
    assert_null(strstr(text, "incomplete"));
}

static void
test_console_root_first_in_one_batch_still_prints_whole_tree(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data spans[2] = {make_span(0xab, 1, 0, "root", 0, 10 * MS),
                                      make_span(0xab, 2, 1, "child", 1, 5 * MS)};
    const struct weft_span_data *batch[2] = {&spans[0], &spans[1]};
    struct weft_export_result result = {0};

    assert_weft_ok(f->ex->ops->export_batch(f->ex->self, batch, 2, 0, &result));
    assert_non_null(strstr(output(f), " child "));
    assert_int_equal(count_of(output(f), "trace abab"), 1);
}

static void
test_console_line_shows_kind_error_and_key_attributes(void **state)
{
    struct fixture *f = *state;
    struct weft_attr attrs[] = {
        {"gen_ai.operation.name", {WEFT_VALUE_STRING, 4, {.str = "chat"}}},
        {"gen_ai.request.model", {WEFT_VALUE_STRING, 6, {.str = "gpt-4o"}}},
        {"gen_ai.input.messages", {WEFT_VALUE_STRING, 11, {.str = "secret-text"}}},
        {"error.type", {WEFT_VALUE_STRING, 7, {.str = "timeout"}}},
        {"http.url", {WEFT_VALUE_STRING, 5, {.str = "x.org"}}},
        {"weft.step.attempt", {WEFT_VALUE_INT, 0, {.i = 2}}},
    };
    struct weft_span_data span = make_span(0xac, 1, 0, "chat gpt-4o", 0, 1500 * MS);
    const char *text = NULL;

    span.kind = WEFT_SPAN_KIND_CLIENT;
    span.status_code = WEFT_STATUS_ERROR;
    span.status_message = "deadline exceeded";
    span.attrs = attrs;
    span.attr_count = sizeof(attrs) / sizeof(attrs[0]);
    assert_weft_ok(export_one(f, &span));
    text = output(f);
    assert_non_null(strstr(text, "chat gpt-4o (client)"));
    assert_non_null(strstr(text, "1.50s  ERROR: deadline exceeded"));
    /* The model is in the span name; the tree does not repeat it. */
    assert_null(strstr(text, "gen_ai.request.model"));
    assert_non_null(strstr(text, "error.type=timeout"));
    assert_non_null(strstr(text, "weft.step.attempt=2"));
    assert_non_null(strstr(text, "errors=1"));
    /* Message content, the repeated operation name and unrelated keys stay off the line. */
    assert_null(strstr(text, "secret-text"));
    assert_null(strstr(text, "gen_ai.operation.name"));
    assert_null(strstr(text, "http.url"));
    assert_null(strstr(text, "\x1b[")); /* a memory stream is not a terminal */
}

static void
test_console_internal_kind_is_not_shown(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data span = make_span(0xad, 1, 0, "invoke_agent writer", 0, 5 * MS);

    assert_weft_ok(export_one(f, &span));
    assert_null(strstr(output(f), "(internal)"));
    assert_non_null(strstr(output(f), "invoke_agent writer"));
}

static void
test_console_durations_use_readable_units(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data spans[6] = {
        make_span(0xae, 1, 0, "root", 0, 125 * 1000000000ull), /* 2m05s */
        make_span(0xae, 2, 1, "ns", 1, 500),
        make_span(0xae, 3, 1, "us", 2, 1500),
        make_span(0xae, 4, 1, "ms", 3, 12300000),
        make_span(0xae, 5, 1, "s", 4, 2500000000ull),
        make_span(0xae, 6, 1, "h", 5, 3725ull * 1000000000ull),
    };
    const struct weft_span_data *batch[6];
    struct weft_export_result result = {0};
    const char *text = NULL;

    for (size_t i = 0; i < 6; i++) {
        batch[i] = &spans[5 - i]; /* children first, as they end */
    }
    assert_weft_ok(f->ex->ops->export_batch(f->ex->self, batch, 6, 0, &result));
    text = output(f);
    assert_non_null(strstr(text, " 500ns\n"));
    assert_non_null(strstr(text, " 1.5\xc2\xb5s\n"));
    assert_non_null(strstr(text, " 12.3ms\n"));
    assert_non_null(strstr(text, " 2.50s\n"));
    assert_non_null(strstr(text, " 2m05s\n"));
    assert_non_null(strstr(text, " 1h02m\n"));
}

static void
test_console_remote_parent_counts_as_root(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data span = make_span(0xaf, 1, 9, "worker step", 0, 5 * MS);

    span.parent_is_remote = true;
    assert_weft_ok(export_one(f, &span));
    assert_non_null(strstr(output(f), "\nworker step "));
    assert_null(strstr(output(f), "parent span missing"));
}

static void
test_console_flush_prints_orphans_marked_incomplete(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data orphan = make_span(0xb0, 2, 1, "orphan step", 0, 5 * MS);
    const char *text = NULL;

    assert_weft_ok(export_one(f, &orphan));
    assert_string_equal(output(f), "");
    assert_weft_ok(f->ex->ops->force_flush(f->ex->self, 0));
    text = output(f);
    assert_non_null(strstr(text, "incomplete: its root span has not ended"));
    assert_non_null(strstr(text, "\norphan step "));
    assert_non_null(strstr(text, "(parent span missing)"));
    /* Flushed spans are gone: a second flush prints nothing more. */
    assert_weft_ok(f->ex->ops->force_flush(f->ex->self, 0));
    assert_int_equal(count_of(output(f), "orphan step"), 1);
}

static void
test_console_late_span_is_printed_on_flush_and_marked(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data root = make_span(0xb1, 1, 0, "root", 0, 10 * MS);
    struct weft_span_data late = make_span(0xb1, 2, 1, "async child", 5, 50 * MS);

    assert_weft_ok(export_one(f, &root));
    assert_weft_ok(export_one(f, &late));
    assert_null(strstr(output(f), "async child"));
    assert_weft_ok(f->ex->ops->force_flush(f->ex->self, 0));
    assert_non_null(strstr(output(f), "1 span that ended after the trace was printed"));
    assert_non_null(strstr(output(f), "async child"));
}

static void
test_console_bound_prints_oldest_trace_incomplete_not_dropped(void **state)
{
    struct fixture *f = *state;
    static struct weft_span_data spans[600];
    const struct weft_span_data *batch[600];
    struct weft_export_result result = {0};
    const char *text = NULL;

    /* 9000 spans of trace 0xc1 (no root yet), then 1200 of trace 0xc2: the hold passes 10000
     * spans and the oldest trace (0xc1, all 9000 spans) must come out at once. */
    for (size_t round = 0; round < 17; round++) {
        uint8_t trace = round < 15 ? 0xc1 : 0xc2;

        for (size_t i = 0; i < 600; i++) {
            spans[i] = make_span(trace, (uint8_t)(i % 200 + 2), 1, "step", round, 1000);
            spans[i].span_id[1] = (uint8_t)round;
            spans[i].span_id[2] = (uint8_t)(i / 200);
            batch[i] = &spans[i];
        }
        assert_weft_ok(f->ex->ops->export_batch(f->ex->self, batch, 600, 0, &result));
        if (round < 16) {
            assert_string_equal(output(f), ""); /* 9600 held: under the bound */
        }
    }
    text = output(f);
    assert_non_null(strstr(text, "trace c1c1"));
    assert_non_null(strstr(text, "spans=9000"));
    assert_non_null(strstr(text, "incomplete: too many spans held"));
    assert_null(strstr(text, "trace c2c2"));
    /* Every span is accounted for: the first ones printed, the rest counted on one line (a
     * trace this large is summarised, see weft_trace_render()). */
    {
        size_t shown = count_of(text, "\nstep ");
        char summary[96];

        assert_true(shown >= 10 && shown <= 300);
        snprintf(summary, sizeof(summary), "\xe2\x80\xa6 %zu more `step` spans (%zu ok, 0 error)",
                 9000 - shown, 9000 - shown);
        assert_non_null(strstr(text, summary));
    }
    /* The younger trace is still held and comes out on shutdown. */
    assert_weft_ok(f->ex->ops->shutdown(f->ex->self, 0));
    assert_non_null(strstr(output(f), "trace c2c2"));
    assert_non_null(strstr(output(f), "spans=1200"));
}

static void
test_console_shutdown_prints_everything_then_refuses(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data a = make_span(0xd1, 2, 1, "first held", 0, 1000);
    struct weft_span_data b = make_span(0xd2, 2, 1, "second held", 1, 1000);

    assert_weft_ok(export_one(f, &a));
    assert_weft_ok(export_one(f, &b));
    assert_weft_ok(f->ex->ops->shutdown(f->ex->self, 0));
    assert_non_null(strstr(output(f), "first held"));
    assert_non_null(strstr(output(f), "second held"));
    assert_true(strstr(output(f), "first held") < strstr(output(f), "second held"));
    assert_non_null(strstr(output(f), "its root span never ended"));
    assert_weft_err(export_one(f, &a), WEFT_ESTATE);
}

static void
test_console_events_are_listed_under_their_span(void **state)
{
    struct fixture *f = *state;
    struct weft_attr ev_attrs[] = {
        {"exception.type", {WEFT_VALUE_STRING, 12, {.str = "TimeoutError"}}},
        {"exception.stacktrace", {WEFT_VALUE_STRING, 9, {.str = "frame one"}}},
    };
    struct weft_event_data events[17];
    struct weft_span_data span = make_span(0xd3, 1, 0, "execute_tool search", 0, 100 * MS);
    const char *text = NULL;

    /* 12 exceptions (notable: at most ten per span) among 5 ordinary events (at most three). */
    for (size_t i = 0; i < 17; i++) {
        events[i] = (struct weft_event_data){T0 + (10 + i) * MS, i < 12 ? "exception" : "note",
                                             ev_attrs, 2, 0};
    }
    span.events = events;
    span.event_count = 17;
    assert_weft_ok(export_one(f, &span));
    text = output(f);
    assert_non_null(strstr(text, "\xe2\x80\xa2 exception +10.0ms  exception.type=TimeoutError"));
    assert_int_equal(count_of(text, "exception +"), 10);
    assert_int_equal(count_of(text, "note +"), 3);
    assert_non_null(strstr(text, "4 more events"));
    assert_null(strstr(text, "frame one"));
}

static void
test_console_links_are_listed_under_their_span(void **state)
{
    struct fixture *f = *state;
    struct weft_attr link_attrs[] = {
        {"weft.link.reason", {WEFT_VALUE_STRING, 7, {.str = "resumed"}}},
    };
    struct weft_link_data link;
    struct weft_span_data span = make_span(0xd5, 1, 0, "invoke_workflow again", 0, 100 * MS);
    const char *text = NULL;

    memset(&link, 0, sizeof(link));
    memset(link.trace_id, 0xab, WEFT_TRACE_ID_SIZE);
    link.span_id[7] = 0x42;
    link.attrs = link_attrs;
    link.attr_count = 1;
    span.links = &link;
    span.link_count = 1;
    assert_weft_ok(export_one(f, &span));
    text = output(f);
    assert_non_null(strstr(text, "\xe2\x86\xaa link trace abababababababababababababababab span "
                                 "0000000000000042  weft.link.reason=resumed\n"));
}

static void
test_console_replaces_control_characters(void **state)
{
    struct fixture *f = *state;
    struct weft_span_data span = make_span(0xd4, 1, 0, "bad\x1b]0;title\x07name", 0, 1000);

    assert_weft_ok(export_one(f, &span));
    assert_null(strchr(output(f), '\x1b'));
    assert_null(strchr(output(f), '\x07'));
    assert_non_null(strstr(output(f), "bad?]0;title?name"));
}

static void
test_console_write_failure_returns_eio(void **state)
{
    struct fixture *f = *state;
    struct weft_exporter *ex = NULL;
    struct weft_span_data span = make_span(0xd5, 1, 0, "root", 0, 1000);
    const struct weft_span_data *batch[1] = {&span};
    struct weft_export_result result = {0};
    struct sigaction ignore;
    struct sigaction old_action;
    int fds[2] = {-1, -1};
    FILE *broken = NULL;

    (void)f;
    /* A pipe whose read end is closed fails every write with EPIPE (SIGPIPE ignored): the
     * write-error path on any machine, where /dev/full may be missing. */
    memset(&ignore, 0, sizeof(ignore));
    ignore.sa_handler = SIG_IGN;
    assert_int_equal(sigaction(SIGPIPE, &ignore, &old_action), 0);
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(close(fds[0]), 0);
    broken = fdopen(fds[1], "w");
    assert_non_null(broken);
    weft_test_capture_logs();
    assert_weft_ok(weft_console_exporter_new(broken, &ex));
    assert_weft_err(ex->ops->export_batch(ex->self, batch, 1, 0, &result), WEFT_EIO);
    assert_weft_err(ex->ops->export_batch(ex->self, batch, 1, 0, &result), WEFT_EIO);
    assert_int_equal(count_of(weft_test_logs(), "console exporter"), 1); /* logged once */
    weft_exporter_free(ex);
    (void)fclose(broken); /* its buffered bytes cannot be written either */
    assert_int_equal(sigaction(SIGPIPE, &old_action, NULL), 0);
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
}

static void
test_console_export_fails_cleanly_out_of_memory(void **state)
{
    struct fixture *f = *state;
    struct weft_attr attrs[] = {
        {"weft.step.id", {WEFT_VALUE_STRING, 2, {.str = "s1"}}},
        {"weft.ids", {WEFT_VALUE_INT_ARRAY, 2, {.ints = (const int64_t[]){1, 2}}}},
    };
    struct weft_event_data event = {T0, "exception", attrs, 1, 0};
    struct weft_span_data child = make_span(0xe1, 2, 1, "child", 1, 1000);
    struct weft_span_data root = make_span(0xe1, 1, 0, "root", 0, 5000);
    const struct weft_span_data *batch[2] = {&child, &root};
    struct weft_export_result result = {0};
    bool is_done = false;

    child.attrs = attrs;
    child.attr_count = 2;
    child.events = &event;
    child.event_count = 1;
    weft_exporter_free(f->ex);
    f->ex = NULL;
    assert_weft_ok(weft_set_allocator(failalloc_malloc, failalloc_realloc, free));
    for (long budget = 0; budget < 200 && !is_done; budget++) {
        struct weft_exporter *ex = NULL;
        weft_err err = WEFT_OK;

        failalloc_budget = budget;
        err = weft_console_exporter_new(f->stream, &ex);
        if (err == WEFT_OK) {
            err = ex->ops->export_batch(ex->self, batch, 2, 0, &result);
            is_done = err == WEFT_OK;
        }
        assert_true(err == WEFT_OK || err == WEFT_ENOMEM);
        weft_exporter_free(ex); /* prints and frees whatever was held */
    }
    failalloc_budget = -1;
    weft_set_allocator(NULL, NULL, NULL);
    assert_true(is_done);
    assert_non_null(strstr(output(f), "\xe2\x94\x94\xe2\x94\x80 child"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(test_console_holds_spans_until_the_root_ends),
        T(test_console_root_first_in_one_batch_still_prints_whole_tree),
        T(test_console_line_shows_kind_error_and_key_attributes),
        T(test_console_internal_kind_is_not_shown),
        T(test_console_durations_use_readable_units),
        T(test_console_remote_parent_counts_as_root),
        T(test_console_flush_prints_orphans_marked_incomplete),
        T(test_console_late_span_is_printed_on_flush_and_marked),
        T(test_console_bound_prints_oldest_trace_incomplete_not_dropped),
        T(test_console_shutdown_prints_everything_then_refuses),
        T(test_console_events_are_listed_under_their_span),
        T(test_console_links_are_listed_under_their_span),
        T(test_console_replaces_control_characters),
        T(test_console_write_failure_returns_eio),
        T(test_console_export_fails_cleanly_out_of_memory),
#undef T
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
