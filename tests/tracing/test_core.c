/* tests/tracing/test_core.c - the tracing core through its public API: W3C trace context,
 * samplers, span limits and dropped counts, redaction, attribute types, parent/child context,
 * environment parsing and the disabled SDK. Spans are observed through a simple processor and
 * the in-memory exporter. */
#include "base/http.h"
#include "base/mem.h"
#include "base/str.h"
#include "support/mem_exporter.h"
#include "support/weft_test.h"
#include "tracing/sdk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const env_names[] = {
    "OTEL_SDK_DISABLED",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_SPAN_EVENT_COUNT_LIMIT",
    "OTEL_SPAN_LINK_COUNT_LIMIT",
    "OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_EXPORT_TIMEOUT",
};

struct fx {
    struct weft_provider *provider;
    struct weft_tracer *tracer;
    struct mem_exporter *mem;
};

static void
clear_env(void)
{
    for (size_t i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++) {
        weft_test_setenv(env_names[i], NULL);
    }
}

static int
reset(void **state)
{
    (void)state;
    clear_env();
    weft_log_set_handler(NULL, WEFT_LOG_ERROR, NULL);
    return 0;
}

static void
open_fx(struct fx *f, const struct weft_provider_options *opts)
{
    struct weft_exporter *e = NULL;
    struct weft_processor *p = NULL;

    memset(f, 0, sizeof(*f));
    assert_weft_ok(weft_provider_new(opts, &f->provider));
    assert_weft_ok(weft_provider_get_tracer(f->provider, "core", "1", &f->tracer));
    assert_weft_ok(mem_exporter_new(&e, &f->mem));
    assert_weft_ok(weft_simple_processor_new(e, &p));
    assert_weft_ok(weft_provider_add_processor_take(f->provider, p));
}

/* ---- W3C trace context ----------------------------------------------------------------- */

