/* bench/flow_bench.c - the flow engine's scheduling cost and how it scales while steps wait.
 *
 * A generated flow: "split" fans out over 50 items (for_each), each item runs "work" then
 * "check", and check loops back to work once (so each item is four steps), then "join" fans
 * in: 202 steps in all. Every scripted LLM answer waits DELAY ms (an LLM call's I/O wait).
 * The flow runs with max_parallel 1, 2 and 8 (workers and items in flight), tracing on into
 * an exporter that discards.
 *
 * Prints machine-readable lines:
 *   flow_bench delay_ms=10 max_parallel=8 steps=202 wall_ms=... ideal_ms=... speedup=...
 *   flow_bench delay_ms=0 max_parallel=1 steps=202 us_per_step=...   (scheduling cost)
 * The scheduling cost is printed for 5, 50 and 1000 items (22, 202 and 4,002 steps): a
 * step's cost must not grow with the plan's size.
 * Usage: flow_bench [delay_ms]   (default 10). A benchmark, not a test: it asserts nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

/* Items of the fan-out; the scheduling-cost case also runs at several plan sizes. */
static int items = 50;

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

static const struct weft_exporter_ops discard_ops = {.name = "discard",
                                                     .export_batch = discard_export};

static void
write_files(const char *dir, unsigned parallel, unsigned delay)
{
    char path[512];
    FILE *f = NULL;

    snprintf(path, sizeof(path), "%s/wf.json", dir);
    f = fopen(path, "w");
    if (f == NULL) {
        exit(1);
    }
    fprintf(
        f,
        "{\"name\": \"flowbench\", \"models\": {\"m\": {\"provider\": \"scripted\","
        " \"script\": \"script.json\"}}, \"supervisor\": {\"max_iterations\": 10000},"
        " \"agents\": [{\"name\": \"split\"}, {\"name\": \"work\"}, {\"name\": \"check\"},"
        " {\"name\": \"join\"}], \"flow\": {\"max_parallel\": %u, \"nodes\": ["
        "{\"agent\": \"split\"}, {\"id\": \"each\", \"upstream_agents\": [\"split\"],"
        " \"for_each\": \"items\", \"max_parallel\": %u, \"nodes\": [{\"agent\": \"work\"},"
        " {\"agent\": \"check\", \"upstream_agents\": [\"work\"], \"loop_config\":"
        " {\"loop_back_to\": \"work\", \"condition_field\": \"again\", \"max_iterations\": 1}}]},"
        " {\"agent\": \"join\", \"upstream_agents\": [\"each\"]}]}}\n",
        parallel, parallel);
    fclose(f);
    snprintf(path, sizeof(path), "%s/script.json", dir);
    f = fopen(path, "w");
    if (f == NULL) {
        exit(1);
    }
    fputs("{\"responses\": {\"split\": {\"act\": [{\"content\": {\"items\": [", f);
    for (int i = 0; i < items; i++) {
        fprintf(f, "%s%d", i > 0 ? ", " : "", i);
    }
    fprintf(f, "]}}]}, \"join\": {\"act\": [{\"content\": \"done\"}]}, \"work\": {\"act\": [");
    for (int i = 0; i < 2 * items; i++) {
        fprintf(f, "%s{\"content\": \"w\", \"delay_ms\": %u}", i > 0 ? ", " : "", delay);
    }
    fputs("]}", f);
    for (int i = 0; i < items; i++) {
        fprintf(f,
                ", \"each[%d].check\": {\"act\": [{\"content\": {\"again\": true}, \"delay_ms\":"
                " %u}, {\"content\": {\"again\": false}, \"delay_ms\": %u}]}",
                i, delay, delay);
    }
    fputs("}}\n", f);
    fclose(f);
}

static double
run_once(const char *dir, unsigned parallel, unsigned delay, size_t *steps)
{
    struct weft_provider *provider = NULL;
    struct weft_exporter *ex = NULL;
    struct weft_processor *proc = NULL;
    struct weft_workflow *wf = NULL;
    struct weft_diags diags = {0};
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    char path[512];
    char state[512];
    char error[256];
    uint64_t t0 = 0;
    double ms = 0;

    write_files(dir, parallel, delay);
    snprintf(path, sizeof(path), "%s/wf.json", dir);
    snprintf(state, sizeof(state), "%s/state.db", dir);
    if (weft_workflow_load(path, &wf, &diags) != WEFT_OK ||
        weft_provider_new(NULL, &provider) != WEFT_OK ||
        weft_exporter_new(&discard_ops, NULL, &ex) != WEFT_OK ||
        weft_batch_processor_new(ex, NULL, &proc) != WEFT_OK ||
        weft_provider_add_processor_take(provider, proc) != WEFT_OK) {
        fputs("flow_bench: set-up failed\n", stderr);
        exit(1);
    }
    memset(&ro, 0, sizeof(ro));
    ro.provider = provider;
    ro.state_path = state;
    ro.workspace = dir;
    t0 = weft_monotonic_ns();
    if (weft_run(wf, &ro, &r, error, sizeof(error)) != WEFT_OK || r->status != WEFT_RUN_COMPLETED) {
        fprintf(stderr, "flow_bench: run failed: %s %s\n", error, r != NULL ? r->reason : "");
        exit(1);
    }
    ms = (double)(weft_monotonic_ns() - t0) / 1e6;
    *steps = r->iterations;
    weft_run_result_free(r);
    weft_provider_shutdown(provider, 10000);
    weft_provider_free(provider);
    weft_workflow_free(wf);
    weft_diags_cleanup(&diags);
    return ms;
}

int
main(int argc, char **argv)
{
    unsigned delay = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 10;
    static const unsigned parallel[] = {1, 2, 8};
    char dir[] = "/tmp/weft-flow-bench-XXXXXX";
    char cmd[300];
    size_t steps = 0;

    if (mkdtemp(dir) == NULL) {
        return 1;
    }
    for (size_t i = 0; i < sizeof(parallel) / sizeof(parallel[0]); i++) {
        /* 4 LLM waits per item on the critical path of its chain, items spread over the
         * workers: the best possible wall time. */
        double ideal = (double)delay * 4.0 * items / parallel[i];
        double base = 0;
        double ms = run_once(dir, parallel[i], delay, &steps);
        if (i == 0) {
            base = ms;
        }
        printf("flow_bench delay_ms=%u max_parallel=%u steps=%zu wall_ms=%.1f ideal_ms=%.1f "
               "efficiency=%.2f\n",
               delay, parallel[i], steps, ms, ideal, ms > 0 ? ideal / ms : 0.0);
        (void)base;
    }
    for (size_t i = 0; i < 3; i++) {
        static const int sizes[] = {5, 50, 1000};
        double ms = 0;

        items = sizes[i];
        ms = run_once(dir, 1, 0, &steps);
        printf("flow_bench delay_ms=0 max_parallel=1 steps=%zu wall_ms=%.1f us_per_step=%.1f\n",
               steps, ms, ms * 1000.0 / (double)steps);
        snprintf(cmd, sizeof(cmd), "rm -f '%s/state.db'*", dir); /* each size from scratch */
        if (system(cmd) != 0) {
            return 1;
        }
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
