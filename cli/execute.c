/* cli/execute.c - the CLI's shared execute/recover path: cli_execute() loads a workflow,
 * builds a tracer provider whose spans always reach the local store (plus whatever
 * OTEL_TRACES_EXPORTER names), runs it with a live progress line (cli/progress.c), and prints
 * the summary and the run's trace tree, for `weft run`, `weft resume`, `weft replay` and
 * `weft fork`; cli_recover() marks runs whose process died as interrupted, for every command
 * that reads runs. SIGINT aborts the run at its next check instead of killing the process, so
 * the trace still ends and is flushed. A second SIGINT exits at once (status 130): while the
 * run is still stopping, or while the final flush waits on a collector that does not answer;
 * the spans not yet exported are reported as lost. The commands (run_cmd.c, runs_cmd.c,
 * replay_cmd.c) call this file and it calls none of them.
 */
#define _GNU_SOURCE /* realpath */
#include "cli.h"
#include "report/docs.h"
#include "runtime/dist/amqp_executor.h"
#include "runtime/workflow/workflow.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

static volatile sig_atomic_t abort_requested = 0;
static volatile sig_atomic_t interrupts = 0; /* SIGINTs received */
/* Where `weft run` is: the run, the span flush (the main thread waits on flush_wake and
 * reports a second SIGINT itself), or after it (the last metrics export). */
static volatile sig_atomic_t phase = 0;
#define PHASE_RUN      0
#define PHASE_FLUSHING 1
#define PHASE_AFTER    2
/* How long a checkpoint waits for the local span store (docs/durability.md). */
#define CHECKPOINT_FLUSH_MS 1000u
static sem_t flush_wake; /* posted by the flush thread and by SIGINT; never destroyed */

#define EXIT_INTERRUPTED 130 /* 128 + SIGINT, as shells report it */

/* How long `weft run` waits at exit for telemetry still on its way (spans, the last metrics). */
#define SHUTDOWN_MS 10000u

static void
on_sigint(int sig)
{
    static const char msg[] = "weft run: interrupted again: exiting now; spans not yet "
                              "exported are lost\n";
    static const char first[] = "weft run: interrupted: stopping at the next check; interrupt "
                                "again to exit now\n";
    static const char after[] = "weft run: interrupted: sending the last metrics; interrupt "
                                "again to exit now\n";

    (void)sig;
    abort_requested = 1;
    interrupts++;
    if (phase == PHASE_FLUSHING) {
        (void)sem_post(&flush_wake); /* async-signal-safe: the main thread reports and exits */
        return;
    }
    if (interrupts >= 2) {
        /* The run did not stop at its next check (a slow model or tool), or the last metrics
         * export waits on a collector: stop now. */
        (void)write(STDERR_FILENO, msg, sizeof(msg) - 1);
        _exit(EXIT_INTERRUPTED);
    }
    if (phase == PHASE_AFTER) {
        (void)write(STDERR_FILENO, after, sizeof(after) - 1);
    } else {
        (void)write(STDERR_FILENO, first, sizeof(first) - 1);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Output                                                                                      */

#define STEPS_LINE_ALL   30 /* plans up to this size are listed whole on the steps: line */
#define STEPS_LINE_FIRST 10 /* of larger plans: the first steps, */
#define STEPS_LINE_ODD   20 /* then steps neither completed nor pending, then counts */

/* The steps: line of the summary. A plan of thousands of steps is summarised: its first steps,
 * the ones that failed, were skipped or paused (those explain a failed run), and the number
 * of the others by status. */
static void
print_steps_line(const struct weft_run_result *r)
{
    const char *names[8];
    size_t counts[8];
    size_t kinds = 0;
    size_t shown = 0;
    size_t odd = 0;
    size_t omitted = 0;

    for (size_t i = 0; i < r->step_count; i++) {
        const struct weft_run_step *s = &r->steps[i];
        bool is_odd = strcmp(s->status, "completed") != 0 && strcmp(s->status, "pending") != 0;
        size_t k = 0;

        if (r->step_count <= STEPS_LINE_ALL || i < STEPS_LINE_FIRST ||
            (is_odd && odd++ < STEPS_LINE_ODD)) {
            printf("%s%s:%s(%s)", shown++ > 0 ? " " : "", s->id, s->agent, s->status);
            continue;
        }
        omitted++;
        while (k < kinds && strcmp(names[k], s->status) != 0) {
            k++;
        }
        if (k == kinds && kinds < 8) {
            names[kinds] = s->status;
            counts[kinds++] = 0;
        }
        counts[k < kinds ? k : kinds - 1]++;
    }
    if (omitted > 0) {
        printf(" ... %zu more (", omitted);
        for (size_t k = 0; k < kinds; k++) {
            printf("%s%zu %s", k > 0 ? ", " : "", counts[k], names[k]);
        }
        printf("; weft run show %s lists them all)", r->run_id);
    }
}

/* The output line, redacted as a belt: the runtime scrubbed the answers and tool outputs it
 * came from, but the terminal is the place a leaked key is most easily seen and copied. */
static void
put_output(const char *text)
{
    char *scrubbed = NULL;
    const char *redacted = NULL;
    char scratch[4096]; /* at most 300 columns are printed */

    if (weft_secrets_scrub(text, strlen(text), &scrubbed) != WEFT_OK) {
        fputs("[REDACTED]", stdout);
        return;
    }
    if (scrubbed != NULL) {
        text = scrubbed;
    }
    redacted = weft_redact_builtin(NULL, text, strlen(text), scratch, sizeof(scratch));
    cli_put_clean(stdout, redacted != NULL ? redacted : text, 300);
    weft_secrets_text_free(scrubbed);
}

/* The reason, one line of at most 200 columns per line of it, the later ones indented, at
 * most 16 lines: a server that did not start explains itself on several (its stderr). */
static void
print_reason(const char *reason)
{
    char line[1024];
    size_t n = 0;

    for (int i = 0; i < 16 && (i == 0 || *reason != '\0'); i++) {
        n = strcspn(reason, "\n");
        snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) - 1 ? n : sizeof(line) - 1),
                 reason);
        if (i > 0) {
            printf("\n           ");
        }
        cli_put_clean(stdout, line, 200);
        reason += n;
        reason += *reason == '\n' ? 1 : 0;
    }
    if (*reason != '\0') {
        printf("\n           ... (weft run show has it all)");
    }
}

/* The spans the local store holds for @p trace_id: more than this process recorded when
 * `weft worker` processes ran steps of the run (--executor amqp) and stored their spans in the
 * same trace, which the trace tree below the summary shows. 0 when unknown. */
static size_t
stored_span_count(const char *trace_id)
{
    struct weft_store *store = NULL;
    struct weft_trace_summary *list = NULL;
    size_t n = 0;
    size_t count = 0;
    char path[4096];

    if (trace_id[0] == '\0' || weft_store_default_path(path, sizeof(path)) != WEFT_OK ||
        weft_store_open(path, &store) != WEFT_OK) {
        return 0;
    }
    /* The run just ended: its trace is among the newest, whose summaries carry the count. */
    if (weft_store_list_traces(store, 16, &list, &n) == WEFT_OK) {
        for (size_t i = 0; i < n; i++) {
            if (strcmp(list[i].trace_id, trace_id) == 0) {
                count = list[i].span_count;
            }
        }
    }
    weft_trace_summaries_free(list, n);
    weft_store_close(store);
    return count;
}