static void
test_traceparent_valid_forms_parse(void **state)
{
    struct weft_span_context ctx;
    char out[WEFT_TRACEPARENT_LEN + 1];
    const char *tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    (void)state;
    assert_weft_ok(weft_traceparent_parse(tp, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7", &ctx));
    assert_true(ctx.is_remote);
    assert_int_equal(ctx.trace_flags, 1);
    assert_int_equal(ctx.trace_id[0], 0x4b);
    assert_int_equal(ctx.span_id[7], 0xb7);
    assert_string_equal(ctx.trace_state, "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
    assert_weft_ok(weft_traceparent_format(&ctx, out, sizeof(out)));
    assert_string_equal(out, tp);
    /* Surrounding whitespace is ignored; a future version may carry more fields. */
    assert_weft_ok(weft_traceparent_parse(
        " \t00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ", NULL, &ctx));
    assert_int_equal(ctx.trace_flags, 0);
    assert_null(ctx.trace_state);
    assert_weft_ok(weft_traceparent_parse(
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", NULL,
        &ctx));
}

static void
test_traceparent_every_invalid_form_is_rejected(void **state)
{
    static const char *const bad[] = {
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",   /* short */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011", /* 00 with extra */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  /* upper-case hex */
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",  /* not hex */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  /* version ff */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  /* zero trace id */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  /* zero span id */
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",  /* separators */
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", /* future, no dash */
        "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-011",
    };
    struct weft_span_context ctx;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (weft_traceparent_parse(bad[i], NULL, &ctx) != WEFT_EPARSE) {
            fail_msg("accepted invalid traceparent '%s'", bad[i]);
        }
    }
    assert_weft_err(weft_traceparent_parse(NULL, NULL, &ctx), WEFT_EINVAL);
}

static void
test_tracestate_invalid_is_dropped_but_traceparent_kept(void **state)
{
    const char *tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    struct weft_span_context ctx;
    char many[33 * 6 + 1] = "";

    (void)state;
    for (int i = 0; i < 33; i++) {
        char m[8];
        snprintf(m, sizeof(m), "%sk%d=v", i == 0 ? "" : ",", i);
        strcat(many, m);
    }
    assert_weft_err(weft_tracestate_validate(many), WEFT_EPARSE);
    assert_weft_err(weft_tracestate_validate("Key=1"), WEFT_EPARSE);
    assert_weft_err(weft_tracestate_validate("k=a,b"), WEFT_EPARSE);
    assert_weft_err(weft_tracestate_validate("k=a=b"), WEFT_EPARSE);
    assert_weft_ok(weft_tracestate_validate("tenant@sys=1,simple=2"));
    assert_weft_err(weft_tracestate_validate("@sys=1"), WEFT_EPARSE);
    assert_weft_ok(weft_traceparent_parse(tp, many, &ctx));
    assert_null(ctx.trace_state);
}

/* ---- samplers ---------------------------------------------------------------------------- */

static void
test_sampler_traceidratio_lands_within_statistical_bounds(void **state)
{
    struct weft_provider_options o = {.sampler = WEFT_SAMPLER_TRACEIDRATIO, .sampler_ratio = 0.25};
    struct fx f;
    struct weft_trace_stats st;
    const int n = 20000;

    (void)state;
    open_fx(&f, &o);
    for (int i = 0; i < n; i++) {
        weft_span_end(weft_span_start(f.tracer, "s", NULL), 0);
    }
    weft_provider_get_stats(f.provider, &st);
    /* Binomial(20000, 0.25): sd ~61; 5 sd is ~306. */
    assert_true(fabs((double)st.spans_started - n * 0.25) < 310);
    assert_int_equal(st.spans_started + st.spans_sampled_out, (uint64_t)n);
    assert_int_equal(mem_exporter_count(f.mem), st.spans_started);
    weft_provider_free(f.provider);
}

static void
test_sampler_parent_based_follows_remote_parent_flag(void **state)
{
    struct fx f;
    struct weft_span_context parent;
    struct weft_span_start_options so = {.parent_context = &parent};
    struct weft_span *s = NULL;
    struct weft_span *child = NULL;
    struct weft_span_start_options co = {0};

    (void)state;
    open_fx(&f, NULL); /* parentbased_always_on */
    assert_weft_ok(weft_traceparent_parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
                                          NULL, &parent));
    s = weft_span_start(f.tracer, "unsampled-child", &so);
    assert_false(weft_span_is_recording(s));
    co.parent = s;
    child = weft_span_start(f.tracer, "grandchild", &co);
    assert_false(weft_span_is_recording(child)); /* inherits the unsampled decision */
    weft_span_end(child, 0);
    weft_span_end(s, 0);
    parent.trace_flags = WEFT_TRACE_FLAG_SAMPLED;
    s = weft_span_start(f.tracer, "sampled-child", &so);
    assert_true(weft_span_is_recording(s));
    weft_span_end(s, 0);
    assert_int_equal(mem_exporter_count(f.mem), 1);
    assert_true(mem_exporter_span(f.mem, 0)->parent_is_remote);
    assert_memory_equal(mem_exporter_span(f.mem, 0)->trace_id, parent.trace_id, 16);
    weft_provider_free(f.provider);
}

static void
test_sampler_env_and_bad_values(void **state)
{
    struct weft_provider *p = NULL;
    double ratio = 0;

    (void)state;
    weft_test_capture_logs();
    weft_test_setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio");
    weft_test_setenv("OTEL_TRACES_SAMPLER_ARG", "0.5");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_int_equal(weft_provider_sampler(p, &ratio), WEFT_SAMPLER_PARENTBASED_TRACEIDRATIO);
    assert_true(ratio == 0.5);
    weft_provider_free(p);
    weft_test_setenv("OTEL_TRACES_SAMPLER", "sometimes");
    weft_test_setenv("OTEL_TRACES_SAMPLER_ARG", "1.5");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_int_equal(weft_provider_sampler(p, NULL), WEFT_SAMPLER_PARENTBASED_ALWAYS_ON);
    assert_non_null(strstr(weft_test_logs(), "OTEL_TRACES_SAMPLER=sometimes"));
    weft_provider_free(p);
    weft_test_setenv("OTEL_TRACES_SAMPLER", "traceidratio");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_true(weft_provider_sampler(p, &ratio) == WEFT_SAMPLER_TRACEIDRATIO && ratio == 1.0);
    assert_non_null(strstr(weft_test_logs(), "OTEL_TRACES_SAMPLER_ARG=1.5"));
    weft_provider_free(p);
}

/* ---- limits, attribute types, dropped counts --------------------------------------------- */

static void
test_limits_drop_and_count_attributes_events_links(void **state)
{
    struct weft_span_limits lim = {.attr_count = 3,
                                   .attr_value_length = 4,
                                   .event_count = 1,
                                   .link_count = 1,
                                   .attrs_per_event = 1,
                                   .attrs_per_link = 1};
    struct weft_provider_options o = {.limits = &lim};
    struct fx f;
    struct weft_span *s = NULL;
    struct weft_span_context link_ctx;
    struct weft_attr ev_attrs[] = {weft_attr_int("a", 1), weft_attr_int("b", 2)};
    const struct mem_span *m = NULL;
    static const char *const strs[] = {"abcdef", "xy"};

    (void)state;
    open_fx(&f, &o);
    assert_weft_ok(weft_traceparent_parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                                          NULL, &link_ctx));
    s = weft_span_start(f.tracer, "limited", NULL);
    assert_weft_ok(weft_span_set_str(s, "s", "h\xc3\xa9llo world")); /* é is one character */
    assert_weft_ok(weft_span_set_str_array(s, "arr", strs, 2));
    assert_weft_ok(weft_span_set_int(s, "i", 1));
    assert_weft_ok(weft_span_set_int(s, "i", 2)); /* replacing does not count */
    assert_weft_err(weft_span_set_bool(s, "over", true), WEFT_ELIMIT);
    assert_weft_err(weft_span_set_double(s, "over2", 1.5), WEFT_ELIMIT);
    assert_weft_ok(weft_span_add_event(s, "e1", ev_attrs, 2, 0));
    assert_weft_err(weft_span_add_event(s, "e2", NULL, 0, 0), WEFT_ELIMIT);
    assert_weft_ok(weft_span_add_link(s, &link_ctx, ev_attrs, 2));
    assert_weft_err(weft_span_add_link(s, &link_ctx, NULL, 0), WEFT_ELIMIT);
    weft_span_end(s, 0);
    m = mem_exporter_span(f.mem, 0);
    assert_int_equal(m->attr_count, 3);
    assert_int_equal(m->dropped_attrs, 2);
    assert_string_equal(mem_span_attr(m, "s")->u.str, "h\xc3\xa9ll");
    assert_string_equal(mem_span_attr(m, "arr")->u.strs[0], "abcd");
    assert_string_equal(mem_span_attr(m, "arr")->u.strs[1], "xy");
    assert_int_equal(mem_span_attr(m, "i")->u.i, 2);
    assert_int_equal(m->event_count, 1);
    assert_int_equal(m->dropped_events, 1);
    assert_int_equal(m->event_attr_count[0], 1);
    assert_int_equal(m->event_dropped_attrs[0], 1);
    assert_int_equal(m->link_count, 1);
    assert_int_equal(m->dropped_links, 1);
    assert_int_equal(m->link_attr_count, 1);
    weft_provider_free(f.provider);
}

