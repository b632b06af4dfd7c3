/* bench/dist_bench.c - distributed runs end to end with no-op tasks: publish, a `weft worker`
 * runs the task, its result comes back, and the task's row in PostgreSQL is updated.
 *
 * It starts a throwaway RabbitMQ and PostgreSQL (tests/support/amqp_server.h, pg_server.h;
 * PostgreSQL with fsync=on unless --pg-fsync off), spawns `weft worker` processes (the built
 * binary: --weft PATH, default the `weft` next to this program), and drives the AMQP executor
 * (runtime/dist/amqp_executor.h) in process the way the engine does for a remote step
 * (runtime/engine/engine.c: step_started, then step_ended after the result): the step is saved as
 * dispatched, submitted, and when its result has come back through poll() it is marked
 * completed, evaluated and saved in one transaction through the state interface.
 *
 * Cases, each printed as one JSON object per line:
 *   throughput  1, 2 and 4 workers (--workers), --tasks N (default 20,000) kept up to
 *               --max-in-flight (default 64): tasks/s, dispatch->start (the worker's
 *               started_ns - submit) and end to end (submit -> result applied and saved) p50/p99
 *   paced       2 workers, tasks submitted at half the 2-worker throughput (open loop):
 *               dispatch->start p50/p99
 *   rss         2 workers, --rss-tasks (default 100,000): the orchestrator's resident memory
 *               (/proc/self/statm) every 10,000 tasks, then a summary
 * Each case also says where the time went: the orchestrator's own timers (PostgreSQL saves,
 * submit, applying results; the executor's I/O thread: publish calls, submit -> confirm,
 * result handling) and the CPU time every process used during the case (/proc), split into
 * orchestrator, workers, broker, PostgreSQL and everything else on the machine.
 *
 * Usage: dist_bench [--tasks N] [--workers 1,2,4] [--concurrency C] [--max-in-flight M]
 *                   [--rss-tasks N] [--rate R] [--cases throughput,paced,rss]
 *                   [--pg-fsync on|off] [--no-worker-trace] [--durable-dispatch]
 *                   [--no-group-commit] [--drop-results] [--weft PATH] [--keep]
 * --rate: the paced case's tasks/s (default half the 2-worker throughput); --no-worker-trace:
 * workers run with OTEL_SDK_DISABLED=true (by default they write their spans to a local store
 * each, as `weft worker` does); --durable-dispatch: the dispatched mark with an ordinary commit
 * (the engine before it used weft__state_begin_lazy), for comparison; --no-group-commit: each
 * result saved in a transaction of its own (one WAL flush each; the engine before it grouped
 * them) instead of the results one poll() returned in one transaction, as the engine's
 * apply_results() does; --drop-results: free each step's result once it is saved
 * (the engine keeps it in the plan, 32 bytes for an empty one), which tells the plan's own
 * growth from the rest in the rss case; --keep: keep the logs.
 * A benchmark, not a test: it asserts nothing. Needs rabbitmq-server and PostgreSQL 15
 * (`scripts/deps.sh test`); `make bench-dist` builds and runs it.
 */
#include "base/mem.h"
#include "base/time.h"
#include "runtime/dist/amqp_executor.h"
#include "runtime/dist/broker.h"
#include "runtime/state/state.h"
#include "runtime/workflow/plan.h"
#include "runtime/workflow/workflow.h"
#include "support/amqp_server.h"
#include "support/pg_server.h"
#include "support/server_proc.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <weft/weft.h>

#define MAX_WORKERS 16
#define WARMUP      500

struct options {
    size_t tasks;
    size_t rss_tasks;
    size_t rss_every;
    unsigned workers[8];
    size_t worker_cases;
    unsigned concurrency;
    unsigned max_in_flight;
    bool is_pg_fsync;
    bool is_worker_traced;
    bool is_durable_dispatch;
    bool is_group_commit; /* as the engine: the results of one poll() in one transaction */
    bool is_drop_results; /* free each step's result once saved (the rss case's control) */
    bool do_throughput, do_paced, do_rss;
    bool is_keep;
    char weft[1024];
};

struct bench {
    struct options opt;
    struct weft_test_amqp *amqp;
    struct weft_test_pg *pg;
    char pg_url[512];
    char *dir;
    struct weft_workflow *wf;
    struct weft_provider *provider;
    unsigned case_no;
};

/* One result handed over by the executor's callback (inside poll), applied after it. */
struct done {
    uint64_t task_id;
    bool is_success;
    char *output;
    uint64_t started_ns;
};

/* A batch of tasks run through the executor: the plan and the per-task records. */
struct batch {
    struct bench *b;
    struct weft__executor *ex;
    struct rt_state *st;
    char run_id[24];
    struct plan plan;
    uint64_t *submit_ns; /* wall clock at submit, per step */
    double *d2s_ms;      /* dispatch -> start */
    double *e2e_ms;      /* submit -> saved */
    size_t n, submitted, completed, failed, in_flight;
    struct done *done;
    size_t done_count, done_cap;
    /* orchestrator timers (monotonic ns, summed) */
    uint64_t pg_dispatch_ns, pg_result_ns, submit_call_ns, apply_ns, poll_ns;
};