/* The sampling decision and what the run buffers did with it (one line, the summary's). */
static void
print_sampling(const struct weft_run_result *r, const struct weft_tail *tail)
{
    struct weft_tail_stats st;

    if (!r->is_trace_sampled) {
        return;
    }
    weft_tail_get_stats(tail, &st);
    printf("  sampling: trace %s (rule %s); spans kept %llu, sampled out %llu",
           r->is_trace_kept ? "kept" : "not kept", r->sampling_rule,
           (unsigned long long)st.spans_kept, (unsigned long long)st.spans_sampled_out);
    if (st.spans_failed > 0) {
        printf(", %llu failed", (unsigned long long)st.spans_failed);
    }
    if (st.traces_forced > 0) {
        printf(", %llu undecided traces sent whole", (unsigned long long)st.traces_forced);
    }
    putchar('\n');
}

static json_t *
sampling_json(const struct weft_run_result *r, const struct weft_tail *tail)
{
    struct weft_tail_stats st;

    if (!r->is_trace_sampled) {
        return json_null();
    }
    weft_tail_get_stats(tail, &st);
    return json_pack("{s:b, s:s, s:I, s:I, s:I, s:I, s:I}", "kept", r->is_trace_kept, "rule",
                     r->sampling_rule, "spans_kept", (json_int_t)st.spans_kept, "spans_sampled_out",
                     (json_int_t)st.spans_sampled_out, "spans_failed", (json_int_t)st.spans_failed,
                     "spans_spilled", (json_int_t)st.spans_spilled, "traces_forced",
                     (json_int_t)st.traces_forced);
}

static void
print_summary(const struct weft_run_result *r,
              const struct weft_trace_stats *ts,
              const struct weft_tail *tail)
{
    char dur[32];

    cli_format_duration(r->duration_ns, dur, sizeof(dur));
    printf("run %s: %s in %s (%zu decisions", r->run_id, weft_run_status_name(r->status), dur,
           r->decision_count);
    if (r->iterations != r->decision_count) { /* parallel decisions start several steps */
        printf(", %zu iterations", r->iterations);
    }
    printf(")\n");
    printf("  reason:  ");
    print_reason(r->reason != NULL ? r->reason : "");
    printf("\n  session: %s\n", r->session_id);
    if (r->route != NULL) {
        printf("  route:   %s\n", r->route);
    }
    printf("  steps:   ");
    print_steps_line(r);
    printf("\n  loops:  ");
    for (int k = 0; k < WEFT_LOOP_KIND_COUNT; k++) {
        if (r->loops[k] > 0) {
            printf(" %s=%zu", weft_loop_kind_name((weft_loop_kind)k), r->loops[k]);
        }
    }
    printf("\n  verdicts:");
    for (size_t i = 0; i < r->verdict_count; i++) {
        printf(" %s", r->verdicts[i]);
    }
    printf("\n  reward:  %.2f", r->reward);
    if (r->corrections > 0) {
        printf(" (%zu correction%s)", r->corrections, r->corrections == 1 ? "" : "s");
    }
    printf("\n  llm calls: %zu, tool calls: %zu, tokens: %lld in / %lld out, cost: $%.6f\n",
           r->llm_calls, r->tool_calls, (long long)r->input_tokens, (long long)r->output_tokens,
           r->cost_usd);
    if (r->trace_id[0] != '\0') {
        printf("  trace:   %s\n", r->trace_id);
    }
    print_sampling(r, tail);
    /* Telemetry that did not make it is never silent. A distributed run's trace also holds
     * the workers' spans: both counts, so that the summary agrees with the tree below it ("so
     * far": a worker's last spans can reach the store a batch delay after its result). */
    size_t in_trace = stored_span_count(r->trace_id);
    if (in_trace > ts->spans_ended) {
        printf("  spans:   %zu in the run's trace so far (%llu recorded here, %llu by workers), "
               "%llu dropped, %llu failed to export\n",
               in_trace, (unsigned long long)ts->spans_ended,
               (unsigned long long)(in_trace - ts->spans_ended),
               (unsigned long long)ts->spans_dropped, (unsigned long long)ts->spans_failed);
    } else {
        printf("  spans:   %llu recorded, %llu dropped, %llu failed to export\n",
               (unsigned long long)ts->spans_ended, (unsigned long long)ts->spans_dropped,
               (unsigned long long)ts->spans_failed);
    }
    if (r->output != NULL) {
        printf("  output:  ");
        put_output(r->output);
        putchar('\n');
    }
}

/* What each exporter did with the run's spans. */
static json_t *
exporters_json(struct weft_provider *provider)
{
    json_t *list = json_array();

    for (size_t i = 0; weft_provider_processor(provider, i) != NULL; i++) {
        struct weft_processor *proc = weft_provider_processor(provider, i);
        struct weft_processor_stats ps;
        char error[320];

        weft_processor_get_stats(proc, &ps);
        weft_processor_last_error(proc, error, sizeof(error));
        json_array_append_new(
            list,
            json_pack("{s:s, s:I, s:I, s:I, s:I, s:s?}", "name", weft_processor_exporter_name(proc),
                      "delivered", (json_int_t)ps.exported, "failed", (json_int_t)ps.failed,
                      "dropped", (json_int_t)ps.dropped, "spooled", (json_int_t)ps.spooled,
                      "last_error", ps.failed + ps.dropped > 0 && error[0] != '\0' ? error : NULL));
    }
    return list;
}

/* The exporter's spool, when it has one that did anything: what went there, what was sent
 * from it, what it lost and what still waits on disk. */
static void
print_spool(const struct weft_processor *proc, const struct weft_processor_stats *ps)
{
    struct weft_spool_stats ss;
    uint64_t lost = 0;

    weft_processor_spool_stats(proc, &ss);
    if (!ss.is_enabled) {
        return;
    }
    lost = ss.spans_dropped + ss.spans_corrupt + ss.spans_rejected + ss.spans_lost;
    if (ps->spooled == 0 && ss.spans_drained == 0 && ss.spans == 0 && lost == 0) {
        return;
    }
    printf(", %llu spooled (spool: %llu sent", (unsigned long long)ps->spooled,
           (unsigned long long)ss.spans_drained);
    if (lost > 0) {
        printf(", %llu lost", (unsigned long long)lost);
    }
    printf(", %llu waiting on disk)", (unsigned long long)ss.spans);
}

/* The summary's per-exporter lines: delivered, failed and dropped, and the last failure. With
 * tail sampling (@p is_sampled) an exporter "delivers" to its run buffer: the sampling line
 * says what then reached the exporters. */