static void
test_span_records_every_attribute_type_status_and_times(void **state)
{
    struct fx f;
    struct weft_span *s = NULL;
    const struct mem_span *m = NULL;
    static const bool bools[] = {true, false};
    static const int64_t ints[] = {-1, INT64_MAX};
    static const double dbls[] = {0.5, -2.25};
    struct weft_span_start_options so = {.kind = WEFT_SPAN_KIND_CLIENT, .start_time_ns = 1000};

    (void)state;
    open_fx(&f, NULL);
    s = weft_span_start(f.tracer, "typed", &so);
    assert_weft_ok(weft_span_set_strn(s, "strn", "abcdef", 3));
    assert_weft_ok(weft_span_set_bool(s, "b", true));
    assert_weft_ok(weft_span_set_double(s, "d", 2.5));
    assert_weft_ok(weft_span_set_bool_array(s, "ba", bools, 2));
    assert_weft_ok(weft_span_set_int_array(s, "ia", ints, 2));
    assert_weft_ok(weft_span_set_double_array(s, "da", dbls, 2));
    assert_weft_ok(weft_span_update_name(s, "renamed"));
    assert_weft_ok(weft_span_record_exception(s, "IOError", "disk gone", "at main()"));
    assert_weft_ok(weft_span_set_status(s, WEFT_STATUS_UNSET, NULL)); /* ignored */
    weft_span_end(s, 5000);
    weft_span_end(s, 9000); /* second end is a no-op */
    assert_int_equal(mem_exporter_count(f.mem), 1);
    m = mem_exporter_span(f.mem, 0);
    assert_string_equal(m->name, "renamed");
    assert_int_equal(m->kind, WEFT_SPAN_KIND_CLIENT);
    assert_int_equal(m->start_ns, 1000);
    assert_int_equal(m->end_ns, 5000);
    assert_string_equal(mem_span_attr(m, "strn")->u.str, "abc");
    assert_true(mem_span_attr(m, "b")->u.b);
    assert_true(mem_span_attr(m, "d")->u.d == 2.5);
    assert_false(mem_span_attr(m, "ba")->u.bools[1]);
    assert_int_equal(mem_span_attr(m, "ia")->u.ints[1], INT64_MAX);
    assert_true(mem_span_attr(m, "da")->u.doubles[1] == -2.25);
    assert_int_equal(m->status, WEFT_STATUS_ERROR);
    assert_string_equal(m->status_message, "disk gone");
    assert_string_equal(m->event_names[0], "exception");
    assert_int_equal(m->event_attr_count[0], 3);
    weft_provider_free(f.provider);
}

