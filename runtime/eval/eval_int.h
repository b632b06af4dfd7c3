/* runtime/eval/eval_int.h - what the evaluator module's files share (include/weft/eval.h is the
 * public side): the parsed config (eval_config.c), the scoring of the text kinds
 * (eval_score.c), and the command and LLM-judge evaluators (eval_run.c). */
#ifndef WEFT_RUNTIME_EVAL_INT_H
#define WEFT_RUNTIME_EVAL_INT_H

#include <weft/eval.h>

#include <jansson.h>
#include <regex.h>

/* One parsed evaluator. Which members are used depends on the type. */
struct eval_def {
    char *name;
    weft_eval_type type;
    bool is_trim;             /* exact, contains */
    bool is_case_insensitive; /* exact, contains, regex */
    json_t *value;            /* exact, contains: the config's value instead of the expected */
    bool is_any;              /* contains: any of the list (else all) */
    regex_t re;               /* regex */
    bool has_re;
    json_t *schema; /* json_schema */
    double number;  /* numeric: expected (has_number), rewards: threshold */
    bool has_number;
    double tolerance; /* numeric */
    bool is_relative;
    char **argv; /* command: NULL-terminated */
    size_t argc;
    uint32_t timeout_ms; /* command, llm_judge */
    char *rubric;        /* llm_judge */
    char *model;
    double input_price; /* USD per million tokens */
    double output_price;
    bool has_prices;
    bool is_last_approved; /* verdicts: the last verdict must be APPROVED */
};

struct weft_evaluators {
    struct eval_def *defs;
    size_t count;
};

/* Fill @p s (name and type already set) for the text kinds and rewards/verdicts. Strings are
 * new (weft__malloc). @return WEFT_OK or WEFT_ENOMEM. */
weft_err weft__eval_score_basic(const struct eval_def *d,
                                const struct weft_eval_subject *subject,
                                struct weft_eval_score *s);

/* The command evaluator (eval_run.c). @return WEFT_OK or WEFT_ENOMEM. */
weft_err weft__eval_score_command(const struct eval_def *d,
                                  const struct weft_eval_subject *subject,
                                  const struct weft_eval_context *context,
                                  struct weft_eval_score *s);

/* The LLM judge (eval_judge.c). @return WEFT_OK or WEFT_ENOMEM. */
weft_err weft__eval_score_judge(const struct eval_def *d,
                                const struct weft_eval_subject *subject,
                                const struct weft_eval_context *context,
                                struct weft_eval_score *s);

/* Set @p s's outcome: value, pass, and a formatted explanation. @return WEFT_OK or
 * WEFT_ENOMEM. */
weft_err
weft__eval_set(struct weft_eval_score *s, double value, bool is_passed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Mark @p s errored with a formatted explanation. @return WEFT_OK or WEFT_ENOMEM. */
weft_err weft__eval_error(struct weft_eval_score *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* WEFT_RUNTIME_EVAL_INT_H */