/* ------------------------------------------------------------------------------------------ */
/* CPU time per process group, from /proc                                                     */

/* "kernel": interrupts and softirqs (loopback TCP is mostly there), which /proc charges to no
 * process; "steal": time the hypervisor gave to other virtual machines; "other": every other
 * process on this machine (other builds). */
enum {
    CPU_ORCH_MAIN,
    CPU_ORCH_OTHER,
    CPU_WORKERS,
    CPU_BROKER,
    CPU_PG,
    CPU_KERNEL,
    CPU_STEAL,
    CPU_OTHER,
    CPU_KINDS
};
static const char *const cpu_names[CPU_KINDS] = {
    "orchestrator_main", "orchestrator_io", "workers", "broker",
    "postgres",          "kernel",          "steal",   "other"};

struct cpu_snap {
    double s[CPU_KINDS];
    double machine_busy; /* every CPU's non-idle time, /proc/stat */
    double wall;
};

/* utime + stime of /proc/<path>/stat in seconds, and the parent pid. */
static double
proc_cpu(const char *path, pid_t *ppid)
{
    char buf[1024];
    FILE *f = fopen(path, "r");
    char *p = NULL;
    unsigned long utime = 0, stime = 0;
    int parent = 0;
    size_t n = 0;

    if (f == NULL) {
        return 0;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the command may hold spaces */
    if (p == NULL || sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &parent,
                            &utime, &stime) != 3) {
        return 0;
    }
    if (ppid != NULL) {
        *ppid = parent;
    }
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static pid_t
pg_postmaster(struct bench *b)
{
    char path[700];
    FILE *f = NULL;
    long pid = 0;

    snprintf(path, sizeof(path), "%s/data/postmaster.pid", weft_test_pg_dir(b->pg));
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    if (fscanf(f, "%ld", &pid) != 1) {
        pid = 0;
    }
    fclose(f);
    return (pid_t)pid;
}

static bool
pid_in(pid_t pid, const pid_t *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (list[i] == pid) {
            return true;
        }
    }
    return false;
}

static void
cpu_snapshot(struct bench *b, const pid_t *workers, size_t nworkers, struct cpu_snap *out)
{
    pid_t broker[64];
    size_t nbroker = 0;
    char env[300];
    pid_t postmaster = pg_postmaster(b);
    DIR *proc = opendir("/proc");
    struct dirent *ent = NULL;
    char path[300];
    double total = 0;
    FILE *f = NULL;

    memset(out, 0, sizeof(*out));
    snprintf(env, sizeof(env), "RABBITMQ_NODENAME=%s", weft_test_amqp_node(b->amqp));
    nbroker = weft_test_find_procs(env, broker, 64);
    nbroker = nbroker > 64 ? 64 : nbroker;
    while (proc != NULL && (ent = readdir(proc)) != NULL) {
        pid_t pid = (pid_t)atol(ent->d_name);
        pid_t ppid = 0;
        double t = 0;
        if (pid <= 0 || pid == getpid()) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        t = proc_cpu(path, &ppid);
        if (pid_in(pid, workers, nworkers)) {
            out->s[CPU_WORKERS] += t;
        } else if (pid_in(pid, broker, nbroker)) {
            out->s[CPU_BROKER] += t;
        } else if (postmaster != 0 && (pid == postmaster || ppid == postmaster)) {
            out->s[CPU_PG] += t;
        }
    }
    if (proc != NULL) {
        closedir(proc);
    }
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)getpid());
    out->s[CPU_ORCH_MAIN] = proc_cpu(path, NULL);
    out->s[CPU_ORCH_OTHER] = proc_cpu("/proc/self/stat", NULL) - out->s[CPU_ORCH_MAIN];
    f = fopen("/proc/stat", "r");
    if (f != NULL) {
        unsigned long long v[8] = {0};
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]) == 8) {
            /* user nice system idle iowait irq softirq steal: busy is all but idle and iowait */
            double tick = (double)sysconf(_SC_CLK_TCK);
            out->machine_busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / tick;
            out->s[CPU_KERNEL] = (double)(v[5] + v[6]) / tick;
            out->s[CPU_STEAL] = (double)v[7] / tick;
        }
        fclose(f);
    }
    for (int k = 0; k < CPU_OTHER; k++) {
        total += out->s[k];
    }
    out->s[CPU_OTHER] = out->machine_busy - total; /* differenced below */
    out->wall = (double)weft__monotonic_ns() / 1e9;
}