static void
test_status_ok_is_final(void **state)
{
    struct fx f;
    struct weft_span *s = NULL;

    (void)state;
    open_fx(&f, NULL);
    s = weft_span_start(f.tracer, "ok", NULL);
    assert_weft_ok(weft_span_set_status(s, WEFT_STATUS_OK, "ignored message"));
    assert_weft_ok(weft_span_set_status(s, WEFT_STATUS_ERROR, "too late"));
    weft_span_end(s, 0);
    assert_int_equal(mem_exporter_span(f.mem, 0)->status, WEFT_STATUS_OK);
    assert_string_equal(mem_exporter_span(f.mem, 0)->status_message, "");
    weft_provider_free(f.provider);
}

/* ---- context --------------------------------------------------------------------------- */

static void
test_context_parents_children_and_overflow(void **state)
{
    struct fx f;
    struct weft_span *root = NULL;
    struct weft_span *spans[70];
    size_t tokens[70];
    struct weft_trace_stats st;
    struct weft_span_start_options root_opt = {.is_root = true};
    const struct mem_span *child = NULL;
    const struct mem_span *parent = NULL;

    (void)state;
    open_fx(&f, NULL);
    root = weft_span_start(f.tracer, "root", NULL);
    size_t t0 = weft_context_attach(root);
    assert_ptr_equal(weft_context_current(), root);
    weft_span_end(weft_span_start(f.tracer, "child", NULL), 0);
    weft_span_end(weft_span_start(f.tracer, "new-root", &root_opt), 0);
    /* Attach 70 deep: beyond 64 the attach is counted and ignored, detach still unwinds. */
    for (int i = 0; i < 70; i++) {
        spans[i] = weft_span_start(f.tracer, "deep", NULL);
        tokens[i] = weft_context_attach(spans[i]);
    }
    for (int i = 69; i >= 0; i--) {
        weft_context_detach(tokens[i]);
        weft_span_end(spans[i], 0);
    }
    assert_ptr_equal(weft_context_current(), root);
    weft_context_detach(t0);
    assert_null(weft_context_current());
    weft_span_end(root, 0);
    weft_provider_get_stats(f.provider, &st);
    assert_int_equal(st.context_overflows, 70 + 1 - 64);
    child = mem_exporter_find(f.mem, "child");
    parent = mem_exporter_find(f.mem, "root");
    assert_true(child->has_parent);
    assert_memory_equal(child->parent_span_id, parent->span_id, 8);
    assert_memory_equal(child->trace_id, parent->trace_id, 16);
    assert_false(mem_exporter_find(f.mem, "new-root")->has_parent);
    assert_memory_not_equal(mem_exporter_find(f.mem, "new-root")->trace_id, parent->trace_id, 16);
    weft_provider_free(f.provider);
}

