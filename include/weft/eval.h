/* include/weft/eval.h - evaluators: score a run's output against a dataset item
 * (docs/experiments.md, "Evaluators").
 *
 * An evaluator config is a JSON array, as a dataset or an experiment holds it; each element is
 * {"name": optional, "type": ...} with the options of its type: exact, contains, regex,
 * json_schema, numeric, command, llm_judge, rewards, verdicts. weft_evaluators_parse() checks
 * it whole before anything runs; weft_evaluators_score() scores one subject (an item's input and
 * expected value, the run's output and result) with every evaluator, in order.
 *
 * The verdict rule: an item passes only when every evaluator passed and none errored. An
 * evaluator that cannot decide (a command that cannot start, a judge call that fails or answers
 * unparseable text, an output that is not JSON for json_schema, a missing expected value) gives
 * an ERRORED score, which is never a pass.
 *
 * Thread-safety: a parsed config is immutable and may score from several threads at once (the
 * judge's provider must allow that, see struct weft_eval_context). */
#ifndef WEFT_EVAL_H
#define WEFT_EVAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>
#include <weft/runtime.h>
#include <weft/trace.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The kinds of evaluator ("type" in the config). */
typedef enum weft_eval_type {
    WEFT_EVAL_EXACT = 0,   /**< output equals the expected value */
    WEFT_EVAL_CONTAINS,    /**< output contains a string, all or any of a list */
    WEFT_EVAL_REGEX,       /**< output matches a POSIX extended regular expression */
    WEFT_EVAL_JSON_SCHEMA, /**< output is JSON valid against a schema (the tools' subset) */
    WEFT_EVAL_NUMERIC,     /**< output is a number within a tolerance of the expected one */
    WEFT_EVAL_COMMAND,     /**< a program judges: exit 0 passes, a reward on its last line */
    WEFT_EVAL_LLM_JUDGE,   /**< a model judges with a rubric */
    WEFT_EVAL_REWARDS,     /**< the run's summed reward reaches a threshold */
    WEFT_EVAL_VERDICTS     /**< the run's reflection verdicts */
} weft_eval_type;

/** A parsed evaluator config (opaque). */
struct weft_evaluators;

/** Internal LLM provider (runtime/llm/llm.h), for the LLM judge. */
struct llm_provider;

/** Parse an evaluator config: @p json, a JSON array of evaluator objects.
 * @param field how the array is named in messages; NULL means "evaluators".
 * @param err receives "evaluators[2].pattern: expected a valid regular expression (...)" style
 *        text on failure (may be NULL).
 * @return WEFT_OK, WEFT_EINVAL (NULL @p json or @p out), WEFT_EPARSE (bad JSON or config: see
 *         @p err), WEFT_ENOMEM.
 * Ownership: @p json is borrowed; *out is new (weft_evaluators_free). */
WEFT_API weft_err weft_evaluators_parse(
    const char *json, const char *field, struct weft_evaluators **out, char *err, size_t err_len);

/** Free a config. Ownership: takes @p evaluators. Errors: none; NULL is a no-op. */
WEFT_API void weft_evaluators_free(struct weft_evaluators *evaluators);

/** How many evaluators @p evaluators holds (0 for NULL).
 * Ownership: none. Errors: none. */
WEFT_API size_t weft_evaluators_count(const struct weft_evaluators *evaluators);

/** The name of evaluator @p i: its "name", else its type ("regex"); several unnamed evaluators
 * of one type are told apart as "regex", "regex_2", ... NULL when @p i is out of range.
 * Ownership: borrowed until weft_evaluators_free(). Errors: none. */
WEFT_API const char *weft_evaluators_name(const struct weft_evaluators *evaluators, size_t i);

/** The "model" evaluator @p i asks when it is an llm_judge; NULL for another type or out of
 * range (`weft eval` finds the workflow's model of that name and gives the judges its
 * provider). Ownership: borrowed until weft_evaluators_free(). Errors: none. */
WEFT_API const char *weft_evaluators_model(const struct weft_evaluators *evaluators, size_t i);