static void
print_exporters(struct weft_provider *provider, bool is_sampled)
{
    for (size_t i = 0; weft_provider_processor(provider, i) != NULL; i++) {
        struct weft_processor *proc = weft_provider_processor(provider, i);
        struct weft_processor_stats ps;
        char error[320];

        weft_processor_get_stats(proc, &ps);
        printf("  %s %s: %llu %s", i == 0 ? "export: " : "        ",
               weft_processor_exporter_name(proc), (unsigned long long)ps.exported,
               is_sampled ? "taken by tail sampling" : "delivered");
        if (ps.failed > 0) {
            printf(", %llu failed", (unsigned long long)ps.failed);
        }
        if (ps.dropped > 0) {
            printf(", %llu dropped", (unsigned long long)ps.dropped);
        }
        print_spool(proc, &ps);
        if (ps.failed + ps.dropped > 0 &&
            weft_processor_last_error(proc, error, sizeof(error)) > 0) {
            printf(" (");
            cli_put_clean(stdout, error, 200);
            putchar(')');
        }
        putchar('\n');
    }
}

/* Say on stderr which exporters lost spans and why (also under --json and --quiet).
 * @return true when one of them delivered none of its spans: the run's telemetry is lost. */
static bool
report_export_failures(const char *cmd, struct weft_provider *provider)
{
    bool is_total_loss = false;

    for (size_t i = 0; weft_provider_processor(provider, i) != NULL; i++) {
        struct weft_processor *proc = weft_provider_processor(provider, i);
        struct weft_processor_stats ps;
        char error[320] = "";

        weft_processor_get_stats(proc, &ps);
        if (ps.failed + ps.dropped == 0) {
            continue;
        }
        /* Spooled spans are not lost: they wait on disk for the endpoint. */
        is_total_loss = is_total_loss || ps.exported + ps.spooled == 0;
        weft_processor_last_error(proc, error, sizeof(error));
        fprintf(stderr, "weft %s: exporter %s delivered %llu of %llu spans", cmd,
                weft_processor_exporter_name(proc), (unsigned long long)ps.exported,
                (unsigned long long)(ps.exported + ps.failed + ps.dropped + ps.spooled));
        if (error[0] != '\0') {
            fputs(": ", stderr);
            cli_put_clean(stderr, error, 300);
        }
        fputc('\n', stderr);
    }
    return is_total_loss;
}

/* Kept spans the exporters behind tail sampling did not take are counted by the run buffers,
 * not by the processors (which handed them over): say so on stderr. @return true when kept spans
 * failed and none was delivered: the trace is lost. */
static bool
report_sampling_failures(const char *cmd, const struct cli_telemetry *t)
{
    struct weft_tail_stats st;

    weft_tail_get_stats(t->tail, &st);
    if (st.spans_failed == 0) {
        return false;
    }
    /* Which exporter and why: the WARN line its buffer logged when the export failed. */
    fprintf(stderr,
            "weft %s: tail sampling: %llu of %llu kept spans did not reach their exporter (see "
            "the warning above)\n",
            cmd, (unsigned long long)st.spans_failed,
            (unsigned long long)(st.spans_failed + st.spans_kept));
    return st.spans_kept == 0;
}

/* Spans handed to the processors that none has delivered, failed or dropped yet. */
static uint64_t
spans_pending(struct weft_provider *provider)
{
    struct weft_trace_stats ts;
    uint64_t handed = 0;
    uint64_t settled = 0;

    weft_provider_get_stats(provider, &ts);
    for (size_t i = 0; weft_provider_processor(provider, i) != NULL; i++) {
        handed += ts.spans_ended; /* every processor receives every ended span */
    }
    settled = ts.spans_exported + ts.spans_failed + ts.spans_dropped + ts.spans_spooled;
    return handed > settled ? handed - settled : 0;
}

struct flush_job {
    struct weft_provider *provider;
    atomic_bool is_done; /* set by the flush thread, read by the main thread */
};

static void *
flush_thread(void *arg)
{
    struct flush_job *job = arg;

    (void)weft_provider_shutdown(job->provider, SHUTDOWN_MS);
    atomic_store(&job->is_done, true);
    sem_post(&flush_wake);
    return NULL;
}

/* Deliver the telemetry still on its way (at most SHUTDOWN_MS) on a helper thread, so that a
 * second SIGINT can end the wait: then print one line with the spans lost and exit 130. */
static void
finish_telemetry(const char *cmd, struct weft_provider *provider)
{
    struct flush_job job = {.provider = provider};
    pthread_t thread;
    sigset_t block;
    sigset_t old;
    bool is_hinted = false;
    int rc = 0;

    atomic_init(&job.is_done, false);
    if (sem_init(&flush_wake, 0, 0) != 0) {
        (void)weft_provider_shutdown(provider, SHUTDOWN_MS);
        phase = PHASE_AFTER;
        return;
    }
    phase = PHASE_FLUSHING;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old); /* the flush thread never takes the signal */
    rc = pthread_create(&thread, NULL, flush_thread, &job);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        phase = PHASE_AFTER;
        (void)weft_provider_shutdown(provider, SHUTDOWN_MS);
        return;
    }
    while (!atomic_load(&job.is_done)) {
        while (sem_wait(&flush_wake) != 0 && errno == EINTR) {
        }
        if (atomic_load(&job.is_done)) {
            break;
        }
        if (interrupts >= 2) {
            fflush(stdout);
            fprintf(stderr,
                    "weft %s: interrupted again: exiting now; %llu spans not yet exported are "
                    "lost\n",
                    cmd, (unsigned long long)spans_pending(provider));
            _exit(EXIT_INTERRUPTED);
        }
        if (interrupts == 1 && !is_hinted) {
            fprintf(stderr,
                    "weft %s: delivering telemetry (at most %u s); interrupt again to exit now\n",
                    cmd, SHUTDOWN_MS / 1000u);
            is_hinted = true;
        }
    }
    pthread_join(thread, NULL);
    phase = PHASE_AFTER;
}