/* ---- redaction ----------------------------------------------------------------------------- */

static const char *
shout_redact(const char *key, const char *value, size_t len, char *scratch, size_t n, void *ud)
{
    (void)value;
    (void)len;
    (void)ud;
    if (strcmp(key, "user.email") == 0) {
        snprintf(scratch, n, "<email>");
        return scratch;
    }
    return NULL;
}

static void
test_redaction_builtin_rules_and_callback(void **state)
{
    struct weft_provider_options o = {.redact = shout_redact};
    struct fx f;
    struct weft_span *s = NULL;
    const struct mem_span *m = NULL;
    char scratch[128];
    struct weft_attr ev[] = {weft_attr_str("msg", "token sk-proj-abcdefghijklmnop1234 leaked")};

    (void)state;
    open_fx(&f, &o);
    s = weft_span_start(f.tracer, "secrets", NULL);
    weft_span_set_str(s, "http.request.header.authorization", "Basic dXNlcjpwYXNz");
    weft_span_set_str(s, "note", "call with Bearer abcdefghijklmnop.qrs and AKIAABCDEFGHIJKLMNOP");
    weft_span_set_str(s, "gen_ai.token.type", "input");
    weft_span_set_str(s, "plain", "a basic idea, sk-1");
    weft_span_set_str(s, "user.email", "a@b.c");
    weft_span_add_event(s, "log", ev, 1, 0);
    weft_span_end(s, 0);
    m = mem_exporter_span(f.mem, 0);
    assert_string_equal(mem_span_attr(m, "http.request.header.authorization")->u.str,
                        WEFT_REDACTED);
    assert_string_equal(mem_span_attr(m, "note")->u.str,
                        "call with Bearer [REDACTED] and [REDACTED]");
    assert_string_equal(mem_span_attr(m, "gen_ai.token.type")->u.str, "input");
    assert_string_equal(mem_span_attr(m, "plain")->u.str, "a basic idea, sk-1");
    assert_string_equal(mem_span_attr(m, "user.email")->u.str, "<email>");
    assert_string_equal(m->event_attrs[0][0].value.u.str, "token [REDACTED] leaked");
    assert_null(weft_redact_builtin("k", "harmless text here", 18, scratch, sizeof(scratch)));
    assert_string_equal(weft_redact_builtin("api_key", "x", 1, scratch, 4), "[RE");
    weft_provider_free(f.provider);
}

/* ---- environment ------------------------------------------------------------------------- */

static void
test_env_limits_batch_options_and_bad_values(void **state)
{
    struct weft_span_limits lim;
    struct weft_batch_options bo;

    (void)state;
    weft_span_limits_from_env(&lim);
    assert_int_equal(lim.attr_count, 128);
    assert_true(lim.attr_value_length == WEFT_LIMIT_NONE);
    weft_test_capture_logs();
    weft_test_setenv("OTEL_ATTRIBUTE_COUNT_LIMIT", "10");
    weft_test_setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "20");
    weft_test_setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "12x");
    weft_test_setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "-1");
    weft_test_setenv("OTEL_SPAN_LINK_COUNT_LIMIT", "");
    weft_span_limits_from_env(&lim);
    assert_int_equal(lim.attr_count, 20);
    assert_true(lim.attr_value_length == WEFT_LIMIT_NONE);
    assert_int_equal(lim.event_count, 128);
    assert_int_equal(lim.link_count, 128);
    assert_non_null(strstr(weft_test_logs(), "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=12x"));
    assert_non_null(strstr(weft_test_logs(), "OTEL_SPAN_EVENT_COUNT_LIMIT=-1"));

    weft_batch_options_from_env(&bo);
    assert_int_equal(bo.max_queue_size, 2048);
    assert_int_equal(bo.max_export_batch_size, 512);
    assert_int_equal(bo.schedule_delay_ms, 5000);
    assert_int_equal(bo.export_timeout_ms, 30000);
    weft_test_setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100");
    weft_test_setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "200");
    weft_batch_options_from_env(&bo);
    assert_int_equal(bo.max_export_batch_size, 100);
    assert_non_null(strstr(weft_test_logs(), "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=200"));
}

