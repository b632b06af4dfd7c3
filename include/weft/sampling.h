/* include/weft/sampling.h - agent-aware tail sampling: a policy that decides, when a run
 * ends, whether its trace is kept (docs/sampling.md), and the run buffer that holds a trace's
 * spans on the export side until that decision arrives.
 *
 * A policy is an ordered list of named rules. The first rule that matches a run keeps its
 * trace and names itself in the root span's weft.sampling.rule; a run no rule matches is
 * dropped. Rules read what only an agent runtime knows (a run that did not complete, a stuck
 * loop, a correction, a REJECTED verdict, a reward) plus duration, cost and a share decided
 * by trace id, so every process that sees the trace agrees.
 *
 * The run buffer is an exporter that wraps another one (weft_tail_wrap()). It holds the spans
 * of each trace it sees, encoded (OTLP protobuf), in bounded memory that spills to an unlinked
 * temporary file past its cap; the trace's local root span carries the decision
 * (weft.sampling.decision "keep" or "drop", set by the runtime before the root ends), and then
 * the held spans go to the wrapped exporter or are dropped. Spans that arrive after the
 * decision follow it. Nothing here runs on the recording thread: the buffer sits behind the
 * batch processor's export thread.
 *
 * Thread-safety: a policy is immutable once parsed and may be shared by any number of
 * threads. A struct weft_tail may be read (weft_tail_get_stats()) from any thread while its
 * wrappers export on their processors' threads.
 */
#ifndef WEFT_SAMPLING_H
#define WEFT_SAMPLING_H

#include <weft/export.h>
#include <weft/metrics.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Attribute of a run's root span: "keep" or "drop". */
#define WEFT_SAMPLING_DECISION_ATTR "weft.sampling.decision"
/** Attribute of a run's root span: the rule that kept the trace, or for a dropped trace the
 * share rule that left it out ("none" when the policy has no share rule). */
#define WEFT_SAMPLING_RULE_ATTR "weft.sampling.rule"

struct weft_sampling_policy; /* ordered rules; immutable once parsed */

/** What a run did, as the policy reads it. Computed when the run ends, before the decision:
 * metrics and summaries count every run whatever is decided. */
struct weft_sampling_facts {
    uint8_t trace_id[WEFT_TRACE_ID_SIZE]; /**< decides share rules */
    bool is_completed;                    /**< the run reached its end with every step done */
    bool is_stuck;                        /**< the watchdog found a stuck loop */
    bool is_corrected;                    /**< correction mode ran at least once */
    bool is_rejected;                     /**< a reflection verdict was REJECTED */
    double duration_s;
    double cost_usd;
    bool has_reward; /**< at least one step was evaluated */
    double reward;   /**< the run's reward (sum of its steps' rewards, weft.run.reward) */
};

/** Parse a policy from its text form: rules separated by commas, each "[NAME=]CONDITION"
 * where CONDITION is failed, stuck, corrected, rejected, all, duration>DURATION (e.g. 90s,
 * 5m), cost>USD, reward<NUMBER, or a share of the rest, PERCENT% (0 to 100) decided by trace
 * id. Unnamed rules take the condition's name (failed, stuck, corrected, rejected, all, slow,
 * costly, low_reward, sample). Example: "failed,stuck,corrected,rejected,reward<0.5,5%".
 * @param text the rules; "off" or "" parse to *out == NULL (no sampling: every trace kept).
 * @param why receives a sentence naming the rule and what was expected on WEFT_EPARSE (may be
 * NULL).
 * @return WEFT_OK, WEFT_EINVAL (NULL @p text or @p out), WEFT_EPARSE, WEFT_ENOMEM.
 * Ownership: borrows @p text; caller owns *out, free with weft_sampling_policy_free(). */
WEFT_API weft_err weft_sampling_policy_parse(const char *text,
                                             struct weft_sampling_policy **out,
                                             char *why,
                                             size_t why_len);

/** Free a policy. NULL is a no-op. Errors: none. Ownership: takes @p policy. */
WEFT_API void weft_sampling_policy_free(struct weft_sampling_policy *policy);

/** The policy in its canonical text form ("name=condition,..."), for messages and records.
 * Errors: none ("" for NULL). Ownership: borrowed; valid until the policy is freed. */