static void
print_json(const struct weft_run_result *r,
           const struct weft_trace_stats *ts,
           const struct cli_telemetry *t,
           json_t *tool_errors)
{
    struct weft_provider *provider = t->provider;
    json_t *o = json_object();
    json_t *steps = json_array();
    json_t *decisions = json_array();
    json_t *loops = json_object();
    json_t *verdicts = json_array();
    char *text = NULL;

    for (size_t i = 0; i < r->step_count; i++) {
        const struct weft_run_step *s = &r->steps[i];
        json_t *js =
            json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:s?, s:s?, s:s?}", "id", s->id, "agent",
                      s->agent, "executor", s->executor, "task", s->task, "depends_on",
                      s->depends_on, "status", s->status, "attempts", (int)s->attempts, "result",
                      s->result, "requested_by", s->requested_by, "parent", s->parent);
        if (js != NULL && s->has_reward) {
            json_object_set_new(js, "reward", json_real(s->reward));
        }
        json_array_append_new(steps, js);
    }
    for (size_t i = 0; i < r->decision_count; i++) {
        json_array_append_new(decisions,
                              json_pack("{s:s, s:s, s:s}", "layer", r->decisions[i].layer, "next",
                                        r->decisions[i].next, "reason", r->decisions[i].reason));
    }
    for (int k = 0; k < WEFT_LOOP_KIND_COUNT; k++) {
        json_object_set_new(loops, weft_loop_kind_name((weft_loop_kind)k),
                            json_integer((json_int_t)r->loops[k]));
    }
    for (size_t i = 0; i < r->verdict_count; i++) {
        json_array_append_new(verdicts, json_string(r->verdicts[i]));
    }
    json_object_set_new(o, "run_id", json_string(r->run_id));
    json_object_set_new(o, "session_id", json_string(r->session_id));
    json_object_set_new(o, "status", json_string(weft_run_status_name(r->status)));
    json_object_set_new(o, "reason", json_string(r->reason != NULL ? r->reason : ""));
    json_object_set_new(o, "trace_id", json_string(r->trace_id));
    json_object_set_new(o, "route", r->route != NULL ? json_string(r->route) : json_null());
    json_object_set_new(o, "output", r->output != NULL ? json_string(r->output) : json_null());
    json_object_set_new(o, "iterations", json_integer((json_int_t)r->iterations));
    json_object_set_new(o, "llm_calls", json_integer((json_int_t)r->llm_calls));
    json_object_set_new(o, "tool_calls", json_integer((json_int_t)r->tool_calls));
    json_object_set_new(o, "input_tokens", json_integer(r->input_tokens));
    json_object_set_new(o, "output_tokens", json_integer(r->output_tokens));
    json_object_set_new(o, "cost_usd", json_real(r->cost_usd));
    json_object_set_new(o, "duration_ms", json_real((double)r->duration_ns / 1e6));
    json_object_set_new(o, "reward", json_real(r->reward));
    json_object_set_new(o, "corrections", json_integer((json_int_t)r->corrections));
    json_object_set_new(o, "loops", loops);
    json_object_set_new(o, "steps", steps);
    json_object_set_new(o, "decisions", decisions);
    json_object_set_new(o, "verdicts", verdicts);
    json_object_set_new(o, "tool_errors", tool_errors != NULL ? tool_errors : json_array());
    json_object_set_new(o, "spans",
                        json_pack("{s:I, s:I, s:I, s:I}", "recorded", (json_int_t)ts->spans_ended,
                                  "dropped", (json_int_t)ts->spans_dropped, "failed",
                                  (json_int_t)ts->spans_failed, "in_trace",
                                  (json_int_t)stored_span_count(r->trace_id)));
    json_object_set_new(o, "exporters", exporters_json(provider));
    json_object_set_new(o, "sampling", sampling_json(r, t->tail));
    if (r->replay != NULL) {
        json_object_set_new(o, "replay", weft__doc_replay(r->replay));
    }
    if (r->reused_steps > 0) {
        json_object_set_new(o, "reused_steps", json_integer((json_int_t)r->reused_steps));
    }
    text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text != NULL) {
        /* Belt, as for the summary's output line: configured secrets never reach stdout. */
        char *scrubbed = NULL;
        if (weft_secrets_scrub(text, strlen(text), &scrubbed) == WEFT_OK) {
            puts(scrubbed != NULL ? scrubbed : text);
        }
        weft_secrets_text_free(scrubbed);
        free(text);
    }
    json_decref(o);
}

static void
print_trace(const char *trace_id, bool is_color)
{
    struct weft_store *store = NULL;
    struct weft_trace *trace = NULL;
    char path[4096];

    if (weft_store_default_path(path, sizeof(path)) != WEFT_OK ||
        weft_store_open(path, &store) != WEFT_OK) {
        return;
    }
    if (weft_store_load_trace(store, trace_id, &trace) == WEFT_OK) {
        putchar('\n');
        weft_trace_render(trace, stdout,
                          WEFT_RENDER_ATTRS | WEFT_RENDER_EVENTS | WEFT_RENDER_LINKS |
                              (is_color ? WEFT_RENDER_COLOR : 0u));
    }
    weft_trace_free(trace);
    weft_store_close(store);
}

struct collab {
    char handoffs[2048];
    size_t handoffs_len;
    char agents[2048];
    size_t agents_len;
    json_t *tool_errors_json; /* [{agent, kind, count}], or NULL when not wanted */
};

static const char *
attr_of(const struct weft_series_view *s, const char *key)
{
    for (size_t i = 0; i < s->attr_count; i++) {
        if (strcmp(s->attrs[i].key, key) == 0 && s->attrs[i].value.type == WEFT_VALUE_STRING) {
            return s->attrs[i].value.u.str;
        }
    }
    return "";
}

static bool
collect_collab(const struct weft_instrument_view *in, const struct weft_series_view *s, void *ud)
{
    struct collab *c = ud;

    if (s == NULL) {
        return true;
    }
    if (strcmp(in->name, "weft.handoffs") == 0 && c->handoffs_len < sizeof(c->handoffs) - 128) {
        c->handoffs_len +=
            (size_t)snprintf(c->handoffs + c->handoffs_len, sizeof(c->handoffs) - c->handoffs_len,
                             " %s->%s x%.0f", attr_of(s, "from"), attr_of(s, "to"), s->value);
    } else if (strcmp(in->name, "weft.agent.invocations") == 0 &&
               c->agents_len < sizeof(c->agents) - 128) {
        c->agents_len += (size_t)snprintf(
            c->agents + c->agents_len, sizeof(c->agents) - c->agents_len, " %s:%s=%.0f",
            attr_of(s, "gen_ai.agent.name"), attr_of(s, "outcome"), s->value);
    } else if (strcmp(in->name, "weft.tool.errors") == 0 && s->value > 0) {
        /* The same counter weft serve's /metrics shows (weft_tool_errors_total). */
        if (c->tool_errors_json != NULL) {
            json_array_append_new(c->tool_errors_json, json_pack("{s:s, s:s, s:I}", "agent",
                                                                 attr_of(s, "gen_ai.agent.name"),
                                                                 "kind", attr_of(s, "error.type"),
                                                                 "count", (json_int_t)s->value));
        }
    }
    return true;
}

/* Steps without an agent (command, file_writer, http_call) are not agent invocations, so the
 * meter's weft.agent.invocations leaves them out, yet they are the run's work as much as the
 * agents' steps are: add them from the stored steps, as `run show` lists them, named after their
 * executor. A completed step that took N attempts succeeded once after N - 1 failures. */
static void
add_executor_steps(struct collab *c, const char *state, const char *run_id)
{
    struct weft_run_details *d = NULL;

    if (run_id == NULL || weft_run_load(state, run_id, &d) != WEFT_OK) {
        return;
    }
    for (size_t i = 0; i < d->step_count; i++) {
        const struct weft_run_step *st = &d->steps[i];
        unsigned ok = 0;
        unsigned failed = 0;
        bool is_seen = false;

        if (st->executor == NULL || strcmp(st->executor, "agent") == 0) {
            continue;
        }
        for (size_t j = 0; j < i && !is_seen; j++) {
            const char *other = d->steps[j].executor;

            is_seen = other != NULL && strcmp(other, st->executor) == 0;
        }
        if (is_seen) {
            continue; /* counted with the first step of its executor */
        }
        for (size_t j = i; j < d->step_count; j++) {
            const struct weft_run_step *o = &d->steps[j];
            unsigned tries = o->attempts > 0 ? o->attempts : 1;

            if (o->executor == NULL || strcmp(o->executor, st->executor) != 0) {
                continue;
            }
            if (strcmp(o->status, "completed") == 0) {
                ok++;
                failed += tries - 1;
            } else if (strcmp(o->status, "failed") == 0) {
                failed += tries;
            }
        }
        if (ok > 0 && c->agents_len < sizeof(c->agents) - 128) {
            c->agents_len +=
                (size_t)snprintf(c->agents + c->agents_len, sizeof(c->agents) - c->agents_len,
                                 " %s:success=%u", st->executor, ok);
        }
        if (failed > 0 && c->agents_len < sizeof(c->agents) - 128) {
            c->agents_len +=
                (size_t)snprintf(c->agents + c->agents_len, sizeof(c->agents) - c->agents_len,
                                 " %s:failure=%u", st->executor, failed);
        }
    }
    weft_run_details_free(d);
}

