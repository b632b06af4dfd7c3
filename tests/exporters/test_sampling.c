/* tests/exporters/test_sampling.c - tail sampling: the policy's text form and decisions
 * (exporters/sampling_policy.c), and the run buffer (exporters/tail.c) behind a real batch
 * processor: kept traces arrive whole and byte-for-byte, dropped ones not at all, late spans
 * follow their trace's decision, spills come back identical, the spill bound sends the oldest
 * undecided trace whole, and shutdown sends what is undecided. */
#include "support/mem_exporter.h"
#include "support/weft_test.h"

#include <stdio.h>
#include <string.h>
#include <weft/sampling.h>

/* ------------------------------------------------------------------------------------------ */
/* policy                                                                                      */

static struct weft_sampling_policy *
parse_ok(const char *text)
{
    struct weft_sampling_policy *p = NULL;
    char why[256] = "";

    if (weft_sampling_policy_parse(text, &p, why, sizeof(why)) != WEFT_OK) {
        fail_msg("'%s' did not parse: %s", text, why);
    }
    return p;
}

static void
expect_parse_error(const char *text, const char *needle)
{
    struct weft_sampling_policy *p = NULL;
    char why[256] = "";

    assert_int_equal(weft_sampling_policy_parse(text, &p, why, sizeof(why)), WEFT_EPARSE);
    assert_null(p);
    if (strstr(why, needle) == NULL) {
        fail_msg("'%s': message '%s' lacks '%s'", text, why, needle);
    }
}

static void
test_policy_canonical_text_names_every_rule(void **state)
{
    struct weft_sampling_policy *p =
        parse_ok(" failed, stuck ,corrected,rejected,duration>2m,cost>0.5,low=reward<0.5,5% ");

    (void)state;
    assert_string_equal(weft_sampling_policy_text(p),
                        "failed=failed,stuck=stuck,corrected=corrected,rejected=rejected,"
                        "slow=duration>120s,costly=cost>0.5,low=reward<0.5,sample=5%");
    weft_sampling_policy_free(p);
}

static void
test_policy_off_and_empty_mean_no_policy(void **state)
{
    struct weft_sampling_policy *p = (struct weft_sampling_policy *)1;

    (void)state;
    assert_weft_ok(weft_sampling_policy_parse("off", &p, NULL, 0));
    assert_null(p);
    p = (struct weft_sampling_policy *)1;
    assert_weft_ok(weft_sampling_policy_parse("  ", &p, NULL, 0));
    assert_null(p);
    assert_int_equal(weft_sampling_policy_parse(NULL, &p, NULL, 0), WEFT_EINVAL);
}

static void
test_policy_rejects_bad_rules_with_a_reason(void **state)
{
    (void)state;
    expect_parse_error("failed,loopy", "'loopy': expected failed, stuck");
    expect_parse_error("failed,,stuck", "empty");
    expect_parse_error("failed,", "empty");
    expect_parse_error("150%", "'150%'");
    expect_parse_error("duration>soon", "duration>DURATION");
    expect_parse_error("reward<", "'reward<'");
    expect_parse_error("Bad Name=failed", "a rule's name");
    expect_parse_error("failed,failed", "two rules have this name");
    expect_parse_error("a=5%,a=failed", "two rules have this name");
}

static struct weft_sampling_facts
passing_run(uint8_t last_byte)
{
    struct weft_sampling_facts f;

    memset(&f, 0, sizeof(f));
    f.trace_id[0] = 1;
    f.trace_id[8] = last_byte; /* the share reads bytes 8..15, big-endian */
    f.is_completed = true;
    f.duration_s = 1;
    f.cost_usd = 0.01;
    f.has_reward = true;
    f.reward = 1.0;
    return f;
}