static void
test_env_resource_precedence_and_malformed_value(void **state)
{
    struct weft_provider *p = NULL;
    struct weft_attr api[] = {weft_attr_str("deployment.environment", "prod")};
    struct weft_provider_options o = {.resource_attrs = api, .resource_attr_count = 1};

    (void)state;
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_non_null(
        strstr(weft_provider_resource_get(p, "service.name")->u.str, "unknown_service:"));
    assert_string_equal(weft_provider_resource_get(p, "telemetry.sdk.name")->u.str, "weft");
    weft_provider_free(p);

    weft_test_setenv("OTEL_RESOURCE_ATTRIBUTES",
                     "service.name=from-attrs, team = agents%20core ,deployment.environment=dev");
    assert_weft_ok(weft_provider_new(&o, &p));
    assert_string_equal(weft_provider_resource_get(p, "service.name")->u.str, "from-attrs");
    assert_string_equal(weft_provider_resource_get(p, "team")->u.str, "agents core");
    assert_string_equal(weft_provider_resource_get(p, "deployment.environment")->u.str, "prod");
    weft_provider_free(p);

    weft_test_setenv("OTEL_SERVICE_NAME", "from-service-name");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_string_equal(weft_provider_resource_get(p, "service.name")->u.str, "from-service-name");
    weft_provider_free(p);

    weft_test_capture_logs();
    weft_test_setenv("OTEL_RESOURCE_ATTRIBUTES", "team=ok,broken,x=%zz");
    assert_weft_ok(weft_provider_new(NULL, &p));
    assert_null(weft_provider_resource_get(p, "team")); /* discarded whole */
    assert_non_null(strstr(weft_test_logs(), "OTEL_RESOURCE_ATTRIBUTES"));
    weft_provider_free(p);
}

static void
test_disabled_sdk_is_a_no_op(void **state)
{
    struct fx f;
    struct weft_span *s = NULL;
    struct weft_trace_stats st;

    (void)state;
    weft_test_setenv("OTEL_SDK_DISABLED", "TRUE");
    open_fx(&f, NULL);
    assert_true(weft_provider_is_disabled(f.provider));
    s = weft_span_start(f.tracer, "nothing", NULL);
    assert_false(weft_span_is_recording(s));
    assert_weft_ok(weft_span_set_str(s, "k", "v"));
    assert_weft_ok(weft_span_add_event(s, "e", NULL, 0, 0));
    weft_span_end(s, 0);
    weft_provider_get_stats(f.provider, &st);
    assert_int_equal(st.spans_started, 0);
    assert_int_equal(mem_exporter_count(f.mem), 0);
    weft_provider_free(f.provider);
    /* Garbage warns and leaves the SDK enabled. */
    weft_test_capture_logs();
    weft_test_setenv("OTEL_SDK_DISABLED", "yes");
    open_fx(&f, NULL);
    assert_false(weft_provider_is_disabled(f.provider));
    assert_non_null(strstr(weft_test_logs(), "OTEL_SDK_DISABLED=yes"));
    weft_provider_free(f.provider);
}