/* The collaboration summary: the hand-off matrix and agent outcomes from the run's meter (and
 * the steps without an agent from the stored run), and the failed tool calls of @p tool_errors
 * (run_tool_errors()). */
static void
print_collaboration(struct weft_meter *meter,
                    const json_t *tool_errors,
                    const char *state,
                    const char *run_id)
{
    struct collab c;
    size_t i = 0;
    const json_t *row = NULL;

    memset(&c, 0, sizeof(c));
    if (weft_meter_collect(meter, collect_collab, &c) != WEFT_OK) {
        return;
    }
    add_executor_steps(&c, state, run_id);
    printf("  handoffs:%s\n", c.handoffs_len > 0 ? c.handoffs : " none");
    printf("  agents:  %s\n", c.agents_len > 0 ? c.agents + 1 : "none");
    printf("  tool errors:");
    json_array_foreach(tool_errors, i, row)
    {
        printf(" %s:%s=%lld", json_string_value(json_object_get(row, "agent")),
               json_string_value(json_object_get(row, "kind")),
               (long long)json_integer_value(json_object_get(row, "count")));
    }
    printf("%s\n", json_array_size(tool_errors) > 0 ? "" : " none");
}

/* Failed tool calls by agent and kind ([{agent, kind, count}], new): from the run's stored
 * steps, as `weft run show`, --json of it and the explorer count them, so that a run whose
 * steps ran on `weft worker` processes (--executor amqp) shows the calls made there too; from
 * the run's meter (the counter /metrics shows) when the run cannot be read back. */
static json_t *
run_tool_errors(const char *state, const char *run_id, struct weft_meter *meter)
{
    struct weft_run_details *d = NULL;
    struct collab c;

    if (run_id != NULL && weft_run_load(state, run_id, &d) == WEFT_OK) {
        json_t *list = weft__doc_tool_errors(d);
        weft_run_details_free(d);
        if (list != NULL) {
            return list;
        }
    }
    memset(&c, 0, sizeof(c));
    c.tool_errors_json = json_array();
    if (c.tool_errors_json != NULL && weft_meter_collect(meter, collect_collab, &c) != WEFT_OK) {
        json_array_clear(c.tool_errors_json);
    }
    return c.tool_errors_json;
}

/* The local store always, plus what OTEL_TRACES_EXPORTER names. The store comes first: the
 * provider shuts its processors down in order, so the local trace is complete before a slow
 * collector uses up the time left (or a second SIGINT cuts the wait). */
static weft_err
setup_provider(const char *instance_id,
               struct weft_tail *tail,
               bool is_tail_store_only,
               struct weft_provider **out)
{
    const char *env = getenv("OTEL_TRACES_EXPORTER");
    struct weft_provider_options popts = {.service_name = NULL};
    struct weft_attr instance = weft_attr_str("service.instance.id", instance_id);

    if (instance_id != NULL) {
        popts.resource_attrs = &instance;
        popts.resource_attr_count = 1;
    }
    struct weft_provider *provider = NULL;
    weft_err err = WEFT_OK;

    if (getenv("OTEL_SERVICE_NAME") == NULL) {
        popts.service_name = "weft";
    }
    err = weft_provider_new(&popts, &provider);
    if (err != WEFT_OK) {
        return err;
    }
    if (env != NULL && env[0] != '\0' && strstr(env, "store") == NULL) {
        struct weft_exporter *exporter = NULL;
        struct weft_processor *proc = NULL;
        err = weft_store_exporter_new(NULL, &exporter);
        if (err == WEFT_OK && tail != NULL) {
            err = weft_tail_wrap(tail, exporter, &exporter);
        }
        if (err == WEFT_OK) {
            err = weft_batch_processor_new(exporter, NULL, &proc);
        }
        if (err == WEFT_OK) {
            err = weft_provider_add_processor_take(provider, proc);
        }
    }
    if (err == WEFT_OK) {
        err = weft_provider_add_env_exporters_tail(provider, "store", tail,
                                                   is_tail_store_only ? "store" : NULL);
    }
    if (err != WEFT_OK) {
        weft_provider_free(provider);
        return err;
    }
    *out = provider;
    return WEFT_OK;
}

/* A step was saved: write the spans ended so far to the local store, so that a SIGKILL loses
 * none of them (docs/durability.md). Only the store: a network exporter is never waited on. */
static void
on_checkpoint(void *user_data)
{
    (void)weft_processor_force_flush(user_data, CHECKPOINT_FLUSH_MS);
}

static struct weft_processor *
store_processor(struct weft_provider *provider)
{
    for (size_t i = 0; weft_provider_processor(provider, i) != NULL; i++) {
        struct weft_processor *proc = weft_provider_processor(provider, i);

        if (strcmp(weft_processor_exporter_name(proc), "store") == 0) {
            return proc;
        }
    }
    return NULL;
}

/* OTEL_METRICS_EXPORTER: a comma list of otlp, prometheus (served by --metrics-addr) and
 * none; unset means none, since a run without a collector should not retry into the void. */
static bool
metrics_exporter_is_otlp(const char *cmd)
{
    const char *v = getenv("OTEL_METRICS_EXPORTER");
    bool is_otlp = false;

    while (v != NULL && *v != '\0') {
        size_t n = strcspn(v, ",");
        size_t start = 0;

        while (start < n && v[start] == ' ') {
            start++;
        }
        while (n > start && v[n - 1] == ' ') {
            n--;
        }
        if (n - start == 4 && strncmp(v + start, "otlp", 4) == 0) {
            is_otlp = true;
        } else if (!(n - start == 4 && strncmp(v + start, "none", 4) == 0) &&
                   !(n - start == 10 && strncmp(v + start, "prometheus", 10) == 0) && n > start) {
            fprintf(stderr,
                    "weft %s: OTEL_METRICS_EXPORTER: unknown exporter \"%.*s\" ignored "
                    "(expected otlp, prometheus or none)\n",
                    cmd, (int)(n - start), v + start);
        }
        v += strcspn(v, ",");
        v += *v == ',' ? 1 : 0;
    }
    return is_otlp;
}

#define MAX_TAGS 16

/* Split the comma list @p text (modified in place) into at most MAX_TAGS trimmed, non-empty
 * tags. @return the count, or -1 when there are more. */
static int
split_tags(char *text, char **tags)
{
    int n = 0;

    for (char *tok = strtok(text, ","); tok != NULL; tok = strtok(NULL, ",")) {
        char *end = tok + strlen(tok);

        while (*tok == ' ') {
            tok++;
        }
        while (end > tok && end[-1] == ' ') {
            *--end = '\0';
        }
        if (*tok == '\0') {
            continue;
        }
        if (n == MAX_TAGS) {
            return -1;
        }
        tags[n++] = tok;
    }
    return n;
}