/* ",\"cpu_us_per_task\":{...},\"cores_used\":{...}" for the interval a..z over @p tasks. */
static void
print_cpu(const struct cpu_snap *a, const struct cpu_snap *z, size_t tasks)
{
    double wall = z->wall - a->wall;

    printf(",\"cpu_us_per_task\":{");
    for (int k = 0; k < CPU_KINDS; k++) {
        double d = z->s[k] - a->s[k];
        printf("%s\"%s\":%.1f", k > 0 ? "," : "", cpu_names[k],
               tasks > 0 ? d * 1e6 / (double)tasks : 0.0);
    }
    printf("},\"cores_used\":{");
    for (int k = 0; k < CPU_KINDS; k++) {
        printf("%s\"%s\":%.2f", k > 0 ? "," : "", cpu_names[k],
               wall > 0 ? (z->s[k] - a->s[k]) / wall : 0.0);
    }
    printf(",\"machine\":%.2f}", wall > 0 ? (z->machine_busy - a->machine_busy) / wall : 0.0);
}

static long
rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;

    if (f == NULL) {
        return -1;
    }
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) {
        resident = -1;
    }
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* ------------------------------------------------------------------------------------------ */
/* Workers                                                                                     */

/* What an early exit (exit(1) on a failed set-up) must not leave behind: the workers it
 * started and the bench's directory. The servers have guards of their own. */
static pid_t live_workers[MAX_WORKERS];
static size_t live_worker_count;
static char *work_dir;

static void
cleanup_at_exit(void)
{
    for (size_t i = 0; i < live_worker_count; i++) {
        weft_test_kill_group(live_workers[i], 5000);
    }
    live_worker_count = 0;
    if (work_dir != NULL) {
        weft_test_rm_rf(work_dir);
    }
}

static size_t
workers_start(struct bench *b, unsigned count, const char *prefix, pid_t *pids)
{
    char url[600], pfx[300], home[700], log[700], id[64], conc[16];
    const char *env[6];
    size_t started = 0;

    snprintf(url, sizeof(url), "WEFT_BROKER_URL=%s", weft_test_amqp_url(b->amqp));
    snprintf(pfx, sizeof(pfx), "WEFT_QUEUE_PREFIX=%s", prefix);
    snprintf(conc, sizeof(conc), "%u", b->opt.concurrency);
    for (unsigned i = 0; i < count && i < MAX_WORKERS; i++) {
        const char *argv[] = {b->opt.weft, "worker", "--concurrency", conc, "--id", id, NULL};
        char dir[600];
        snprintf(id, sizeof(id), "%sw%u", prefix, i);
        /* Each worker its own WEFT_HOME (its local span store), as on machines of their own. */
        snprintf(dir, sizeof(dir), "%s/%s", b->dir, id);
        (void)mkdir(dir, 0755);
        snprintf(home, sizeof(home), "WEFT_HOME=%s", dir);
        snprintf(log, sizeof(log), "%s/%s.log", b->dir, id);
        env[0] = url;
        env[1] = pfx;
        env[2] = home;
        env[3] = b->opt.is_worker_traced ? "WEFT_BENCH_TRACED=1" : "OTEL_SDK_DISABLED=true";
        env[4] = NULL;
        pids[started] = weft_test_spawn(argv, env, b->dir, log, true);
        if (pids[started] > 0) {
            live_workers[live_worker_count++] = pids[started];
            started++;
        }
    }
    return started;
}

/* Wait until the broker counts @p count consumers on the dispatch queue of @p prefix. */
static bool
workers_wait(struct bench *b, const char *prefix, size_t count)
{
    struct weft__broker_config bc;
    struct weft__broker *br = NULL;
    char err[512];
    uint64_t deadline = weft__monotonic_ns() + 60ull * 1000000000ull;
    bool is_ready = false;

    memset(&bc, 0, sizeof(bc));
    bc.url = weft_test_amqp_url(b->amqp);
    bc.prefix = prefix;
    bc.name = "dist_bench probe";
    if (weft__broker_new(&bc, &br, err, sizeof(err)) != WEFT_OK) {
        fprintf(stderr, "dist_bench: %s\n", err);
        return false;
    }
    while (!is_ready && weft__monotonic_ns() < deadline) {
        uint64_t messages = 0, consumers = 0;
        if (!weft__broker_is_connected(br) &&
            weft__broker_connect(br, err, sizeof(err)) != WEFT_OK) {
            weft__sleep_ms(200);
            continue;
        }
        if (weft__broker_queue_stats(br, weft__broker_names(br)->dispatch, &messages, &consumers) ==
                WEFT_OK &&
            consumers >= count) {
            is_ready = true;
        } else {
            weft__sleep_ms(100);
        }
    }
    weft__broker_free(br);
    return is_ready;
}

static void
workers_stop(pid_t *pids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        weft_test_kill_group(pids[i], 30000);
    }
    live_worker_count = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* A batch: the run, its plan, its tasks through the executor                                  */

static void
on_done(void *user_data, const struct weft__step_result *r)
{
    struct batch *bt = user_data;
    struct done *d = NULL;

    if (bt->done_count == bt->done_cap) {
        fputs("dist_bench: more results than tasks in flight\n", stderr);
        exit(1);
    }
    d = &bt->done[bt->done_count++];
    d->task_id = r->task_id;
    d->is_success = r->status == STEP_COMPLETED;
    d->output = r->output != NULL ? weft__strdup(r->output) : NULL;
    d->started_ns = r->started_ns;
}