static void
test_policy_first_matching_rule_keeps(void **state)
{
    struct weft_sampling_policy *p =
        parse_ok("failed,stuck,corrected,rejected,duration>90s,cost>0.5,reward<0.5,0%");
    struct weft_sampling_facts f = passing_run(0);
    const char *rule = NULL;

    (void)state;
    assert_false(weft_sampling_decide(p, &f, &rule));
    assert_string_equal(rule, "sample"); /* the share rule left it out */
    f.is_completed = false;
    f.is_stuck = true;
    assert_true(weft_sampling_decide(p, &f, &rule));
    assert_string_equal(rule, "failed"); /* order decides which rule is named */
    f = passing_run(0);
    f.is_stuck = true;
    assert_true(weft_sampling_decide(p, &f, &rule));
    assert_string_equal(rule, "stuck");
    f = passing_run(0);
    f.is_corrected = true;
    assert_true(weft_sampling_decide(p, &f, &rule));
    assert_string_equal(rule, "corrected");
    f = passing_run(0);
    f.is_rejected = true;
    assert_true(weft_sampling_decide(p, &f, &rule));
    assert_string_equal(rule, "rejected");
    f = passing_run(0);
    f.duration_s = 90.5;
    assert_true(weft_sampling_decide(p, &f, &rule));
    assert_string_equal(rule, "slow");
    f = passing_run(0);
    f.cost_usd = 0.51;
    assert_true(weft_sampling_decide(p, &f, &rule));
    assert_string_equal(rule, "costly");
    f = passing_run(0);
    f.reward = 0.4;
    assert_true(weft_sampling_decide(p, &f, &rule));
    assert_string_equal(rule, "low_reward");
    /* No evaluated step: a reward of 0 is no reward at all. */
    f.has_reward = false;
    f.reward = 0;
    assert_false(weft_sampling_decide(p, &f, &rule));
    weft_sampling_policy_free(p);
}

static void
test_policy_share_is_decided_by_trace_id(void **state)
{
    struct weft_sampling_policy *p = parse_ok("failed,25%");
    struct weft_sampling_facts f;
    size_t kept = 0;
    const char *rule = NULL;

    (void)state;
    /* 25 % of 2^64: trace ids whose byte 8 is below 0x40 (and nothing above). */
    for (unsigned b = 0; b < 256; b++) {
        bool keep = false;

        f = passing_run((uint8_t)b);
        keep = weft_sampling_decide(p, &f, &rule);
        assert_int_equal(keep, b < 0x40);
        assert_string_equal(rule, "sample");
        kept += keep;
    }
    assert_int_equal(kept, 64);
    assert_true(weft_sampling_decide(NULL, &f, &rule)); /* no policy keeps all */
    assert_string_equal(rule, "all");
    weft_sampling_policy_free(p);
}

/* ------------------------------------------------------------------------------------------ */
/* run buffer                                                                                  */

struct fixture {
    struct weft_provider *provider;
    struct weft_tracer *tracer;
    struct mem_exporter *mem;
    struct weft_tail *tail;
};

static void
setup_with(struct fixture *f, const struct weft_tail_options *o)
{
    struct weft_exporter *exporter = NULL;
    struct weft_processor *proc = NULL;
    struct weft_batch_options bo = {.max_queue_size = 4096,
                                    .max_export_batch_size = 16,
                                    .schedule_delay_ms = 3600000,
                                    .export_timeout_ms = 30000};

    memset(f, 0, sizeof(*f));
    assert_weft_ok(weft_provider_new(NULL, &f->provider));
    assert_weft_ok(weft_provider_get_tracer(f->provider, "test", "1.0", &f->tracer));
    assert_weft_ok(mem_exporter_new(&exporter, &f->mem));
    mem_exporter_keep(f->mem);
    assert_weft_ok(weft_tail_new(o, &f->tail));
    assert_weft_ok(weft_tail_wrap(f->tail, exporter, &exporter));
    assert_string_equal(weft_exporter_name(exporter), "memory");
    assert_weft_ok(weft_batch_processor_new(exporter, &bo, &proc));
    assert_weft_ok(weft_provider_add_processor_take(f->provider, proc));
}

