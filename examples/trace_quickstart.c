/* examples/trace_quickstart.c - a small agent-shaped trace that uses every tracing feature:
 * all attribute types, events, a link, an exception and an error status, W3C propagation.
 *
 * Exporters come from OTEL_TRACES_EXPORTER (default here: the local SQLite store; set it to
 * "otlp" to send to a collector at OTEL_EXPORTER_OTLP_ENDPOINT, default localhost:4318).
 * Set TRACEPARENT to continue a trace started elsewhere. Exit status 0 when every span was
 * delivered, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <weft/weft.h>

static void
log_to_stderr(weft_log_level level, const char *message, void *user_data)
{
    (void)user_data;
    fprintf(stderr, "weft %s: %s\n", weft_log_level_name(level), message);
}

static void
chat(struct weft_tracer *tracer)
{
    static const char *const stop[] = {"\n\n", "END"};
    static const int64_t token_counts[] = {412, 96};
    static const double scores[] = {0.92, 0.31};
    static const bool flags[] = {true, false};
    struct weft_span_start_options opts = {.kind = WEFT_SPAN_KIND_CLIENT};
    struct weft_span *span = weft_span_start(tracer, "chat gpt-4o-mini", &opts);

    weft_span_set_str(span, "gen_ai.operation.name", "chat");
    weft_span_set_str(span, "gen_ai.provider.name", "openai");
    weft_span_set_str(span, "gen_ai.request.model", "gpt-4o-mini");
    weft_span_set_double(span, "gen_ai.request.temperature", 0.2);
    weft_span_set_bool(span, "weft.llm.stream", false);
    weft_span_set_str_array(span, "gen_ai.request.stop_sequences", stop, 2);
    weft_span_set_int(span, "gen_ai.usage.input_tokens", 412);
    weft_span_set_int(span, "gen_ai.usage.output_tokens", 96);
    weft_span_set_int_array(span, "weft.llm.token_counts", token_counts, 2);
    weft_span_set_double_array(span, "weft.llm.logprob_scores", scores, 2);
    weft_span_set_bool_array(span, "weft.llm.cache_hits", flags, 2);
    /* Redacted before it is stored: the key names a secret. */
    weft_span_set_str(span, "http.request.header.authorization", "Bearer sk-live-0123456789abcdef");
    weft_span_end(span, 0);
}

static void
failing_tool(struct weft_tracer *tracer)
{
    struct weft_span *span = weft_span_start(tracer, "execute_tool web_search", NULL);
    struct weft_attr retry[] = {weft_attr_int("weft.tool.attempt", 1),
                                weft_attr_str("weft.tool.reason", "connection reset")};

    weft_span_set_str(span, "gen_ai.operation.name", "execute_tool");
    weft_span_set_str(span, "gen_ai.tool.name", "web_search");
    weft_span_add_event(span, "weft.tool.retry", retry, 2, 0);
    weft_span_record_exception(span, "TimeoutError", "web_search timed out after 10 s", NULL);
    weft_span_set_int(span, "weft.tool.exit_code", 124);
    weft_span_set_str(span, "error.type", "timeout");
    weft_span_end(span, 0);
}