static void
batch_init(struct batch *bt, struct bench *b, struct weft__executor *ex, size_t n)
{
    static unsigned serial;
    char err[512];
    uint64_t t0 = 0;

    memset(bt, 0, sizeof(*bt));
    bt->b = b;
    bt->ex = ex;
    bt->n = n;
    snprintf(bt->run_id, sizeof(bt->run_id), "%08llx%04x",
             (unsigned long long)(weft__now_ns() / 1000000u) & 0xffffffffull, ++serial & 0xffff);
    bt->submit_ns = weft__calloc(n, sizeof(*bt->submit_ns));
    bt->d2s_ms = weft__calloc(n, sizeof(*bt->d2s_ms));
    bt->e2e_ms = weft__calloc(n, sizeof(*bt->e2e_ms));
    bt->done_cap = 256;
    bt->done = weft__calloc(bt->done_cap, sizeof(*bt->done));
    if (bt->submit_ns == NULL || bt->d2s_ms == NULL || bt->e2e_ms == NULL || bt->done == NULL) {
        fputs("dist_bench: out of memory\n", stderr);
        exit(1);
    }
    if (weft__state_open(b->pg_url, &bt->st, err, sizeof(err)) != WEFT_OK) {
        fprintf(stderr, "dist_bench: %s\n", err);
        exit(1);
    }
    /* The run and its whole plan first, as the engine saves an initial plan: one commit. */
    t0 = weft__monotonic_ns();
    weft__plan_init(&bt->plan);
    if (weft__state_run_begin(bt->st, bt->run_id, b->wf->name, b->wf->path, bt->run_id, "",
                              weft__now_ns()) != WEFT_OK) {
        fputs("dist_bench: run_begin failed\n", stderr);
        exit(1);
    }
    (void)weft__state_begin(bt->st);
    for (size_t i = 0; i < n; i++) {
        size_t index = 0;
        char id[32];
        /* Ids of our own: a generated one is checked against every step (a linear search),
         * which makes a 100,000-step plan take a minute to build. */
        snprintf(id, sizeof(id), "s%zu", i + 1);
        if (weft__plan_append(&bt->plan, id, 0, "", NULL, 0, &index) != WEFT_OK ||
            weft__state_step_save(bt->st, bt->run_id, index, &bt->plan.steps[index], "noop") !=
                WEFT_OK) {
            fputs("dist_bench: plan set-up failed\n", stderr);
            exit(1);
        }
    }
    if (weft__state_commit(bt->st) != WEFT_OK) {
        fputs("dist_bench: plan commit failed\n", stderr);
        exit(1);
    }
    fprintf(stderr, "dist_bench: run %s: %zu steps stored in %.1f s\n", bt->run_id, n,
            (double)(weft__monotonic_ns() - t0) / 1e9);
}

static void
batch_cleanup(struct batch *bt)
{
    for (size_t i = 0; i < bt->done_count; i++) {
        weft__free(bt->done[i].output);
    }
    weft__plan_cleanup(&bt->plan);
    weft__state_close(bt->st);
    weft__free(bt->submit_ns);
    weft__free(bt->d2s_ms);
    weft__free(bt->e2e_ms);
    weft__free(bt->done);
    memset(bt, 0, sizeof(*bt));
}

/* The engine's step_started() for a remote executor, then the submit. */
static void
dispatch(struct batch *bt, size_t i)
{
    struct plan_step *s = &bt->plan.steps[i];
    struct weft__step_task task;
    uint64_t t0 = weft__monotonic_ns();
    uint64_t t1 = 0;
    weft_err e = WEFT_OK;

    s->status = STEP_IN_PROGRESS;
    s->attempts++;
    s->is_dispatched = true;
    s->started_ns = weft__now_ns();
    if (bt->b->opt.is_durable_dispatch) {
        (void)weft__state_begin(bt->st);
    } else {
        (void)weft__state_begin_lazy(bt->st);
    }
    (void)weft__state_step_save(bt->st, bt->run_id, i, s, "noop");
    (void)weft__state_commit(bt->st);
    t1 = weft__monotonic_ns();
    bt->pg_dispatch_ns += t1 - t0;
    memset(&task, 0, sizeof(task));
    task.task_id = i + 1;
    task.attempt = s->attempts;
    task.step = i;
    task.step_id = s->id;
    task.kind = "noop";
    task.agent = "noop";
    task.task = s->task;
    task.context = "{}";
    task.run_id = bt->run_id;
    task.task_uuid = s->task_uuid;
    bt->submit_ns[i] = weft__now_ns();
    e = bt->ex->ops->submit(bt->ex, &task, on_done, bt);
    bt->submit_call_ns += weft__monotonic_ns() - t1;
    if (e != WEFT_OK) {
        fprintf(stderr, "dist_bench: submit: %s\n", weft_strerror(e));
        exit(1);
    }
    bt->in_flight++;
    bt->submitted++;
}

