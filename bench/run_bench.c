/* bench/run_bench.c - the cost of tracing a workflow run.
 *
 * Runs a generated workflow of N agent steps (a chain: each step depends on the previous one;
 * each step is one supervisor decision, one agent attempt and one scripted LLM call, so four
 * spans in all) through weft_run() twice per round: with tracing on (batch processor into an
 * exporter that discards, so the export thread costs nothing extra) and with the SDK disabled
 * (OTEL_SDK_DISABLED=true). Both runs write the same state database.
 *
 * Prints machine-readable lines:
 *   run_bench case=traced steps=1000 us_per_step=...
 *   run_bench case=disabled steps=1000 us_per_step=...
 *   run_bench case=overhead steps=1000 us_per_step=... percent=...
 * Medians over the rounds. Usage: run_bench [steps] [rounds]  (defaults 1000 and 5)
 * A benchmark, not a test: it asserts nothing about speed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

static weft_err
discard_export(void *self,
               const struct weft_span_data *const *spans,
               size_t count,
               uint64_t deadline_ns,
               struct weft_export_result *result)
{
    (void)self;
    (void)spans;
    (void)count;
    (void)deadline_ns;
    (void)result;
    return WEFT_OK;
}

static const struct weft_exporter_ops discard_ops = {
    .name = "discard",
    .export_batch = discard_export,
};

static void
write_workflow(const char *dir, size_t steps)
{
    char path[512];
    FILE *f = NULL;

    snprintf(path, sizeof(path), "%s/wf.json", dir);
    f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    fprintf(f,
            "{\"name\": \"bench\", \"models\": {\"m\": {\"provider\": \"scripted\", \"model\": "
            "\"bench-model\", \"script\": \"script.json\"}},"
            " \"supervisor\": {\"max_iterations\": %zu},"
            " \"agents\": [{\"name\": \"worker\"}], \"plan\": [",
            steps + 10);
    for (size_t i = 1; i <= steps; i++) {
        if (i == 1) {
            fprintf(f, "{\"agent\": \"worker\", \"task\": \"step %zu\"}", i);
        } else {
            fprintf(f,
                    ", {\"agent\": \"worker\", \"task\": \"step %zu\", \"depends_on\": "
                    "[\"s%zu\"]}",
                    i, i - 1);
        }
    }
    fputs("]}\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/script.json", dir);
    f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    fputs("{\"version\": 1, \"responses\": {\"worker\": {\"act\": [", f);
    for (size_t i = 0; i < steps; i++) {
        fprintf(f,
                "%s{\"content\": \"result %zu\", \"usage\": {\"input_tokens\": 100, "
                "\"output_tokens\": 20}}",
                i > 0 ? ", " : "", i);
    }
    fputs("]}}}\n", f);
    fclose(f);
}

static double
one_run(const struct weft_workflow *wf, const char *dir, bool is_traced, size_t steps)
{
    struct weft_provider *provider = NULL;
    struct weft_exporter *ex = NULL;
    struct weft_processor *proc = NULL;
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    char state[512];
    char error[256];
    uint64_t t0 = 0;
    uint64_t t1 = 0;

    setenv("OTEL_SDK_DISABLED", is_traced ? "false" : "true", 1);
    if (weft_provider_new(NULL, &provider) != WEFT_OK) {
        fputs("run_bench: provider\n", stderr);
        exit(1);
    }
    if (is_traced && (weft_exporter_new(&discard_ops, NULL, &ex) != WEFT_OK ||
                      weft_batch_processor_new(ex, NULL, &proc) != WEFT_OK ||
                      weft_provider_add_processor_take(provider, proc) != WEFT_OK)) {
        fputs("run_bench: processor\n", stderr);
        exit(1);
    }
    snprintf(state, sizeof(state), "%s/state.db", dir);
    memset(&ro, 0, sizeof(ro));
    ro.provider = provider;
    ro.state_path = state;
    ro.workspace = dir;
    ro.capture_content = 0;
    t0 = weft_monotonic_ns();
    if (weft_run(wf, &ro, &r, error, sizeof(error)) != WEFT_OK || r->status != WEFT_RUN_COMPLETED ||
        r->step_count != steps) {
        fprintf(stderr, "run_bench: run failed: %s %s\n", error, r != NULL ? r->reason : "");
        exit(1);
    }
    t1 = weft_monotonic_ns();
    weft_run_result_free(r);
    weft_provider_shutdown(provider, 10000);
    weft_provider_free(provider);
    return (double)(t1 - t0) / 1000.0 / (double)steps;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

int
main(int argc, char **argv)
{
    size_t steps = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
    size_t rounds = argc > 2 ? strtoul(argv[2], NULL, 10) : 5;
    char dir[] = "/tmp/weft-run-bench-XXXXXX";
    char path[600];
    char cmd[600];
    struct weft_workflow *wf = NULL;
    struct weft_diags diags = {0};
    double *on = NULL;
    double *off = NULL;
    double on_med = 0;
    double off_med = 0;

    if (steps == 0 || rounds == 0 || mkdtemp(dir) == NULL) {
        fputs("usage: run_bench [steps] [rounds]\n", stderr);
        return 2;
    }
    write_workflow(dir, steps);
    snprintf(path, sizeof(path), "%s/wf.json", dir);
    if (weft_workflow_load(path, &wf, &diags) != WEFT_OK) {
        fputs("run_bench: workflow invalid\n", stderr);
        return 1;
    }
    on = calloc(rounds, sizeof(*on));
    off = calloc(rounds, sizeof(*off));
    one_run(wf, dir, true, steps); /* warm-up: page cache, SQLite file */
    for (size_t i = 0; i < rounds; i++) {
        /* Alternate the order so drift favours neither case. */
        if (i % 2 == 0) {
            on[i] = one_run(wf, dir, true, steps);
            off[i] = one_run(wf, dir, false, steps);
        } else {
            off[i] = one_run(wf, dir, false, steps);
            on[i] = one_run(wf, dir, true, steps);
        }
    }
    qsort(on, rounds, sizeof(*on), cmp_double);
    qsort(off, rounds, sizeof(*off), cmp_double);
    on_med = on[rounds / 2];
    off_med = off[rounds / 2];
    printf("run_bench case=traced steps=%zu spans_per_step=3 us_per_step=%.2f rounds=%zu\n", steps,
           on_med, rounds);
    printf("run_bench case=disabled steps=%zu us_per_step=%.2f rounds=%zu\n", steps, off_med,
           rounds);
    printf("run_bench case=overhead steps=%zu us_per_step=%.2f percent=%.1f\n", steps,
           on_med - off_med, off_med > 0 ? 100.0 * (on_med - off_med) / off_med : 0.0);
    weft_workflow_free(wf);
    free(on);
    free(off);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