static void
teardown(struct fixture *f)
{
    weft_provider_free(f->provider);
    weft_tail_unref(f->tail);
    mem_exporter_state_free(f->mem);
}

static void
flush(struct fixture *f)
{
    assert_weft_ok(weft_provider_force_flush(f->provider, 10000));
}

/* A run-shaped trace: @p children spans (with an attribute and an event each) under a root
 * that ends last; the root carries @p decision (NULL: none yet). *root_out (may be NULL)
 * receives the root still open when @p is_open. */
static struct weft_span *
trace(struct fixture *f, const char *tag, size_t children, const char *decision, bool is_open)
{
    struct weft_span_start_options so = {.is_root = true};
    struct weft_span *root = weft_span_start(f->tracer, tag, &so);

    for (size_t i = 0; i < children; i++) {
        struct weft_span_start_options co = {.parent = root};
        struct weft_span *s = NULL;
        char name[64];

        snprintf(name, sizeof(name), "%s/%zu", tag, i);
        s = weft_span_start(f->tracer, name, &co);
        weft_span_set_int(s, "i", (int64_t)i);
        weft_span_set_str(s, "payload", "some text that makes the span a little larger");
        weft_span_add_event(s, "weft.step", NULL, 0, 0);
        weft_span_end(s, 0);
    }
    if (decision != NULL) {
        weft_span_set_str(root, WEFT_SAMPLING_DECISION_ATTR, decision);
        weft_span_set_str(root, WEFT_SAMPLING_RULE_ATTR, "test");
    }
    if (!is_open) {
        weft_span_end(root, 0);
        return NULL;
    }
    return root;
}

static size_t
count_prefix(struct mem_exporter *m, const char *prefix)
{
    size_t n = 0;

    for (size_t i = 0; i < mem_exporter_count(m); i++) {
        n += strncmp(mem_exporter_span(m, i)->name, prefix, strlen(prefix)) == 0;
    }
    return n;
}

static void
test_tail_keeps_whole_traces_and_drops_whole_traces(void **state)
{
    struct fixture f;
    struct weft_tail_stats st;
    const struct mem_span *child = NULL;

    (void)state;
    setup_with(&f, NULL);
    trace(&f, "kept", 40, "keep", false);
    trace(&f, "gone", 40, "drop", false);
    flush(&f);
    assert_int_equal(count_prefix(f.mem, "kept"), 41);
    assert_int_equal(count_prefix(f.mem, "gone"), 0);
    /* What was held comes back as it was recorded. */
    child = mem_exporter_find(f.mem, "kept/7");
    assert_non_null(child);
    assert_true(child->has_parent);
    assert_int_equal(mem_span_attr(child, "i")->u.i, 7);
    assert_string_equal(mem_span_attr(child, "payload")->u.str,
                        "some text that makes the span a little larger");
    assert_int_equal(child->event_count, 1);
    assert_string_equal(child->event_names[0], "weft.step");
    assert_string_equal(
        mem_span_attr(mem_exporter_find(f.mem, "kept"), WEFT_SAMPLING_RULE_ATTR)->u.str, "test");
    weft_tail_get_stats(f.tail, &st);
    assert_int_equal(st.spans_kept, 41);
    assert_int_equal(st.spans_sampled_out, 41);
    assert_int_equal(st.traces_held, 0);
    assert_int_equal(st.spans_held, 0);
    assert_int_equal(st.bytes_held, 0);
    assert_int_equal(st.spans_failed, 0);
    teardown(&f);
}