/* The engine's step_ended() for each result that came back: status, output, evaluation, and
 * the step's row saved in one transaction (svc_save_step). */
static void
apply(struct batch *bt)
{
    bool is_group = bt->b->opt.is_group_commit && bt->done_count > 0;
    size_t first = bt->completed;
    uint64_t t_group = weft__monotonic_ns();

    if (is_group) {
        (void)weft__state_begin(bt->st); /* the per-result pairs below nest in it */
    }
    for (size_t k = 0; k < bt->done_count; k++) {
        struct done *d = &bt->done[k];
        size_t i = (size_t)d->task_id - 1;
        struct plan_step *s = &bt->plan.steps[i];
        uint64_t t0 = weft__monotonic_ns();

        s->status = d->is_success ? STEP_COMPLETED : STEP_FAILED;
        s->is_dispatched = false;
        s->ended_ns = weft__now_ns();
        weft__free(s->result);
        s->result = d->output;
        d->output = NULL;
        s->reward = d->is_success ? 1.0 : -1.0;
        s->has_reward = true;
        (void)weft__state_begin(bt->st);
        (void)weft__state_step_save(bt->st, bt->run_id, i, s, "noop");
        (void)weft__state_commit(bt->st);
        if (bt->b->opt.is_drop_results) {
            weft__free(s->result);
            s->result = NULL;
        }
        if (!is_group) {
            bt->apply_ns += weft__monotonic_ns() - t0;
        }
        bt->e2e_ms[bt->completed] = (double)(weft__now_ns() - bt->submit_ns[i]) / 1e6;
        bt->d2s_ms[bt->completed] = d->started_ns > bt->submit_ns[i]
                                        ? (double)(d->started_ns - bt->submit_ns[i]) / 1e6
                                        : 0.0;
        bt->completed++;
        bt->failed += d->is_success ? 0 : 1;
        bt->in_flight--;
    }
    if (is_group) {
        /* Saved only now: every result of the group ends at the commit. */
        double done_ms = 0;
        (void)weft__state_commit(bt->st);
        bt->apply_ns += weft__monotonic_ns() - t_group;
        done_ms = (double)weft__now_ns() / 1e6;
        for (size_t k = 0; k < bt->done_count; k++) {
            size_t i = (size_t)bt->done[k].task_id - 1;
            bt->e2e_ms[first + k] = done_ms - (double)bt->submit_ns[i] / 1e6;
        }
    }
    bt->done_count = 0;
}

/* Run the batch: closed loop up to @p max_in_flight (@p rate 0), or open loop at @p rate
 * tasks/s. Every @p rss_every completions (0: never) prints the resident memory. @return the
 * wall seconds; *late counts paced tasks submitted more than 1 ms after their time. */