void
cli_telemetry_stop(struct cli_telemetry *t)
{
    weft_metric_reader_stop(t->reader); /* one last export with the run's final numbers */
    weft_metrics_server_stop(t->server);
    weft_meter_free(t->meter);
    weft_provider_free(t->provider);
    weft_tail_unref(t->tail); /* after the provider: its wrappers held references */
    memset(t, 0, sizeof(*t));
}

/* The provider with its exporters, and a meter that observes it. @return CLI_EXIT_OK or the
 * exit status after saying what is wrong. */
int
cli_start_tracing(const char *cmd, const char *instance_id, struct cli_telemetry *t)
{
    weft_err err = setup_provider(instance_id, t->tail, t->is_tail_store_only, &t->provider);

    if (err == WEFT_OK) {
        /* Metrics and traces describe the same service. */
        const struct weft_value *service = weft_provider_resource_get(t->provider, "service.name");
        struct weft_meter_options mo = {0};

        if (service != NULL && service->type == WEFT_VALUE_STRING) {
            mo.service_name = service->u.str;
        }
        err = weft_meter_new(&mo, &t->meter);
    }
    if (err == WEFT_OK) {
        err = weft_runtime_metrics_register(t->meter);
    }
    if (err == WEFT_OK) {
        err = weft_meter_observe_provider(t->meter, t->provider);
    }
    if (err == WEFT_OK && t->tail != NULL) {
        err = weft_tail_observe(t->tail, t->meter); /* spans held, spilled, sampled out */
    }
    if (err != WEFT_OK) {
        /* The exporter that failed said why on the line above (e.g. a partial Langfuse key
         * pair, or a store or traces file that cannot be created where WEFT_HOME or
         * WEFT_TRACES_FILE point): refuse to run rather than lose the run's telemetry. */
        bool is_config = err == WEFT_EINVAL || err == WEFT_EIO;

        if (is_config) {
            fprintf(stderr, "weft %s: not started: fix the exporter configuration above\n", cmd);
        } else {
            fprintf(stderr, "weft %s: tracing set-up failed: %s\n", cmd, weft_strerror(err));
        }
        return is_config ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* The /metrics server (--metrics-addr) and the OTLP metric reader (OTEL_METRICS_EXPORTER).
 * @return CLI_EXIT_OK or the exit status after saying what is wrong. */
int
cli_start_metrics(const char *cmd, const char *metrics_addr, struct cli_telemetry *t)
{
    weft_err err = WEFT_OK;

    if (metrics_addr != NULL) {
        err = weft_metrics_server_start(t->meter, metrics_addr, &t->server);
        if (err != WEFT_OK) {
            fprintf(stderr, "weft %s: --metrics-addr %s: %s\n", cmd, metrics_addr,
                    err == WEFT_EINVAL ? "expected HOST:PORT (IPv4)" : "cannot listen there");
            return CLI_EXIT_USAGE;
        }
        fprintf(stderr, "weft %s: serving metrics on port %u (/metrics, /healthz)\n", cmd,
                weft_metrics_server_port(t->server));
    }
    if (metrics_exporter_is_otlp(cmd)) {
        struct weft_metric_reader_options mo = {0};
        const char *timeout = getenv("OTEL_METRIC_EXPORT_TIMEOUT");

        /* The last export at exit waits no longer than the span pipeline's shutdown does,
         * unless the user asked for another bound. */
        if (timeout == NULL || timeout[0] == '\0') {
            mo.timeout_ms = SHUTDOWN_MS;
        }
        err = weft_otlp_metric_reader_start(t->meter, &mo, &t->reader);
        if (err != WEFT_OK) {
            fprintf(stderr, "weft %s: OTEL_METRICS_EXPORTER=otlp: %s\n", cmd,
                    err == WEFT_EINVAL ? "fix the metrics exporter configuration above"
                                       : weft_strerror(err));
            return err == WEFT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
        }
    }
    return CLI_EXIT_OK;
}

static void
fill_run_options(struct weft_run_options *ro,
                 const struct cli_run_flags *fl,
                 const struct cli_telemetry *t,
                 char **tags,
                 size_t tag_count,
                 struct cli_progress *progress)
{
    memset(ro, 0, sizeof(*ro));
    ro->provider = t->provider;
    ro->input = fl->input;
    ro->session_id = fl->session;
    ro->user_id = fl->user;
    ro->tags = (const char *const *)tags;
    ro->tag_count = tag_count;
    ro->record_path = fl->record;
    ro->replay_path = fl->replay;
    ro->workspace = fl->workspace;
    ro->state_path = fl->state;
    ro->resume_run_id = fl->resume;
    ro->meter = t->meter;
    ro->capture_content = fl->is_capture ? 1 : -1;
    ro->progress = cli_on_progress;
    ro->progress_user_data = progress;
    ro->abort_flag = &abort_requested;
    ro->resume_force = fl->is_force;
    ro->replay_run_id = fl->replay_of;
    ro->fork_run_id = fl->fork_of;
    ro->fork_from_step = fl->fork_from;
    ro->fork_task = fl->fork_task;
    ro->fork_answer = fl->fork_answer;
    ro->snapshot_root = fl->snapshot_root;
    ro->checkpoint_user_data = store_processor(t->provider);
    ro->checkpoint = ro->checkpoint_user_data != NULL ? on_checkpoint : NULL;
}

/* After the run: flush the telemetry, then the summary (or JSON) and the trace.
 * @return the command's exit status. */
static int
report_run(const char *cmd,
           const struct cli_run_flags *fl,
           const struct cli_telemetry *t,
           weft_err err,
           const struct weft_run_result *result,
           const char *error)
{
    struct weft_trace_stats stats;
    bool is_telemetry_lost = false;
    int status = CLI_EXIT_OK;
    json_t *tool_errors = NULL;

    finish_telemetry(cmd, t->provider);
    weft_provider_get_stats(t->provider, &stats);
    if (err == WEFT_OK && result->run_id != NULL) {
        /* The run's stored span counts include the spans exported at shutdown, so `weft
         * serve` agrees with the summary below. */
        (void)weft_run_metrics_save_provider(fl->state, result->run_id, t->provider);
    }
    if (stats.spans_dropped > 0 || stats.spans_failed > 0) {
        fprintf(stderr, "weft %s: %llu spans dropped, %llu failed to export\n", cmd,
                (unsigned long long)stats.spans_dropped, (unsigned long long)stats.spans_failed);
    }
    is_telemetry_lost = report_export_failures(cmd, t->provider);
    is_telemetry_lost = report_sampling_failures(cmd, t) || is_telemetry_lost;
    if (err != WEFT_OK) {
        fprintf(stderr, "weft %s: %s\n", cmd, error);
        return err == WEFT_EINVAL || err == WEFT_ENOTFOUND || err == WEFT_EPARSE ? CLI_EXIT_USAGE
                                                                                 : CLI_EXIT_FAIL;
    }
    tool_errors = run_tool_errors(fl->state, result->run_id, t->meter);
    if (fl->is_json) {
        print_json(result, &stats, t, tool_errors);
        tool_errors = NULL; /* taken */
    } else {
        print_summary(result, &stats, t->tail);
        print_exporters(t->provider, t->tail != NULL);
        print_collaboration(t->meter, tool_errors, fl->state, result->run_id);
        if (result->is_trace_sampled && !result->is_trace_kept) {
            printf("trace not kept (rule %s)\n", result->sampling_rule);
        } else if (!fl->is_no_trace && result->trace_id[0] != '\0') {
            print_trace(result->trace_id, fl->is_color);
        }
        cli_print_replay(stdout, result->replay);
    }
    json_decref(tool_errors);
    if (result->replay != NULL) {
        /* A replay's verdict is the comparison: an identical replay of a failed run is 0. */
        return result->replay->is_identical ? CLI_EXIT_OK : CLI_EXIT_DIVERGED;
    }
    status = result->status == WEFT_RUN_COMPLETED ? CLI_EXIT_OK
             : result->status == WEFT_RUN_STUCK   ? CLI_EXIT_STUCK
                                                  : CLI_EXIT_FAIL;
    if (status == CLI_EXIT_OK && is_telemetry_lost) {
        fprintf(stderr,
                "weft %s: the run completed, but an exporter delivered none of its spans "
                "(exit status %d)\n",
                cmd, CLI_EXIT_TELEMETRY);
        status = CLI_EXIT_TELEMETRY;
    }
    return status;
}

/* The run on the executor the flags, the environment (WEFT_EXECUTOR) or nothing choose:
 * in process by default, RabbitMQ workers with "amqp" (docs/distributed.md). */
static weft_err
run_on_executor(const char *cmd,
                const struct cli_run_flags *fl,
                const struct weft_workflow *wf,
                const struct weft_run_options *ro,
                const struct cli_telemetry *t,
                struct weft_run_result **result,
                char *error,
                size_t error_len)
{
    const char *kind = fl->executor != NULL ? fl->executor : getenv("WEFT_EXECUTOR");
    const char *prefix = fl->queue_prefix != NULL ? fl->queue_prefix : getenv("WEFT_QUEUE_PREFIX");
    struct weft__amqp_executor_config cfg;
    struct weft__executor *ex = NULL;
    struct weft__amqp_executor_stats stats;
    size_t max_in_flight = wf->executor.max_in_flight != 0 ? wf->executor.max_in_flight : 64;
    weft_err err = WEFT_OK;

    /* A flag wins over the environment, which wins over the workflow's "executor". */
    if (kind == NULL || kind[0] == '\0') {
        kind = wf->executor.kind;
    }
    if (prefix == NULL) {
        prefix = wf->executor.queue_prefix;
    }

    if (kind == NULL || kind[0] == '\0' || strcmp(kind, "in_process") == 0) {
        return weft_run(wf, ro, result, error, error_len);
    }
    if (strcmp(kind, "amqp") != 0) {
        snprintf(error, error_len, "--executor: expected in_process or amqp, got \"%s\"", kind);
        return WEFT_EINVAL;
    }
    if (fl->max_in_flight != NULL && !cli_parse_size(fl->max_in_flight, 1, 256, &max_in_flight)) {
        snprintf(error, error_len, "--max-in-flight: expected an integer from 1 to 256");
        return WEFT_EINVAL;
    }
    memset(&cfg, 0, sizeof(cfg));
    cfg.url = fl->broker;
    cfg.prefix = prefix;
    cfg.max_in_flight = (unsigned)max_in_flight;
    cfg.provider = t->provider;
    cfg.meter = t->meter;
    cfg.run_id = fl->resume; /* results that came while the run was down wait for it */
    err = weft__amqp_executor_new(&cfg, wf, 30000, &ex, error, error_len);
    if (err != WEFT_OK) {
        return err;
    }
    err = weft__run_with_executor(wf, ro, ex, result, error, error_len);
    weft__amqp_executor_stats(ex, &stats);
    if (!fl->is_json) {
        fprintf(stderr,
                "weft %s: amqp executor: %llu task(s) published, %llu result(s), %llu "
                "duplicate(s), %llu redelivery(ies), %llu dead-lettered, %llu reconnect(s), "
                "%llu reclaimed, %llu refused, %llu from the shared queue, %llu foreign\n",
                cmd, (unsigned long long)stats.published, (unsigned long long)stats.results,
                (unsigned long long)stats.duplicates, (unsigned long long)stats.redeliveries,
                (unsigned long long)stats.dead_lettered, (unsigned long long)stats.reconnects,
                (unsigned long long)stats.reclaimed, (unsigned long long)stats.refused,
                (unsigned long long)stats.shared_results, (unsigned long long)stats.foreign);
    }
    ex->ops->destroy(ex);
    return err;
}

/* `--set KEY=VALUE` overrides, in order, on the loaded workflow. false: one was refused (said
 * on stderr). */
static bool
apply_sets(const char *cmd, struct weft_workflow *wf, const struct cli_run_flags *fl)
{
    for (size_t i = 0; i < fl->set_count; i++) {
        char key[256];
        const char *eq = strchr(fl->sets[i], '=');
        char error[300] = "";

        if (eq == NULL || eq == fl->sets[i] || (size_t)(eq - fl->sets[i]) >= sizeof(key)) {
            fprintf(stderr, "weft %s: --set: expected KEY=VALUE, got \"%s\"\n", cmd, fl->sets[i]);
            return false;
        }
        memcpy(key, fl->sets[i], (size_t)(eq - fl->sets[i]));
        key[eq - fl->sets[i]] = '\0';
        if (weft_workflow_set(wf, key, eq + 1, error, sizeof(error)) != WEFT_OK) {
            fprintf(stderr, "weft %s: %s\n", cmd, error[0] != '\0' ? error : "out of memory");
            return false;
        }
    }
    return true;
}

/* The tail-sampling policy: --sampling, else WEFT_SAMPLING, else the workflow's "sampling"
 * ("off" in either of the first two turns the workflow's off). *policy receives a parsed
 * --sampling/WEFT_SAMPLING (NULL when the workflow's applies); *tail the run buffers' shared
 * part when any policy applies. @return false after saying what is wrong. */
static bool
resolve_sampling(const char *cmd,
                 const struct cli_run_flags *fl,
                 const struct weft_workflow *wf,
                 struct weft_sampling_policy **policy,
                 struct weft_tail **tail)
{
    const char *text = fl->sampling != NULL ? fl->sampling : getenv("WEFT_SAMPLING");
    const char *from = fl->sampling != NULL ? "--sampling" : "WEFT_SAMPLING";
    bool is_set = text != NULL && text[0] != '\0';
    char why[256] = "";
    weft_err err = WEFT_OK;

    *policy = NULL;
    *tail = NULL;
    if (is_set) {
        err = weft_sampling_policy_parse(text, policy, why, sizeof(why));
        if (err != WEFT_OK) {
            fprintf(stderr, "weft %s: %s: %s\n", cmd, from,
                    err == WEFT_EPARSE ? why : weft_strerror(err));
            return false;
        }
    }
    if (*policy == NULL && (is_set || weft_workflow_sampling(wf) == NULL)) {
        return true; /* no policy, or "off": every trace is kept as it ends */
    }
    err = weft_tail_new(NULL, tail);
    if (err != WEFT_OK) {
        fprintf(stderr, "weft %s: tail sampling: %s\n", cmd, weft_strerror(err));
        weft_sampling_policy_free(*policy);
        *policy = NULL;
        return false;
    }
    return true;
}

int
cli_execute(const char *cmd, const char *workflow_path, const struct cli_run_flags *fl)
{
    struct weft_workflow *wf = NULL;
    struct weft_diags diags = {0};
    struct cli_telemetry t = {0};
    char *tag_text = NULL;
    char *tags[MAX_TAGS];
    size_t tag_count = 0;
    struct weft_run_options ro;
    struct weft_run_result *result = NULL;
    struct cli_progress progress;
    struct sigaction sa;
    char error[512] = "";
    weft_err err = WEFT_OK;
    int status = CLI_EXIT_OK;
    size_t max_parallel = 0;
    char abs_path[PATH_MAX];
    const char *load_path = workflow_path;
    struct weft_sampling_policy *sampling = NULL;

    if (fl->max_parallel != NULL && !cli_parse_size(fl->max_parallel, 1, 256, &max_parallel)) {
        fprintf(stderr, "weft %s: --max-parallel: expected an integer from 1 to 256\n", cmd);
        return CLI_EXIT_USAGE;
    }
    if (fl->tags != NULL) {
        int n = 0;

        tag_text = strdup(fl->tags);
        n = tag_text != NULL ? split_tags(tag_text, tags) : -1;
        if (n < 0) {
            fprintf(stderr, "weft %s: --tags: expected at most %d comma-separated tags\n", cmd,
                    MAX_TAGS);
            free(tag_text);
            return CLI_EXIT_USAGE;
        }
        tag_count = (size_t)n;
    }
    /* Loaded by its absolute path, which the run stores: replay, fork and resume then find the
     * file from any directory (a relative path only worked from the one the run started in). */
    if (realpath(workflow_path, abs_path) != NULL) {
        load_path = abs_path;
    }
    err = weft_workflow_load(load_path, &wf, &diags);
    if (err != WEFT_OK) {
        status = cli_print_diags(workflow_path, err, &diags);
        weft_diags_cleanup(&diags);
        free(tag_text);
        return status;
    }
    if (!apply_sets(cmd, wf, fl) || !resolve_sampling(cmd, fl, wf, &sampling, &t.tail)) {
        weft_workflow_free(wf);
        free(tag_text);
        return CLI_EXIT_USAGE;
    }
    {
        /* A distributed run's trace comes together at the collector, not here: only the
         * local store is sampled in this process (docs/sampling.md, "At ingest"). */
        const char *kind = fl->executor != NULL ? fl->executor : getenv("WEFT_EXECUTOR");

        t.is_tail_store_only = kind != NULL && strcmp(kind, "amqp") == 0;
    }
    status = cli_start_tracing(cmd, NULL, &t);
    if (status == CLI_EXIT_OK) {
        status = cli_start_metrics(cmd, fl->metrics_addr, &t);
    }
    if (status == CLI_EXIT_OK) {
        memset(&progress, 0, sizeof(progress));
        progress.is_tty = isatty(STDERR_FILENO) != 0;
        progress.is_quiet = fl->is_quiet;
        fill_run_options(&ro, fl, &t, tags, tag_count, &progress);
        ro.max_parallel = (unsigned)max_parallel;
        ro.sampling = sampling;
        ro.is_sampling_off = t.tail == NULL; /* "off", or no policy anywhere */
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        err = run_on_executor(cmd, fl, wf, &ro, &t, &result, error, sizeof(error));
        status = report_run(cmd, fl, &t, err, result, error);
        weft_run_result_free(result);
    }
    cli_telemetry_stop(&t);
    weft_sampling_policy_free(sampling);
    weft_workflow_free(wf);
    free(tag_text);
    return status;
}

/* ------------------------------------------------------------------------------------------ */
/* Recovery and a replay's verdict, shared by run, resume, replay, fork and the read commands */

struct recover_ctx {
    const char *cmd;
};

/* Close the root span of a run found interrupted in the local span store, as ERROR
 * "interrupted", and say that the run was interrupted. */
static void
close_interrupted(const struct weft_interrupted_run *run, void *user_data)
{
    const struct recover_ctx *c = user_data;

    if (run->trace_id != NULL && run->root_span_id != NULL && run->root_started_ns != 0) {
        struct weft_interrupted_span span;

        memset(&span, 0, sizeof(span));
        span.trace_id = run->trace_id;
        span.span_id = run->root_span_id;
        span.parent_span_id = run->root_parent_span_id;
        span.name = run->root_name;
        span.run_id = run->run_id;
        span.start_ns = run->root_started_ns;
        span.end_ns = run->ended_ns;
        if (weft_store_add_interrupted_span(NULL, &span) != WEFT_OK) {
            fprintf(stderr, "weft %s: run %s: cannot close its trace %s in the span store\n",
                    c->cmd, run->run_id, run->trace_id);
        }
        /* The agent spans of the steps in flight never ended either. */
        for (size_t i = 0; i < run->open_step_count; i++) {
            const struct weft_interrupted_step *s = &run->open_steps[i];
            span.span_id = s->span_id;
            span.parent_span_id = s->parent_span_id != NULL ? s->parent_span_id : run->root_span_id;
            span.name = s->name;
            span.start_ns = s->started_ns;
            if (weft_store_add_interrupted_span(NULL, &span) != WEFT_OK) {
                fprintf(stderr, "weft %s: run %s: cannot close span %s in the span store\n", c->cmd,
                        run->run_id, s->span_id);
            }
        }
    }
    fprintf(stderr,
            "weft %s: run %s (%s) was interrupted: its process (pid %lld on %s) died; "
            "weft resume %s continues it\n",
            c->cmd, run->run_id, run->workflow != NULL ? run->workflow : "?",
            (long long)run->owner_pid, run->owner_host != NULL ? run->owner_host : "?",
            run->run_id);
}

void
cli_recover(const char *cmd, const char *state)
{
    struct recover_ctx c = {cmd};

    /* A missing database has nothing to recover; a damaged one is reported by the command's
     * own read, with the file's name. */
    (void)weft_runs_recover(state, close_interrupted, &c, NULL);
}

void
cli_print_replay(FILE *out, const struct weft_replay_report *r)
{
    if (r == NULL) {
        return;
    }
    if (r->is_identical) {
        fprintf(out,
                "replay of run %s: identical (%zu of %zu LLM calls and %zu of %zu tool calls "
                "answered from the original)\n",
                r->original_run_id, r->llm_calls, r->llm_expected, r->tool_calls, r->tool_expected);
        return;
    }
    fprintf(out, "replay of run %s: DIVERGED at span ", r->original_run_id);
    cli_put_clean(out, r->span != NULL ? r->span : "?", 120);
    if (r->step_id != NULL) {
        fputs(" (step ", out);
        cli_put_clean(out, r->step_id, 80);
        fputs(")", out);
    }
    fprintf(out, ": %s\n  expected: ", r->what != NULL ? r->what : "?");
    cli_put_clean(out, r->expected != NULL ? r->expected : "(no call)", 200);
    fputs("\n  got:      ", out);
    cli_put_clean(out, r->got != NULL ? r->got : "(no call)", 200);
    fputs("\n", out);
}