/** The config name of a type ("llm_judge"); "unknown" out of range.
 * Ownership: a static string. Errors: none. */
WEFT_API const char *weft_eval_type_name(weft_eval_type type);

/** What is scored. Every pointer is borrowed for the call; any may be NULL. */
struct weft_eval_subject {
    const char *input;    /**< the item's input */
    const char *expected; /**< the item's expected value as JSON text ("\"42\"", "{...}") */
    const char *output;   /**< the run's output text; NULL is scored as "" */
    /** The run's result, for rewards and verdicts (and its status in command env); NULL makes
     * those two evaluators error. */
    const struct weft_run_result *result;
};

/** Where evaluators run. Zero-initialise; NULL means all defaults. */
struct weft_eval_context {
    /** The LLM judge's provider; NULL makes every llm_judge score errored. The judge calls it
     * through the runtime's provider layer (secrets scrubbed from the answer). Borrowed. */
    struct llm_provider *judge_provider;
    /** Where the judge's `chat {model}` span goes (with gen_ai.* attributes, usage and cost),
     * under @c parent when set; NULL: the call is not traced. Borrowed. */
    struct weft_tracer *tracer;
    const struct weft_span_context *parent;
    /** Directory command evaluators start in; NULL means the current one. */
    const char *workdir;
    /** Extra attributes on the judge's spans, after weft's own (e.g. the Langfuse experiment
     * context `weft eval` puts on every span of an item's trace); at most 16 are set.
     * Borrowed for the call. NULL: none. */
    const struct weft_attr *span_attrs;
    size_t span_attr_count;
};

/** One evaluator's score. */
struct weft_eval_score {
    char *name; /**< the evaluator's name (weft_evaluators_name) */
    weft_eval_type type;
    double value;         /**< 0..1 (0 when errored) */
    bool is_passed;       /**< never true when is_errored */
    bool is_errored;      /**< the evaluator could not decide */
    char *explanation;    /**< why, a sentence; never NULL */
    int64_t input_tokens; /**< llm_judge: the call's usage (0 otherwise or when unknown) */
    int64_t output_tokens;
    double cost_usd; /**< llm_judge with prices in its config */
};

/** The scores of one subject, one per evaluator in config order. */
struct weft_eval_scores {
    struct weft_eval_score *scores;
    size_t count;
    bool is_passed;       /**< every score passed and none errored (the verdict rule) */
    int64_t input_tokens; /**< sums over the judge calls */
    int64_t output_tokens;
    double cost_usd;
};

/** Score @p subject with every evaluator of @p evaluators. An evaluator that cannot decide is
 * an errored score, not a failure of this call.
 * @param context NULL means defaults (no judge provider, untraced).
 * @return WEFT_OK (*out filled), WEFT_EINVAL (NULL argument), WEFT_ENOMEM (*out zeroed).
 * Ownership: arguments borrowed; *out's contents are new (weft_eval_scores_cleanup). */
WEFT_API weft_err weft_evaluators_score(const struct weft_evaluators *evaluators,
                                        const struct weft_eval_subject *subject,
                                        const struct weft_eval_context *context,
                                        struct weft_eval_scores *out);

/** Free what @p scores holds and zero it. Ownership: takes the contents. Errors: none; NULL is
 * a no-op. */
WEFT_API void weft_eval_scores_cleanup(struct weft_eval_scores *scores);

/** Record @p score on @p span as the event gen_ai.evaluation.result with gen_ai.evaluation.name,
 * gen_ai.evaluation.score.value, gen_ai.evaluation.score.label ("pass", "fail" or "error"),
 * gen_ai.evaluation.explanation and weft.evaluation.type. The Langfuse exporter sends each such
 * event as a NUMERIC score named after the evaluator, with the explanation as its comment.
 * @return WEFT_OK, WEFT_EINVAL (NULL argument), WEFT_ELIMIT, WEFT_ENOMEM (weft_span_add_event).
 * Ownership: both borrowed; the span copies what it keeps. */
WEFT_API weft_err weft_eval_score_record(struct weft_span *span,
                                         const struct weft_eval_score *score);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_EVAL_H */