static double
batch_run(struct batch *bt, double rate, size_t max_in_flight, size_t rss_every, size_t *late)
{
    uint64_t start = weft__monotonic_ns();
    size_t next_rss = rss_every;

    *late = 0;
    if (rss_every > 0) {
        printf("{\"bench\":\"dist_bench\",\"case\":\"rss\",\"done\":0,\"rss_kb\":%ld}\n", rss_kb());
        fflush(stdout);
    }
    while (bt->completed < bt->n) {
        uint64_t now = weft__monotonic_ns();
        uint32_t timeout = 100;
        uint64_t t0 = 0;
        weft_err e = WEFT_OK;

        while (bt->submitted < bt->n && bt->in_flight < max_in_flight) {
            uint64_t due = rate > 0 ? start + (uint64_t)((double)bt->submitted * 1e9 / rate) : 0;
            if (due > now) {
                uint64_t wait_ms = (due - now + 999999u) / 1000000u;
                timeout = wait_ms < timeout ? (uint32_t)wait_ms : timeout;
                break;
            }
            if (rate > 0 && now > due + 1000000u) {
                (*late)++;
            }
            dispatch(bt, bt->submitted);
            now = weft__monotonic_ns();
        }
        t0 = weft__monotonic_ns();
        e = bt->ex->ops->poll(bt->ex, timeout);
        bt->poll_ns += weft__monotonic_ns() - t0;
        if (e != WEFT_OK && e != WEFT_ETIMEDOUT) {
            fprintf(stderr, "dist_bench: poll: %s\n", weft_strerror(e));
            exit(1);
        }
        apply(bt);
        while (rss_every > 0 && bt->completed >= next_rss) {
            printf("{\"bench\":\"dist_bench\",\"case\":\"rss\",\"done\":%zu,\"rss_kb\":%ld}\n",
                   next_rss, rss_kb());
            fflush(stdout);
            next_rss += rss_every;
        }
    }
    return (double)(weft__monotonic_ns() - start) / 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static double
pct(double *sorted, size_t n, double q)
{
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return n == 0 ? 0.0 : sorted[i < n ? i : n - 1];
}

/* ------------------------------------------------------------------------------------------ */
/* Cases                                                                                       */

struct case_result {
    double tasks_per_sec;
};

static struct case_result
run_case(struct bench *b, const char *name, unsigned nworkers, size_t ntasks, double rate)
{
    struct case_result cr = {0};
    pid_t pids[MAX_WORKERS];
    size_t started = 0;
    char prefix[32];
    char err[512];
    struct weft__amqp_executor_config cfg;
    struct weft__executor *ex = NULL;
    struct weft__amqp_executor_stats s0, s1;
    struct batch warm, bt;
    struct cpu_snap c0, c1;
    size_t late = 0;
    size_t max_in_flight = rate > 0 ? 256 : b->opt.max_in_flight;
    bool is_rss = strcmp(name, "rss") == 0;
    double wall = 0;
    double n = 0;

    snprintf(prefix, sizeof(prefix), "bench%u.", ++b->case_no);
    started = workers_start(b, nworkers, prefix, pids);
    if (started != nworkers || !workers_wait(b, prefix, started)) {
        fprintf(stderr, "dist_bench: %zu of %u workers started; see %s/%s*.log\n", started,
                nworkers, b->dir, prefix);
        workers_stop(pids, started);
        exit(1);
    }
    memset(&cfg, 0, sizeof(cfg));
    cfg.url = weft_test_amqp_url(b->amqp);
    cfg.prefix = prefix;
    cfg.max_in_flight = (unsigned)max_in_flight;
    cfg.provider = b->provider;
    if (weft__amqp_executor_new(&cfg, b->wf, 30000, &ex, err, sizeof(err)) != WEFT_OK) {
        fprintf(stderr, "dist_bench: executor: %s\n", err);
        exit(1);
    }
    batch_init(&warm, b, ex, WARMUP);
    (void)batch_run(&warm, 0, b->opt.max_in_flight, 0, &late);
    batch_cleanup(&warm);
    batch_init(&bt, b, ex, ntasks);
    weft__amqp_executor_stats(ex, &s0);
    cpu_snapshot(b, pids, started, &c0);
    wall = batch_run(&bt, rate, max_in_flight, is_rss ? b->opt.rss_every : 0, &late);
    cpu_snapshot(b, pids, started, &c1);
    weft__amqp_executor_stats(ex, &s1);
    qsort(bt.d2s_ms, bt.completed, sizeof(double), cmp_double);
    qsort(bt.e2e_ms, bt.completed, sizeof(double), cmp_double);
    n = (double)bt.completed;
    cr.tasks_per_sec = n / wall;
    printf("{\"bench\":\"dist_bench\",\"case\":\"%s\",\"workers\":%u,\"concurrency\":%u,"
           "\"max_in_flight\":%zu,\"tasks\":%zu,\"failed\":%zu,",
           is_rss ? "rss_summary" : name, nworkers, b->opt.concurrency, max_in_flight, bt.completed,
           bt.failed);
    if (rate > 0) {
        printf("\"rate\":%.0f,\"late\":%zu,", rate, late);
    }
    printf("\"wall_s\":%.2f,\"tasks_per_sec\":%.0f,"
           "\"d2s_p50_ms\":%.2f,\"d2s_p99_ms\":%.2f,\"d2s_max_ms\":%.2f,"
           "\"e2e_p50_ms\":%.2f,\"e2e_p99_ms\":%.2f,\"e2e_max_ms\":%.2f,",
           wall, cr.tasks_per_sec, pct(bt.d2s_ms, bt.completed, 0.5),
           pct(bt.d2s_ms, bt.completed, 0.99), pct(bt.d2s_ms, bt.completed, 1.0),
           pct(bt.e2e_ms, bt.completed, 0.5), pct(bt.e2e_ms, bt.completed, 0.99),
           pct(bt.e2e_ms, bt.completed, 1.0));
    printf("\"orch_us_per_task\":{\"pg_dispatch_save\":%.1f,\"pg_result_save\":%.1f,"
           "\"submit\":%.1f,\"poll_wait\":%.1f,\"io_publish\":%.1f,\"io_result\":%.1f,"
           "\"submit_to_confirm\":%.1f}",
           (double)bt.pg_dispatch_ns / n / 1e3, (double)bt.apply_ns / n / 1e3,
           (double)bt.submit_call_ns / n / 1e3, (double)bt.poll_ns / n / 1e3,
           (double)(s1.publish_ns - s0.publish_ns) / n / 1e3,
           (double)(s1.result_ns - s0.result_ns) / n / 1e3,
           (double)(s1.confirm_wait_ns - s0.confirm_wait_ns) /
               (double)(s1.published > s0.published ? s1.published - s0.published : 1) / 1e3);
    print_cpu(&c0, &c1, bt.completed);
    if (is_rss) {
        printf(",\"rss_end_kb\":%ld", rss_kb());
    }
    printf("}\n");
    fflush(stdout);
    batch_cleanup(&bt);
    ex->ops->destroy(ex);
    workers_stop(pids, started);
    return cr;
}

/* ------------------------------------------------------------------------------------------ */
/* Set-up                                                                                      */

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
usage(void)
{
    fputs("usage: dist_bench [--tasks N] [--workers 1,2,4] [--concurrency C] [--max-in-flight M]\n"
          "                  [--rss-tasks N] [--rate R] [--cases throughput,paced,rss]\n"
          "                  [--pg-fsync on|off] [--no-worker-trace] [--durable-dispatch]\n"
          "                  [--no-group-commit] [--drop-results] [--weft PATH] [--keep]\n",
          stderr);
    exit(2);
}

static void
parse_args(int argc, char **argv, struct options *o, double *rate)
{
    char exe[900];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    const char *cases = "throughput,paced,rss";

    memset(o, 0, sizeof(*o));
    o->tasks = 20000;
    o->rss_tasks = 100000;
    o->rss_every = 10000;
    o->workers[0] = 1;
    o->workers[1] = 2;
    o->workers[2] = 4;
    o->worker_cases = 3;
    o->concurrency = 4;
    o->max_in_flight = 64;
    o->is_pg_fsync = true;
    o->is_worker_traced = true;
    o->is_group_commit = true;
    if (len > 0) {
        char *slash = NULL;
        exe[len] = '\0';
        slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
        }
        snprintf(o->weft, sizeof(o->weft), "%s/weft", exe);
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool has_value = true;
        if (strcmp(a, "--no-worker-trace") == 0) {
            o->is_worker_traced = false;
            has_value = false;
        } else if (strcmp(a, "--drop-results") == 0) {
            o->is_drop_results = true;
            has_value = false;
        } else if (strcmp(a, "--no-group-commit") == 0) {
            o->is_group_commit = false;
            has_value = false;
        } else if (strcmp(a, "--durable-dispatch") == 0) {
            o->is_durable_dispatch = true;
            has_value = false;
        } else if (strcmp(a, "--keep") == 0) {
            o->is_keep = true;
            has_value = false;
        } else if (v == NULL) {
            usage();
        } else if (strcmp(a, "--tasks") == 0) {
            o->tasks = strtoul(v, NULL, 10);
        } else if (strcmp(a, "--rss-tasks") == 0) {
            o->rss_tasks = strtoul(v, NULL, 10);
        } else if (strcmp(a, "--concurrency") == 0) {
            o->concurrency = (unsigned)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--max-in-flight") == 0) {
            o->max_in_flight = (unsigned)strtoul(v, NULL, 10);
        } else if (strcmp(a, "--rate") == 0) {
            *rate = strtod(v, NULL);
        } else if (strcmp(a, "--weft") == 0) {
            snprintf(o->weft, sizeof(o->weft), "%s", v);
        } else if (strcmp(a, "--pg-fsync") == 0) {
            o->is_pg_fsync = strcmp(v, "off") != 0;
        } else if (strcmp(a, "--cases") == 0) {
            cases = v;
        } else if (strcmp(a, "--workers") == 0) {
            char *end = NULL;
            o->worker_cases = 0;
            for (const char *p = v; *p != '\0' && o->worker_cases < 8; p = end) {
                o->workers[o->worker_cases++] = (unsigned)strtoul(p, &end, 10);
                if (end == p) {
                    usage();
                }
                end += *end == ',' ? 1 : 0;
            }
        } else {
            usage();
        }
        i += has_value ? 1 : 0;
    }
    if (o->weft[0] != '\0' && o->weft[0] != '/') {
        char cwd[512];
        char rel[sizeof(o->weft)];
        /* Workers start in the bench's own directory: the path must not be relative. */
        if (getcwd(cwd, sizeof(cwd)) != NULL) {
            memcpy(rel, o->weft, sizeof(rel));
            snprintf(o->weft, sizeof(o->weft), "%.511s/%.500s", cwd, rel);
        }
    }
    o->do_throughput = strstr(cases, "throughput") != NULL;
    o->do_paced = strstr(cases, "paced") != NULL;
    o->do_rss = strstr(cases, "rss") != NULL;
    if (o->tasks == 0 || o->rss_tasks == 0 || o->rss_tasks > PLAN_MAX_STEPS ||
        o->tasks > PLAN_MAX_STEPS || o->concurrency == 0 || o->max_in_flight == 0 ||
        o->max_in_flight > 256) {
        usage();
    }
    for (size_t i = 0; i < o->worker_cases; i++) {
        if (o->workers[i] == 0 || o->workers[i] > MAX_WORKERS) {
            usage();
        }
    }
}