WEFT_API const char *weft_sampling_policy_text(const struct weft_sampling_policy *policy);

/** Decide a run. @return true to keep its trace. *rule receives the deciding rule's name (the
 * keeping rule, else the last share rule that left it out, else "none").
 * Errors: none; a NULL policy keeps everything with rule "all".
 * Ownership: *rule is borrowed from @p policy (static "none"/"all" otherwise). */
WEFT_API bool weft_sampling_decide(const struct weft_sampling_policy *policy,
                                   const struct weft_sampling_facts *facts,
                                   const char **rule);

/** How the run buffers of several processes decide each trace once (weft serve over one span
 * store). Both are called on the exporting thread; ids are lowercase hex. */
struct weft_tail_coordinator {
    /** Record @p keep / @p rule for @p trace_hex unless a decision stands; fill *standing_keep
     * and @p standing_rule (@p rule_len bytes) with the decision that stands. Return false when
     * the shared record cannot be reached (the buffer then follows its own decision). */
    bool (*claim)(void *user_data,
                  const char *trace_hex,
                  bool keep,
                  const char *rule,
                  bool *standing_keep,
                  char *standing_rule,
                  size_t rule_len);
    /** Look up decisions other processes took for @p count held traces; call @p found for each
     * that has one (its index in @p trace_hex). */
    void (*lookup)(void *user_data,
                   const char *const *trace_hex,
                   size_t count,
                   void (*found)(void *ctx, size_t index, bool keep, const char *rule),
                   void *ctx);
    void *user_data;
};

/** Bounds of a process's run buffers (one per wrapped exporter). Zero means the default. */
struct weft_tail_options {
    /** Encoded span bytes one buffer keeps in memory before it spills the largest held trace
     * to its file. Default 64 MiB (WEFT_SAMPLING_MAX_MEMORY). */
    size_t max_memory_bytes;
    /** Bytes one buffer may spill. Past it, the oldest undecided trace is sent on whole as
     * kept (rule "overflow"), never dropped: an undecided run may be the failed one. Default
     * 1 GiB (WEFT_SAMPLING_MAX_SPILL). */
    size_t max_spill_bytes;
    /** Directory of the spill files (created unlinked: nothing is left after a crash).
     * NULL: $TMPDIR, else /tmp. */
    const char *spill_dir;
    /** Decisions remembered for late spans, per buffer. Default 65536. */
    size_t max_decisions;
    /** Decide here too (ingest, where a trace's spans come from many processes): a trace no
     * span of which carries a decision is decided by this policy from what its spans show
     * (docs/sampling.md, "At ingest") decision_wait_ms after its root span arrived, or after
     * 6 x decision_wait_ms (at least 30 s) without a new span when no root comes. NULL: only
     * decisions carried by spans are followed. Borrowed: must outlive the buffers. */
    const struct weft_sampling_policy *policy;
    /** With @c policy: the wait after a root for late spans. Default 5000 ms. */
    uint32_t decision_wait_ms;
    /** With @c policy: undecided traces held at most, per buffer; past it the oldest is
     * decided now from the spans it has (later ones follow that decision). Default 50000. */
    size_t max_traces;
    /** With @c policy: decisions shared with other processes (NULL: decide alone). Every
     * decision is claimed; held traces are looked up once a second. Borrowed: must outlive
     * the buffers. */
    const struct weft_tail_coordinator *coordinator;
};

/** Counters of all the run buffers of one struct weft_tail (summed over its wrappers). */
struct weft_tail_stats {
    uint64_t traces_held;       /**< traces waiting for their decision now */
    uint64_t spans_held;        /**< their spans */
    uint64_t bytes_held;        /**< their encoded bytes in memory */
    uint64_t bytes_spilled;     /**< their encoded bytes in spill files now */
    uint64_t spans_spilled;     /**< spans ever written to a spill file */
    uint64_t spans_kept;        /**< spans sent on to the wrapped exporters after a keep */
    uint64_t spans_sampled_out; /**< spans dropped by a drop decision (intended, not a loss) */
    uint64_t spans_failed;      /**< kept spans the wrapped exporter failed to take */
    uint64_t traces_forced;     /**< undecided traces sent on as kept (overflow or shutdown) */
    uint64_t traces_kept;       /**< traces decided keep (by a span's decision or the policy) */
    uint64_t traces_dropped;    /**< traces decided drop */
    uint64_t traces_early;      /**< decided before their wait ended: max_traces was reached */
};

