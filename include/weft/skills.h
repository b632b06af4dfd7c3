/* include/weft/skills.h - skill memory read back and pruned (`weft skills`): the successful
 * steps the runtime keeps per agent in the state store (docs/memory.md).
 *
 * Every function opens the state store named by @p state_path (a SQLite file or a
 * postgresql:// URL; NULL means $WEFT_STATE_URL, else $WEFT_HOME/state.db), does one thing
 * and closes it. A missing SQLite file is WEFT_ENOTFOUND: reading never creates state.
 *
 * Thread-safety: the functions may be called from any thread; each opens its own connection.
 */
#ifndef WEFT_SKILLS_H
#define WEFT_SKILLS_H

#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/** One stored skill. Every string is owned by the array it came in (weft_skills_free()). */
struct weft_skill {
    char *id;              /**< a UUID */
    char *agent;           /**< the agent that succeeded */
    char *task;            /**< the task text (cut to 2 KiB, with a note, when longer) */
    char *solution;        /**< what worked (cut to 8 KiB, with a note, when longer) */
    char *workflow;        /**< the workflow it came from; may be NULL */
    char *run_id;          /**< the run it came from; may be NULL */
    char *trace_id;        /**< 32 hex digits; may be NULL */
    char *span_id;         /**< 16 hex digits; may be NULL */
    double reward;         /**< the evaluator's reward */
    uint64_t created_ns;   /**< when it was saved (or last replaced), ns since the epoch */
    uint64_t last_used_ns; /**< when it was last injected into a step; 0: never */
    uint64_t uses;         /**< how many times it was injected */
};

/** List the @p limit newest skills, newest first, of @p agent or of every agent.
 * @param state_path the state store; NULL means the default (see the file's comment).
 * @param agent one agent's skills; NULL for all.
 * @param limit 1 to 10000; 0 means 50.
 * @param out receives the array (NULL when there are none).
 * @param count receives its length.
 * @return WEFT_OK (also when there are none), WEFT_ENOTFOUND (no database), WEFT_EINVAL (NULL
 * @p out or @p count, @p limit too large), WEFT_EIO, WEFT_ENOMEM.
 * Errors: *out is NULL and *count 0 on failure.
 * Ownership: borrows the strings; caller owns *out (weft_skills_free(*out, *count)). */
WEFT_API weft_err weft_skills_list(const char *state_path,
                                   const char *agent,
                                   size_t limit,
                                   struct weft_skill **out,
                                   size_t *count);

/** Load the skill whose id is @p id_or_prefix, or the only one whose id starts with it.
 * @param state_path the state store; NULL means the default.
 * @param id_or_prefix a skill id or at least 4 of its first characters (either case).
 * @param out receives a one-element array.
 * @return WEFT_OK, WEFT_ENOTFOUND (no such skill, or no database), WEFT_EINVAL (NULL
 * argument, not an id or prefix, or a prefix of several skills), WEFT_EIO, WEFT_ENOMEM.
 * Errors: *out is NULL on failure.
 * Ownership: borrows the strings; caller owns *out (weft_skills_free(*out, 1)). */
WEFT_API weft_err weft_skill_show(const char *state_path,
                                  const char *id_or_prefix,
                                  struct weft_skill **out);

/** Delete the skill @p id_or_prefix (found as weft_skill_show() finds it), or every skill of
 * @p agent, or, with both, that skill when it belongs to @p agent.
 * @param state_path the state store; NULL means the default.
 * @param id_or_prefix a skill id or unique prefix; may be NULL when @p agent is set.
 * @param agent an agent's name; may be NULL when @p id_or_prefix is set.
 * @param removed receives how many skills were deleted (may be NULL).
 * @return WEFT_OK (also when none matched: *removed is 0), WEFT_ENOTFOUND (no database),
 * WEFT_EINVAL (both NULL, a malformed or ambiguous prefix), WEFT_EIO, WEFT_ENOMEM.
 * Errors: nothing is deleted on failure.
 * Ownership: borrows everything. */
WEFT_API weft_err weft_skills_forget(const char *state_path,
                                     const char *id_or_prefix,
                                     const char *agent,
                                     size_t *removed);

/** Free an array from weft_skills_list() or weft_skill_show(). NULL is a no-op.
 * @param skills the array.
 * @param count its length.
 * Errors: none.
 * Ownership: takes @p skills (frees the array and every string in it). */
WEFT_API void weft_skills_free(struct weft_skill *skills, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_SKILLS_H */