static void
setup(struct bench *b)
{
    char path[700];
    char err[2048];
    const char *fsync_on[] = {"fsync=on", NULL};
    struct weft_diags diags = {0};
    struct weft_exporter *exporter = NULL;
    struct weft_processor *proc = NULL;
    FILE *f = NULL;

    if (access(b->opt.weft, X_OK) != 0) {
        fprintf(stderr, "dist_bench: no weft binary at %s (--weft PATH)\n", b->opt.weft);
        exit(2);
    }
    b->dir = weft_test_mkdtemp("weft-dist-bench-");
    if (b->dir == NULL) {
        exit(1);
    }
    work_dir = b->opt.is_keep ? NULL : b->dir;
    atexit(cleanup_at_exit);
    /* The executor sends a workflow with each task; no-op tasks never read it. */
    snprintf(path, sizeof(path), "%s/script.json", b->dir);
    f = fopen(path, "w");
    if (f == NULL) {
        exit(1);
    }
    fputs("{\"responses\": {}}\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/wf.json", b->dir);
    f = fopen(path, "w");
    if (f == NULL) {
        exit(1);
    }
    fputs("{\"name\": \"distbench\", \"models\": {\"m\": {\"provider\": \"scripted\", \"model\":"
          " \"s\", \"script\": \"script.json\"}}, \"supervisor\": {\"model\": \"m\"},"
          " \"agents\": [{\"name\": \"noop\", \"model\": \"m\", \"instructions\": \"-\"}]}\n",
          f);
    fclose(f);
    if (weft_workflow_load(path, &b->wf, &diags) != WEFT_OK) {
        fputs("dist_bench: the bench's workflow does not load\n", stderr);
        exit(1);
    }
    weft_diags_cleanup(&diags);
    if (weft_provider_new(NULL, &b->provider) != WEFT_OK ||
        weft_exporter_new(&discard_ops, NULL, &exporter) != WEFT_OK ||
        weft_batch_processor_new(exporter, NULL, &proc) != WEFT_OK ||
        weft_provider_add_processor_take(b->provider, proc) != WEFT_OK) {
        fputs("dist_bench: tracing set-up failed\n", stderr);
        exit(1);
    }
    fputs("dist_bench: starting RabbitMQ and PostgreSQL\n", stderr);
    b->amqp = weft_test_amqp_start(err, sizeof(err));
    if (b->amqp == NULL) {
        fprintf(stderr, "dist_bench: cannot start RabbitMQ: %s\n", err);
        exit(1);
    }
    b->pg = weft_test_pg_start(b->opt.is_pg_fsync ? fsync_on : NULL, err, sizeof(err));
    if (b->pg == NULL ||
        weft_test_pg_createdb(b->pg, "weft_bench", b->pg_url, sizeof(b->pg_url)) != 0) {
        fprintf(stderr, "dist_bench: cannot start PostgreSQL: %s\n",
                b->pg == NULL ? err : b->pg_url);
        weft_test_amqp_stop(b->amqp);
        exit(1);
    }
}