/** Traces one rule decided, for metrics by rule. */
struct weft_tail_rule_count {
    char rule[48]; /**< the rule's name (for a decision a span carried: its weft.sampling.rule) */
    uint64_t kept;
    uint64_t dropped;
};

struct weft_tail; /* shared bounds and counters of a process's run buffers */

/** Create the shared part of a process's run buffers.
 * @param options bounds; NULL (or zero fields) means the defaults above and the
 * WEFT_SAMPLING_MAX_* environment.
 * @return WEFT_OK, WEFT_EINVAL (NULL @p out), WEFT_ENOMEM.
 * Ownership: copies @p options; caller owns *out, release with weft_tail_unref() (wrappers
 * hold references of their own). */
WEFT_API weft_err weft_tail_new(const struct weft_tail_options *options, struct weft_tail **out);

/** Release a reference. NULL is a no-op. Errors: none. Ownership: takes the reference. */
WEFT_API void weft_tail_unref(struct weft_tail *tail);

/** Wrap @p inner in a run buffer of @p tail.
 * @return WEFT_OK, WEFT_EINVAL (NULL argument), WEFT_ENOMEM (then @p inner is freed).
 * Ownership: takes @p inner (even on failure); adds a reference to @p tail; caller owns *out
 * (hand it to a processor). */
WEFT_API weft_err weft_tail_wrap(struct weft_tail *tail,
                                 struct weft_exporter *inner,
                                 struct weft_exporter **out);

/** As weft_provider_add_env_exporters(), with batched exporters behind a run buffer of
 * @p tail (the console exporter, behind a simple processor, is not sampled).
 * @param tail NULL adds them all unwrapped.
 * @param only_name NULL wraps every batched exporter; a name ("store") wraps only that one,
 * so that the others send every span with the decision on its root to a collector that
 * samples the whole trace (a distributed run's `weft serve --sampling`).
 * @return as weft_provider_add_env_exporters().
 * Ownership: borrows the arguments for the call; each wrapper holds a reference to @p tail. */
WEFT_API weft_err weft_provider_add_env_exporters_tail(struct weft_provider *provider,
                                                       const char *default_exporters,
                                                       struct weft_tail *tail,
                                                       const char *only_name);

/** Copy at most @p cap per-rule counts into @p out. @return the number of rules counted (may
 * exceed @p cap). Errors: none (0 for NULL). Thread-safe. Ownership: @p out is the caller's. */
WEFT_API size_t weft_tail_rule_counts(const struct weft_tail *tail,
                                      struct weft_tail_rule_count *out,
                                      size_t cap);

/** Decide and send on what is due now: traces whose wait ended (policy buffers only); the
 * batch processor does this on its own when idle, a caller that drives the exporter itself
 * (ingest) calls it now and then, from the thread that exports. Errors: none.
 * Ownership: borrows @p exporter (one that weft_tail_wrap() made; others are left alone). */
WEFT_API void weft_tail_tick(struct weft_exporter *exporter);

/** The run buffers' counters as callback gauges on @p meter, read at each collection
 * (cumulative counts observed, as weft_meter_observe_provider() does): weft.sampling.traces.held,
 * weft.sampling.spans.held, weft.sampling.held and weft.sampling.spilled (bytes; now), and
 * weft.sampling.spans.spilled, .spans.kept, .spans.sampled_out, .spans.failed,
 * weft.sampling.traces.forced (since start). @return WEFT_OK, WEFT_EINVAL, WEFT_ENOMEM.
 * Ownership: @p tail is borrowed while the meter lives (free the meter first). */
WEFT_API weft_err weft_tail_observe(struct weft_tail *tail, struct weft_meter *meter);

/** Read the counters. Errors: none (zeros for NULL). Thread-safe.
 * Ownership: @p out is the caller's. */
WEFT_API void weft_tail_get_stats(const struct weft_tail *tail, struct weft_tail_stats *out);

#ifdef __cplusplus
}
#endif

#endif
