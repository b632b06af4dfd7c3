/* serve/fork.h - POST /api/v1/runs/ID/fork: `weft fork` started from the explorer (docs/serve.md).
 *
 * The request is checked here as `weft fork` checks it (the run exists: else 404; it has ended:
 * else 409; the step is one of its steps, each "set" key one weft fork takes: else 400), then
 * `weft fork ID --from STEP --set KEY=VALUE...` runs as a child process of the server (the
 * workflow file recorded for the run, as weft fork without --workflow), one at a time (another
 * request meanwhile: 429). The answer waits until the fork's run row exists and names it
 * (202 {"run_id"}); a fork refused before that answers 400 with what it said. The child's
 * environment lacks WEFT_SERVE_TOKEN and names the server's span store. weft__serve_fork_free()
 * interrupts a fork still running (SIGINT, as Ctrl-C: it stops at its next check and records how it
 * ended) and waits for it.
 *
 * Thread-safety: weft__serve_fork_post() from any thread (one fork at a time inside).
 */
#ifndef WEFT_SERVE_FORK_H
#define WEFT_SERVE_FORK_H

#include <stddef.h>
#include <weft/weft.h>

/* Largest request body the route reads. */
#define WEFT__SERVE_FORK_MAX_BODY (64u * 1024u)

struct weft__serve_fork;

/* @p exe: the weft binary to run; @p state_path: the server's state database and @p store_path
 * its span store (each NULL: the child's environment names it, as the server's). All copied.
 * @return WEFT_OK, WEFT_EINVAL (NULL exe), WEFT_ENOMEM. */
weft_err weft__serve_fork_new(const char *exe,
                              const char *state_path,
                              const char *store_path,
                              struct weft__serve_fork **out);

/* Fork run @p run_ref as @p body ({"from": STEP, "set": {KEY: VALUE}}) asks. @return the
 * status: 202 (@p text the new run's id), or 400, 404, 409, 429, 500 (@p text why). */
int weft__serve_fork_post(struct weft__serve_fork *sf,
                          const char *run_ref,
                          const char *body,
                          size_t body_len,
                          char *text,
                          size_t text_len);

/* Interrupt a fork still running, wait for it, free. NULL is a no-op. */
void weft__serve_fork_free(struct weft__serve_fork *sf);

#endif /* WEFT_SERVE_FORK_H */