static void
test_tail_holds_until_the_decision_and_late_spans_follow_it(void **state)
{
    struct fixture f;
    struct weft_span *kept_root = NULL;
    struct weft_span *gone_root = NULL;
    struct weft_span_context kept_ctx;
    struct weft_span_context gone_ctx;
    struct weft_tail_stats st;

    (void)state;
    setup_with(&f, NULL);
    kept_root = trace(&f, "kept", 10, "keep", true);
    gone_root = trace(&f, "gone", 10, "drop", true);
    weft_span_context_of(kept_root, &kept_ctx);
    weft_span_context_of(gone_root, &gone_ctx);
    flush(&f);
    assert_int_equal(mem_exporter_count(f.mem), 0); /* nothing leaves before the decision */
    weft_tail_get_stats(f.tail, &st);
    assert_int_equal(st.traces_held, 2);
    assert_int_equal(st.spans_held, 20);
    assert_true(st.bytes_held > 20 * 50);
    weft_span_end(kept_root, 0);
    weft_span_end(gone_root, 0);
    flush(&f);
    assert_int_equal(count_prefix(f.mem, "kept"), 11);
    /* Spans that end after their root (an asynchronous tool call) follow the decision. */
    {
        struct weft_span_start_options so = {.parent_context = &kept_ctx};
        struct weft_span_start_options sg = {.parent_context = &gone_ctx};

        kept_ctx.is_remote = false;
        gone_ctx.is_remote = false;
        weft_span_end(weft_span_start(f.tracer, "kept/late", &so), 0);
        weft_span_end(weft_span_start(f.tracer, "gone/late", &sg), 0);
    }
    flush(&f);
    assert_int_equal(count_prefix(f.mem, "kept"), 12);
    assert_int_equal(count_prefix(f.mem, "gone"), 0);
    weft_tail_get_stats(f.tail, &st);
    assert_int_equal(st.traces_held, 0);
    assert_int_equal(st.spans_sampled_out, 12);
    teardown(&f);
}

static void
test_tail_spills_past_its_memory_and_reads_back_identical(void **state)
{
    struct fixture f;
    struct weft_tail_options o = {.max_memory_bytes = 1}; /* every batch spills */
    struct weft_span *roots[3];
    struct weft_tail_stats st;

    (void)state;
    setup_with(&f, &o);
    roots[0] = trace(&f, "a", 50, "keep", true);
    roots[1] = trace(&f, "b", 50, "drop", true);
    roots[2] = trace(&f, "c", 50, "keep", true);
    flush(&f);
    weft_tail_get_stats(f.tail, &st);
    assert_int_equal(st.spans_spilled, 150);
    assert_int_equal(st.bytes_held, 0);
    assert_true(st.bytes_spilled > 150 * 50);
    for (int i = 0; i < 3; i++) {
        weft_span_end(roots[i], 0);
    }
    flush(&f);
    assert_int_equal(count_prefix(f.mem, "a"), 51);
    assert_int_equal(count_prefix(f.mem, "b"), 0);
    assert_int_equal(count_prefix(f.mem, "c"), 51);
    for (size_t i = 0; i < 50; i++) {
        char name[16];
        const struct mem_span *s = NULL;

        snprintf(name, sizeof(name), "c/%zu", i);
        s = mem_exporter_find(f.mem, name);
        assert_non_null(s);
        assert_int_equal(mem_span_attr(s, "i")->u.i, (int64_t)i);
    }
    weft_tail_get_stats(f.tail, &st);
    assert_int_equal(st.bytes_spilled, 0);
    assert_int_equal(st.spans_failed, 0);
    teardown(&f);
}

static void
test_tail_spill_bound_sends_the_oldest_undecided_trace_whole(void **state)
{
    struct fixture f;
    struct weft_tail_options o = {.max_memory_bytes = 1, .max_spill_bytes = 6000};
    struct weft_span *first = NULL;
    struct weft_span *second = NULL;
    struct weft_tail_stats st;

    (void)state;
    setup_with(&f, &o);
    first = trace(&f, "first", 10, NULL, true);
    flush(&f);
    assert_int_equal(mem_exporter_count(f.mem), 0);
    second = trace(&f, "second", 30, "drop", true);
    flush(&f);
    /* The bound was passed: the oldest undecided trace went on whole, as kept. */
    assert_int_equal(count_prefix(f.mem, "first"), 10);
    weft_tail_get_stats(f.tail, &st);
    assert_true(st.traces_forced >= 1);
    /* Its root follows the decision its children got. */
    weft_span_end(first, 0);
    weft_span_end(second, 0);
    flush(&f);
    assert_int_equal(count_prefix(f.mem, "first"), 11);
    teardown(&f);
}