int
main(void)
{
    struct weft_provider *provider = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_span_context remote;
    struct weft_span_context researcher_ctx;
    struct weft_span_start_options root_opts = {0};
    struct weft_trace_stats stats;
    struct weft_provider_options popts = {.service_name = NULL};
    const char *traceparent = getenv("TRACEPARENT");
    char tp[WEFT_TRACEPARENT_LEN + 1];
    weft_err err = WEFT_OK;

    weft_log_set_handler(log_to_stderr, WEFT_LOG_WARN, NULL);
    if (getenv("OTEL_SERVICE_NAME") == NULL) {
        popts.service_name = "weft-quickstart";
    }
    err = weft_provider_new(&popts, &provider);
    if (err != WEFT_OK) {
        fprintf(stderr, "trace_quickstart: %s\n", weft_strerror(err));
        return 1;
    }
    err = weft_provider_add_env_exporters(provider, "store");
    if (err != WEFT_OK) {
        fprintf(stderr, "trace_quickstart: exporter set-up: %s\n", weft_strerror(err));
        weft_provider_free(provider);
        return 1;
    }
    weft_provider_get_tracer(provider, "weft.quickstart", WEFT_VERSION, &tracer);

    if (traceparent != NULL &&
        weft_traceparent_parse(traceparent, getenv("TRACESTATE"), &remote) == WEFT_OK) {
        root_opts.parent_context = &remote;
    }
    struct weft_span *root = weft_span_start(tracer, "invoke_workflow quickstart", &root_opts);
    size_t root_token = weft_context_attach(root);
    weft_span_set_str(root, "gen_ai.operation.name", "invoke_workflow");
    weft_span_set_str(root, "gen_ai.workflow.name", "quickstart");
    weft_span_set_str(root, "weft.run.id", "run-quickstart");

    struct weft_span *plan = weft_span_start(tracer, "plan supervisor", NULL);
    weft_span_set_str(plan, "gen_ai.operation.name", "plan");
    weft_span_set_str(plan, "weft.decision.layer", "llm");
    weft_span_set_str(plan, "weft.decision.next", "researcher");
    weft_span_set_int(plan, "weft.plan.size", 2);
    weft_span_end(plan, 0);

    struct weft_span *researcher = weft_span_start(tracer, "invoke_agent researcher", NULL);
    size_t token = weft_context_attach(researcher);
    weft_span_set_str(researcher, "gen_ai.operation.name", "invoke_agent");
    weft_span_set_str(researcher, "gen_ai.agent.name", "researcher");
    weft_span_set_int(researcher, "weft.step.id", 1);
    chat(tracer);
    failing_tool(tracer);
    weft_span_set_status(researcher, WEFT_STATUS_OK, NULL);
    weft_context_detach(token);
    weft_span_context_of(researcher, &researcher_ctx);
    weft_span_end(researcher, 0);

    struct weft_span *reflect = weft_span_start(tracer, "reflect researcher", NULL);
    struct weft_attr verdict[] = {
        weft_attr_str("gen_ai.evaluation.name", "reflection"),
        weft_attr_str("gen_ai.evaluation.score.label", "APPROVED"),
        weft_attr_double("gen_ai.evaluation.score.value", 1.0),
    };
    weft_span_set_str(reflect, "weft.reflection.verdict", "APPROVED");
    weft_span_add_event(reflect, "gen_ai.evaluation.result", verdict, 3, 0);
    weft_span_end(reflect, 0);

    /* The writer's step was asked for by the researcher: a span link says so. */
    struct weft_attr link_attrs[] = {weft_attr_str("weft.link.reason", "requested_by")};
    struct weft_link_spec link = {.context = researcher_ctx, .attrs = link_attrs, .attr_count = 1};
    struct weft_span_start_options writer_opts = {.links = &link, .link_count = 1};
    struct weft_span *writer = weft_span_start(tracer, "invoke_agent writer", &writer_opts);
    weft_span_set_str(writer, "gen_ai.operation.name", "invoke_agent");
    weft_span_set_str(writer, "gen_ai.agent.name", "writer");
    weft_span_end(writer, 0);

    weft_span_set_str(root, "weft.run.status", "completed");
    weft_span_context_of(root, &remote);
    weft_traceparent_format(&remote, tp, sizeof(tp));
    weft_context_detach(root_token);
    weft_span_end(root, 0);

    err = weft_provider_shutdown(provider, 30000);
    weft_provider_get_stats(provider, &stats);
    printf("trace_quickstart: traceparent %s\n", tp);
    printf("trace_quickstart: %llu spans\n", (unsigned long long)stats.spans_started);
    /* Each exporter has its own queue: the provider's totals add them up, so with two
     * exporters "exported=7 failed=7" cannot say which one lost the spans. One line per
     * exporter does, with why its last export failed, in its own words. */
    for (size_t i = 0; weft_provider_processor(provider, i) != NULL; i++) {
        struct weft_processor *proc = weft_provider_processor(provider, i);
        struct weft_processor_stats ps;
        char why[256] = "";

        weft_processor_get_stats(proc, &ps);
        weft_processor_last_error(proc, why, sizeof(why));
        printf("  %s: %llu delivered", weft_processor_exporter_name(proc),
               (unsigned long long)ps.exported);
        if (ps.failed > 0 || ps.dropped > 0) {
            printf(", %llu failed, %llu dropped", (unsigned long long)ps.failed,
                   (unsigned long long)ps.dropped);
        }
        printf("%s%s%s\n", why[0] != '\0' ? " (" : "", why, why[0] != '\0' ? ")" : "");
    }
    if (stats.spans_failed > 0 || stats.spans_dropped > 0) {
        printf("trace_quickstart: spans were not delivered (see above); start a collector at the "
               "OTLP endpoint, or see them locally: OTEL_TRACES_EXPORTER=otlp,store, then "
               "build/weft trace show last\n");
    }
    weft_provider_free(provider);
    return err == WEFT_OK && stats.spans_dropped == 0 && stats.spans_failed == 0 ? 0 : 1;
}