int
main(int argc, char **argv)
{
    struct bench b;
    double rate = 0;
    double two_workers = 0;

    memset(&b, 0, sizeof(b));
    parse_args(argc, argv, &b.opt, &rate);
    signal(SIGPIPE, SIG_IGN);
    setup(&b);
    printf("{\"bench\":\"dist_bench\",\"case\":\"setup\",\"nproc\":%ld,\"pg_fsync\":%s,"
           "\"worker_tracing\":%s,\"dispatch_commit\":\"%s\",\"group_commit\":%s,"
           "\"concurrency\":%u,"
           "\"max_in_flight\":%u}\n",
           sysconf(_SC_NPROCESSORS_ONLN), b.opt.is_pg_fsync ? "true" : "false",
           b.opt.is_worker_traced ? "true" : "false",
           b.opt.is_durable_dispatch ? "durable" : "lazy", b.opt.is_group_commit ? "true" : "false",
           b.opt.concurrency, b.opt.max_in_flight);
    fflush(stdout);
    for (size_t i = 0; b.opt.do_throughput && i < b.opt.worker_cases; i++) {
        struct case_result cr = run_case(&b, "throughput", b.opt.workers[i], b.opt.tasks, 0);
        if (b.opt.workers[i] == 2) {
            two_workers = cr.tasks_per_sec;
        }
    }
    if (b.opt.do_paced) {
        if (rate <= 0 && two_workers <= 0) {
            two_workers = run_case(&b, "throughput", 2, b.opt.tasks, 0).tasks_per_sec;
        }
        /* Half the 2-worker throughput, for about as long as a throughput case. */
        rate = rate > 0 ? rate : two_workers / 2;
        run_case(&b, "paced", 2, b.opt.tasks / 2 > 1000 ? b.opt.tasks / 2 : 1000, rate);
    }
    if (b.opt.do_rss) {
        run_case(&b, "rss", 2, b.opt.rss_tasks, 0);
    }
    weft_provider_shutdown(b.provider, 5000);
    weft_provider_free(b.provider);
    weft_workflow_free(b.wf);
    weft_test_pg_stop(b.pg);
    weft_test_amqp_stop(b.amqp);
    if (!b.opt.is_keep) {
        weft_test_rm_rf(b.dir);
    } else {
        fprintf(stderr, "dist_bench: logs kept in %s\n", b.dir);
    }
    work_dir = NULL;
    free(b.dir);
    return 0;
}