static void
test_null_arguments_are_rejected(void **state)
{
    struct weft_provider *p = NULL;
    struct weft_provider_options bad = {.sampler = WEFT_SAMPLER_TRACEIDRATIO, .sampler_ratio = 2};

    (void)state;
    assert_weft_err(weft_provider_new(&bad, &p), WEFT_EINVAL);
    assert_null(p);
    assert_weft_err(weft_span_set_str(NULL, "k", "v"), WEFT_EINVAL);
    assert_weft_err(weft_span_set_attr(NULL, NULL), WEFT_EINVAL);
    assert_weft_err(weft_span_add_event(NULL, "e", NULL, 0, 0), WEFT_EINVAL);
    assert_weft_err(weft_provider_force_flush(NULL, 10), WEFT_EINVAL);
    weft_span_end(NULL, 0);
    weft_provider_free(NULL);
}

/* The header capture every HTTP client of weft uses (OTLP, Langfuse, OpenAI, webhooks). */
static void
test_http_header_value_matches_trims_and_cuts(void **state)
{
    char out[8] = "keep";
    static const char line[] = "retry-after:  120 \r\n";

    (void)state;
    assert_true(weft__http_header_value(line, strlen(line), "Retry-After", out, sizeof(out)));
    assert_string_equal(out, "120");
    assert_int_equal(weft__http_retry_after_ms(out), 120000);
    /* Another header, a name that is only a prefix, a line without a colon: untouched. */
    strcpy(out, "keep");
    assert_false(weft__http_header_value("Content-Type: x\r\n", 17, "Retry-After", out, 8));
    assert_false(weft__http_header_value("Retry-After-Ms: 5\r\n", 19, "Retry-After", out, 8));
    assert_false(weft__http_header_value("Retry-After\r\n", 13, "Retry-After", out, 8));
    assert_string_equal(out, "keep");
    /* Too long: cut to the buffer. */
    assert_true(weft__http_header_value("Retry-After: 123456789012\r\n", 27, "Retry-After", out,
                                        sizeof(out)));
    assert_string_equal(out, "1234567");
    /* Empty value. */
    assert_true(weft__http_header_value("Retry-After:\r\n", 14, "Retry-After", out, 8));
    assert_string_equal(out, "");
}

/* Found by tests/fuzz/fuzz_otel_env: "%00" decoded to a NUL that cut the string, so "%00=v"
 * became a resource attribute with an empty key and "k=a%00b" a silently shortened value. */
static void
test_env_resource_nul_escape_discards_value(void **state)
{
    struct weft_attr *attrs = NULL;
    size_t count = 99;

    (void)state;
    assert_null(weft__percent_decode("a%00b", 5));
    assert_weft_ok(weft__resource_parse_env("ok=1,%00=v", &attrs, &count));
    assert_int_equal(count, 0);
    assert_null(attrs);
    assert_weft_ok(weft__resource_parse_env("ok=1,k=a%00b", &attrs, &count));
    assert_int_equal(count, 0);
    assert_weft_ok(weft__resource_parse_env("ok=1,k=a%20b", &attrs, &count));
    assert_int_equal(count, 2);
    assert_string_equal(attrs[1].key, "k");
    assert_string_equal(attrs[1].value.u.str, "a b");
    weft__free(attrs);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, reset, reset)
        T(test_traceparent_valid_forms_parse),
        T(test_traceparent_every_invalid_form_is_rejected),
        T(test_tracestate_invalid_is_dropped_but_traceparent_kept),
        T(test_sampler_traceidratio_lands_within_statistical_bounds),
        T(test_sampler_parent_based_follows_remote_parent_flag),
        T(test_sampler_env_and_bad_values),
        T(test_limits_drop_and_count_attributes_events_links),
        T(test_span_records_every_attribute_type_status_and_times),
        T(test_status_ok_is_final),
        T(test_context_parents_children_and_overflow),
        T(test_redaction_builtin_rules_and_callback),
        T(test_env_limits_batch_options_and_bad_values),
        T(test_env_resource_precedence_and_malformed_value),
        T(test_env_resource_nul_escape_discards_value),
        T(test_disabled_sdk_is_a_no_op),
        T(test_null_arguments_are_rejected),
        T(test_http_header_value_matches_trims_and_cuts),
#undef T
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