static void
test_tail_shutdown_sends_undecided_traces(void **state)
{
    struct fixture f;
    struct weft_span *open_root = NULL;
    struct weft_tail_stats st;

    (void)state;
    setup_with(&f, NULL);
    open_root = trace(&f, "cut", 5, NULL, true);
    trace(&f, "plain", 3, NULL, false); /* a trace without a decision at all */
    flush(&f);
    assert_int_equal(mem_exporter_count(f.mem), 0);
    weft_span_end(open_root, 0);
    assert_weft_ok(weft_provider_shutdown(f.provider, 10000));
    assert_int_equal(count_prefix(f.mem, "cut"), 6);
    assert_int_equal(count_prefix(f.mem, "plain"), 4);
    weft_tail_get_stats(f.tail, &st);
    assert_int_equal(st.traces_forced, 2);
    assert_int_equal(st.traces_held, 0);
    teardown(&f);
}

static void
test_tail_counters_reach_metrics(void **state)
{
    struct fixture f;
    struct weft_meter *meter = NULL;
    struct weft_span *root = NULL;

    (void)state;
    setup_with(&f, NULL);
    assert_weft_ok(weft_meter_new(NULL, &meter));
    assert_weft_ok(weft_tail_observe(f.tail, meter));
    root = trace(&f, "open", 4, "drop", true);
    flush(&f);
    assert_true(weft_test_prom_has(meter, "weft_sampling_spans_held 4\n"));
    assert_true(weft_test_prom_has(meter, "weft_sampling_traces_held 1\n"));
    assert_true(weft_test_prom_has(meter, "# TYPE weft_sampling_held_bytes gauge\n"));
    assert_true(weft_test_prom_has(meter, "weft_sampling_spilled_bytes 0\n"));
    weft_span_end(root, 0);
    flush(&f);
    assert_true(weft_test_prom_has(meter, "weft_sampling_spans_held 0\n"));
    assert_true(weft_test_prom_has(meter, "weft_sampling_spans_sampled_out 5\n"));
    weft_meter_free(meter);
    teardown(&f);
}

static void
test_tail_counts_what_the_wrapped_exporter_refuses(void **state)
{
    struct fixture f;
    struct weft_tail_stats st;

    (void)state;
    setup_with(&f, NULL);
    mem_exporter_set_result(f.mem, WEFT_EIO, 0);
    trace(&f, "kept", 9, "keep", false);
    flush(&f);
    weft_tail_get_stats(f.tail, &st);
    assert_int_equal(st.spans_failed, 10);
    assert_int_equal(st.spans_kept, 0);
    teardown(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_canonical_text_names_every_rule),
        cmocka_unit_test(test_policy_off_and_empty_mean_no_policy),
        cmocka_unit_test(test_policy_rejects_bad_rules_with_a_reason),
        cmocka_unit_test(test_policy_first_matching_rule_keeps),
        cmocka_unit_test(test_policy_share_is_decided_by_trace_id),
        cmocka_unit_test(test_tail_keeps_whole_traces_and_drops_whole_traces),
        cmocka_unit_test(test_tail_holds_until_the_decision_and_late_spans_follow_it),
        cmocka_unit_test(test_tail_spills_past_its_memory_and_reads_back_identical),
        cmocka_unit_test(test_tail_spill_bound_sends_the_oldest_undecided_trace_whole),
        cmocka_unit_test(test_tail_shutdown_sends_undecided_traces),
        cmocka_unit_test(test_tail_counts_what_the_wrapped_exporter_refuses),
        cmocka_unit_test(test_tail_counters_reach_metrics),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
