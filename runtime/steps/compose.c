/* runtime/steps/compose.c - the architect (include/weft/compose.h, compose.h).
 *
 * The architect is an ordinary run: a one-agent workflow made here from the base workflow's
 * models, whose agent is told the goal, the tools and MCP servers it may use, and the shape of
 * a team, and answers with the team as JSON. So its model calls are traced, recorded and
 * replayable like any run's, with the scripted provider too. Each design is checked before it
 * is kept (weft_workflow_load() on the written file, plus the architect's own rules: a
 * supervisor-star, single-purpose agents, no teams inside the team); a rejected one goes back
 * in the next run's task with its reasons. The run starts through the entry it is given
 * (weft_compose() in runtime/engine/compose_entry.c passes weft_run(); an architect step passes
 * its run's run_nested service), so this file never calls the engine.
 */
#include "runtime/steps/compose.h"
#include "runtime/common/attr_keys.h"

#include "base/buf.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"
#include "runtime/state/state.h"
#include "runtime/workflow/workflow.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <weft/compose.h>
#include <weft/tool.h>

#define REASONS_MAX 2048

void
weft_compose_text_free(char *text)
{
    weft__free(text);
}

#define ARCHITECT_GUIDANCE "You are the architect of teams of AI agents."

/* The architect's task: the goal, the team's shape and what the team may use. Kept out of the
 * instructions so that those can be the user's (a managed prompt too) and this still holds. */
static char *
architect_task(const char *goal, const struct weft_workflow *base, unsigned depth)
{
    struct weft__buf b;

    weft__buf_init(&b, 0);
    (void)weft__buf_printf(&b, "Goal: %s\n\n", goal);
    (void)weft__buf_append_str(
        &b, "Design a team for the goal as a weft workflow, a JSON object: {\"name\": a "
            "snake_case team name, \"description\", \"supervisor\": {\"instructions\"}, "
            "\"agents\": [{\"name\", \"description\", \"instructions\", \"tools\": [at most "
            "one tool], \"mcp_servers\": [at most one server]}], \"plan\": [{\"id\", "
            "\"agent\", \"task\", \"depends_on\"}] (optional)}. Each agent does one thing and "
            "is bound to at most one tool or MCP server. Submit it with the submit_team tool "
            "({\"team\": ...}) and fix what it rejects.");
    if (depth > 1) {
        (void)weft__buf_printf(&b,
                               " An agent may be an architect itself ({\"name\", \"architect\": "
                               "true}) that composes a sub-team when the team runs (%u more "
                               "level%s allowed).",
                               depth - 1, depth - 1 == 1 ? "" : "s");
    }
    (void)weft__buf_append_str(&b, "\nTools the team may use:");
    for (size_t i = 0; i < base->tool_count; i++) {
        (void)weft__buf_printf(&b, " %s", base->tools[i].name);
    }
    (void)weft__buf_append_str(&b, "\nMCP servers the team may use:");
    for (size_t i = 0; i < base->mcp_count; i++) {
        (void)weft__buf_printf(&b, " %s", base->mcp[i].cfg.name);
    }
    if (base->mcp_count == 0) {
        (void)weft__buf_append_str(&b, " none");
    }
    return b.data;
}

/* The base's models for a team saved elsewhere: scripted models' relative script paths made
 * absolute (they resolve against the base's directory, not the team's). New reference. */
static json_t *
models_for_team(const struct weft_workflow *base)
{
    json_t *models = json_deep_copy(json_object_get(base->doc, "models"));
    const char *k = NULL;
    json_t *m = NULL;

    json_object_foreach(models, k, m)
    {
        const char *script = json_string_value(json_object_get(m, "script"));
        if (script != NULL && script[0] != '/') {
            struct weft__buf abs;
            weft__buf_init(&abs, 0);
            if (weft__buf_printf(&abs, "%s/%s", base->dir, script) == WEFT_OK) {
                json_object_set_new(m, "script", json_string(abs.data));
            }
            weft__buf_cleanup(&abs);
        }
    }
    return models;
}

/* Agent @p i of a design that is an architect: allowed while @p depth leaves a level below,
 * and given one level less (so each level down composes less deep, whatever it asked). */
static bool
check_architect(json_t *a, size_t i, unsigned depth, struct weft__buf *why)
{
    json_t *arch = json_object_get(a, "architect");
    const char *agent = json_string_value(json_object_get(a, "name"));

    if (arch == NULL || json_is_false(arch)) {
        return true;
    }
    if (depth <= 1) {
        (void)weft__buf_printf(why,
                               "\n- agents[%zu] (%s): an architect inside this team is too deep "
                               "(composition depth limit reached)",
                               i, agent != NULL ? agent : "?");
        return false;
    }
    if (!json_is_object(arch)) {
        json_object_set_new(a, "architect", json_object());
        arch = json_object_get(a, "architect");
    }
    json_object_set_new(arch, "max_depth", json_integer((json_int_t)depth - 1));
    return true;
}

/* The architect's rules beyond the workflow schema, into @p why; true when the design keeps
 * them. The design gets the base's models, tools and MCP servers where it has none. */
static bool
check_shape(json_t *design, const struct weft_workflow *base, unsigned depth, struct weft__buf *why)
{
    const json_t *agents = json_object_get(design, "agents");
    const char *name = json_string_value(json_object_get(design, "name"));
    size_t i = 0;
    const json_t *a = NULL;
    bool is_ok = true;

    if (name == NULL || name[0] == '\0' || strlen(name) > 64 ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(name)) {
        (void)weft__buf_append_str(why, "\n- name: expected a snake_case team name");
        is_ok = false;
    }
    if (json_object_get(design, "flow") != NULL) {
        (void)weft__buf_append_str(why, "\n- flow: a team is a supervisor-star, not a flow");
        is_ok = false;
    }
    if (json_array_size(agents) == 0) {
        (void)weft__buf_append_str(why, "\n- agents: expected at least one agent");
        is_ok = false;
    }
    json_array_foreach(agents, i, a)
    {
        size_t bound = json_array_size(json_object_get(a, "tools")) +
                       json_array_size(json_object_get(a, "mcp_servers"));
        const char *agent = json_string_value(json_object_get(a, "name"));
        if (bound > 1) {
            (void)weft__buf_printf(why,
                                   "\n- agents[%zu] (%s): bound to %zu tools and MCP servers; "
                                   "each agent may use at most one",
                                   i, agent != NULL ? agent : "?", bound);
            is_ok = false;
        }
        if (json_object_get(a, "workflow") != NULL) {
            (void)weft__buf_printf(why,
                                   "\n- agents[%zu] (%s): a team file inside a composed team is "
                                   "too deep (%s)",
                                   i, agent != NULL ? agent : "?",
                                   depth > 1 ? "compose sub-teams with an architect agent"
                                             : "composition is one level here");
            is_ok = false;
        }
        is_ok = check_architect((json_t *)a, i, depth, why) && is_ok;
    }
    if (json_object_get(design, "models") == NULL) {
        json_object_set_new(design, "models", models_for_team(base));
    }
    if (json_object_get(design, "tools") == NULL && json_object_get(base->doc, "tools") != NULL) {
        json_object_set(design, "tools", json_object_get(base->doc, "tools"));
    }
    if (json_object_get(design, "mcp_servers") == NULL &&
        json_object_get(base->doc, "mcp_servers") != NULL) {
        json_object_set(design, "mcp_servers", json_object_get(base->doc, "mcp_servers"));
    }
    return is_ok;
}

/* Is the file at @p path exactly @p text? */
static bool
holds(const char *path, const char *text)
{
    size_t len = strlen(text);
    char *buf = weft__malloc(len + 2);
    FILE *in = buf != NULL ? fopen(path, "rb") : NULL;
    size_t n = in != NULL ? fread(buf, 1, len + 1, in) : 0;
    bool is_same = in != NULL && n == len && memcmp(buf, text, len) == 0;

    if (in != NULL) {
        fclose(in);
    }
    weft__free(buf);
    return is_same;
}

/* Write @p design as @p dir/<name>.json and load it back (the schema's check, with the base's
 * models and tools resolved beside it). A file of that name is never overwritten: one holding
 * this very design (the same team composed again) is used as it is, any other (the base
 * workflow, an earlier team) sends the design back to be renamed. @return the path (new) when
 * it loads, else NULL with the problems in @p why and a file this call wrote removed. */
static char *
save_and_load(json_t *design, const char *dir, struct weft__buf *why)
{
    struct weft__buf path;
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};
    char *text = json_dumps(design, JSON_INDENT(2));
    bool is_written = false;
    bool is_taken = false; /* a file of that name exists */
    char line[512];
    int fd = -1;

    weft__buf_init(&path, 0);
    (void)weft__buf_printf(&path, "%s/%s.json", dir,
                           json_string_value(json_object_get(design, "name")));
    if (path.data != NULL && text != NULL) {
        fd = open(path.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        is_taken = fd < 0 && errno == EEXIST;
        is_written = fd >= 0 && weft__write_all(fd, text, strlen(text)) == WEFT_OK;
    }
    if (fd >= 0) {
        close(fd);
        if (!is_written) {
            (void)unlink(path.data); /* created, then a short write */
        }
    }
    if (!is_written && !(is_taken && holds(path.data, text))) {
        if (is_taken) {
            (void)weft__buf_printf(why, "\n- %s already exists: give the team another name",
                                   path.data);
        } else {
            (void)weft__buf_printf(why, "\n- cannot write %s", path.data != NULL ? path.data : dir);
        }
        weft__buf_cleanup(&path);
        free(text);
        return NULL;
    }
    free(text);
    if (weft_workflow_load(path.data, &wf, &d) != WEFT_OK) {
        for (size_t i = 0; i < d.count && i < 8; i++) {
            (void)weft__buf_printf(why, "\n- %s",
                                   weft_diag_format(&d.items[i], line, sizeof(line)));
        }
        if (is_written) {
            (void)unlink(path.data);
        }
        weft__buf_cleanup(&path);
        path.data = NULL;
    }
    weft_diags_cleanup(&d);
    weft_workflow_free(wf);
    return path.data;
}

/* The compose span: the architect's run nests under it (so under @p o->parent, a running
 * workflow's step, when there is one). NULL when not traced. */
static struct weft_span *
compose_span_start(const struct weft_compose_options *o, struct weft_tracer **tracer)
{
    struct weft_span_start_options so;
    struct weft_span *span = NULL;

    *tracer = NULL;
    if (o->provider == NULL ||
        weft_provider_get_tracer(o->provider, "weft.compose", NULL, tracer) != WEFT_OK) {
        return NULL;
    }
    weft__rt_keys_init(); /* weft_compose() starts this span before any run */
    memset(&so, 0, sizeof(so));
    so.parent_context = o->parent;
    so.is_root = o->parent == NULL;
    span = weft_span_start(*tracer, "compose", &so);
    weft__rk_set_str(span, WEFT__RK_COMPOSE_GOAL, o->goal);
    return span;
}

/* The compose span ended: named `compose {team}` with a create_agent span per agent of the
 * accepted @p design, or an error with @p error when none was accepted. */
static void
compose_span_end(struct weft_tracer *tracer,
                 struct weft_span *root,
                 const json_t *design,
                 unsigned attempts,
                 const char *error)
{
    const char *team = json_string_value(json_object_get(design, "name"));
    char name[128];
    size_t i = 0;
    const json_t *a = NULL;

    if (root == NULL) {
        return;
    }
    weft__rk_set_int(root, WEFT__RK_COMPOSE_ATTEMPTS, attempts);
    if (team == NULL) {
        weft__rk_set_str(root, WEFT__RK_ERROR_TYPE, "no_design_accepted");
        weft_span_set_status(root, WEFT_STATUS_ERROR, error);
        weft_span_end(root, 0);
        return;
    }
    snprintf(name, sizeof(name), "compose %s", team);
    (void)weft_span_update_name(root, name);
    weft__rk_set_str(root, WEFT__RK_COMPOSE_TEAM, team);
    json_array_foreach(json_object_get(design, "agents"), i, a)
    {
        const char *agent = json_string_value(json_object_get(a, "name"));
        struct weft_span_start_options so;
        struct weft_span *span = NULL;
        memset(&so, 0, sizeof(so));
        so.parent = root;
        snprintf(name, sizeof(name), "create_agent %s", agent != NULL ? agent : "?");
        span = weft_span_start(tracer, name, &so);
        weft__rk_set_str(span, WEFT__RK_GEN_AI_OPERATION_NAME, "create_agent");
        weft__rk_set_str(span, WEFT__RK_GEN_AI_AGENT_NAME, agent != NULL ? agent : "");
        if (json_string_value(json_object_get(a, "description")) != NULL) {
            weft__rk_set_str(span, WEFT__RK_GEN_AI_AGENT_DESCRIPTION,
                             json_string_value(json_object_get(a, "description")));
        }
        weft__rk_set_str(span, WEFT__RK_COMPOSE_TEAM, team);
        weft_span_end(span, 0);
    }
    weft_span_end(root, 0);
}

/* What the architect's submit_team tool keeps between its calls. */
struct submit {
    const struct weft_compose_options *o;
    const char *dir;
    unsigned depth; /* levels of composition from here (check_architect()) */
    unsigned calls;
    unsigned max_calls;
    char *path;   /* the accepted team's file, once one is */
    json_t *team; /* the accepted design */
    char last[REASONS_MAX + 64];
};

/* The architect's tool: check a design, save it when it checks out, else say why. */
static weft_err
submit_team(void *user_data, const char *arguments_json, struct weft_tool_result *result)
{
    struct submit *sub = user_data;
    json_t *args = json_loads(arguments_json, 0, NULL);
    json_t *design = json_object_get(args, "team");
    struct weft__buf why;
    char text[REASONS_MAX + 160];

    weft__buf_init(&why, REASONS_MAX);
    sub->calls++;
    if (sub->path != NULL) {
        (void)weft_tool_result_set(result, "a team was accepted already", true);
    } else if (sub->calls > sub->max_calls) {
        snprintf(text, sizeof(text), "no more designs: %u were asked for", sub->max_calls);
        (void)weft_tool_result_set(result, text, true);
    } else if (!json_is_object(design)) {
        (void)weft_tool_result_set(result, "expected {\"team\": the workflow object}", true);
    } else {
        bool is_ok = check_shape(design, sub->o->base, sub->depth, &why);
        if (is_ok) {
            sub->path = save_and_load(design, sub->dir, &why);
        }
        if (sub->path != NULL) {
            sub->team = json_incref(design);
            snprintf(text, sizeof(text), "accepted: saved as %s", sub->path);
            (void)weft_tool_result_set(result, text, false);
        } else {
            snprintf(text, sizeof(text), "rejected:%s\nFix these and submit the team again.",
                     why.data != NULL ? why.data : " out of memory");
            snprintf(sub->last, sizeof(sub->last), "%s", why.data != NULL ? why.data : "");
            (void)weft_tool_result_set(result, text, true);
        }
    }
    weft__buf_cleanup(&why);
    json_decref(args);
    return WEFT_OK;
}

/* The base's architect agent: the one named in the options (NULL when it is not an
 * architect), else the first; *index its position in the base's "agents". */
static const struct wf_agent *
find_architect(const struct weft_compose_options *o, size_t *index, bool *is_unknown)
{
    const struct weft_workflow *base = o->base;

    *is_unknown = false;
    for (size_t i = 0; i < base->agent_count; i++) {
        const struct wf_agent *a = &base->agents[i];
        if (a->architect != NULL && (o->architect == NULL || strcmp(a->name, o->architect) == 0)) {
            *index = i;
            return a;
        }
    }
    *is_unknown = o->architect != NULL;
    return NULL;
}

/* The architect's workflow: the base's models, one agent with submit_team, the goal. Its model
 * and instructions (text or a managed prompt) are @p arch's when there is one. */
static json_t *
architect_doc(const struct weft_compose_options *o,
              const struct wf_agent *arch,
              size_t arch_index,
              unsigned max_calls,
              unsigned depth)
{
    const struct weft_workflow *base = o->base;
    size_t model = arch != NULL && arch->model != WF_NONE ? arch->model : base->supervisor.model;
    json_t *instructions =
        arch != NULL
            ? json_object_get(json_array_get(json_object_get(base->doc, "agents"), arch_index),
                              "instructions")
            : NULL;
    char *task = architect_task(o->goal, base, depth);
    json_t *doc = json_pack(
        "{s:s, s:O?, s:{s:s, s:i}, s:[{s:s, s:s, s:s}], "
        "s:[{s:s, s:s, s:o, s:[s], s:i}], s:[{s:s, s:s, s:s}]}",
        "name", "architect", "models", json_object_get(base->doc, "models"), "supervisor", "name",
        "architect_supervisor", "max_iterations", 5, "tools", "name", "submit_team", "type",
        "native", "description",
        "Submit the team (the workflow object) for checking; it answers accepted or why not.",
        "agents", "name", "architect", "model", base->models[model].name, "instructions",
        instructions != NULL ? json_incref(instructions) : json_string(ARCHITECT_GUIDANCE), "tools",
        "submit_team", "max_tool_rounds", (int)max_calls + 1, "plan", "id", "design", "agent",
        "architect", "task", task != NULL ? task : o->goal);

    weft__free(task);
    return doc;
}

/* Keep the accepted team in the state store's teams table. A failure is logged: the file is
 * what runs, the row what lists and resumes. */
static void
record_team(const struct weft_compose_options *o, const struct submit *sub, const char *run_id)
{
    struct rt_state *st = NULL;
    struct weft__state_team t;
    char why[256] = "";
    char *doc = json_dumps(sub->team, JSON_COMPACT);
    char *location =
        o->state_path != NULL ? weft__strdup(o->state_path) : weft__state_default_path();

    memset(&t, 0, sizeof(t));
    t.name = (char *)json_string_value(json_object_get(sub->team, "name"));
    t.path = sub->path;
    t.goal = (char *)o->goal;
    t.document = doc;
    t.run_id = (char *)(o->run_id != NULL ? o->run_id : run_id);
    if (doc == NULL || location == NULL ||
        weft__state_open(location, &st, why, sizeof(why)) != WEFT_OK ||
        weft__state_team_save(st, &t) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN, "compose: team %s not kept in the state store%s%s", t.name,
                 why[0] != '\0' ? ": " : "", why);
    }
    weft__state_close(st);
    weft__free(location);
    free(doc);
}

/* Check the options and make the submit state and the architect's workflow document. */
static weft_err
compose_prepare(const struct weft_compose_options *o,
                struct submit *sub,
                json_t **doc,
                char *error,
                size_t error_len)
{
    size_t arch_index = 0;
    bool is_unknown = false;
    const struct wf_agent *arch = find_architect(o, &arch_index, &is_unknown);

    if (is_unknown) {
        snprintf(error, error_len, "%s has no architect agent named '%s'", o->base->path,
                 o->architect);
        return WEFT_EINVAL;
    }
    if ((arch == NULL || arch->model == WF_NONE) &&
        (o->base->supervisor.model == WF_NONE || o->base->model_count == 0)) {
        snprintf(error, error_len, "%s has no model for the architect", o->base->path);
        return WEFT_EINVAL;
    }
    if (o->max_depth > 3) {
        snprintf(error, error_len, "max_depth %u: expected 1 to 3", o->max_depth);
        return WEFT_EINVAL;
    }
    memset(sub, 0, sizeof(*sub));
    sub->o = o;
    sub->dir = o->out_dir != NULL ? o->out_dir : arch != NULL ? arch->architect->out_dir : NULL;
    sub->dir = sub->dir != NULL ? sub->dir : o->base->dir;
    if (weft__mkdir_parents(sub->dir, 0755) != WEFT_OK ||
        (mkdir(sub->dir, 0755) != 0 && errno != EEXIST)) {
        snprintf(error, error_len, "cannot create %s: %s", sub->dir, strerror(errno));
        return WEFT_EIO;
    }
    sub->max_calls = o->max_attempts != 0 ? o->max_attempts
                     : arch != NULL       ? arch->architect->max_attempts
                                          : 3;
    sub->depth = o->max_depth != 0 ? o->max_depth : arch != NULL ? arch->architect->max_depth : 1;
    *doc = architect_doc(o, arch, arch_index, sub->max_calls, sub->depth);
    return *doc != NULL ? WEFT_OK : WEFT_ENOMEM;
}

/* The outcome of the architect's run @p r into *path or @p error. */
static weft_err
compose_outcome(
    struct submit *sub, const struct weft_run_result *r, char **path, char *error, size_t error_len)
{
    if (sub->path != NULL) {
        record_team(sub->o, sub, r->run_id);
        *path = sub->path;
        sub->path = NULL;
        return WEFT_OK;
    }
    if (sub->calls == 0) {
        snprintf(error, error_len, "the architect submitted no design (its run %s: %s)",
                 weft_run_status_name(r->status), r->reason != NULL ? r->reason : "");
        return WEFT_EIO;
    }
    snprintf(error, error_len, "no design was accepted (%u submitted)%s%s", sub->calls,
             sub->last[0] != '\0' ? "; the last one:" : "", sub->last);
    return WEFT_EPARSE;
}

weft_err
weft__compose_with(const struct weft_compose_options *o,
                   weft__run_entry_fn run_entry,
                   void *run_ctx,
                   char **path,
                   char *error,
                   size_t error_len)
{
    struct submit sub;
    struct weft_tools *tools = NULL;
    struct weft_workflow *wf = NULL;
    struct weft_diags d = {0};
    struct weft_run_options ro;
    struct weft_run_result *r = NULL;
    struct weft_tracer *tracer = NULL;
    struct weft_span *span = NULL;
    struct weft_span_context ctx;
    json_t *doc = NULL;
    weft_err err = WEFT_OK;

    if (path != NULL) {
        *path = NULL;
    }
    if (o == NULL || o->goal == NULL || o->base == NULL || path == NULL || error == NULL) {
        return WEFT_EINVAL;
    }
    error[0] = '\0';
    if (o->usage != NULL) {
        memset(o->usage, 0, sizeof(*o->usage));
    }
    memset(&sub, 0, sizeof(sub));
    err = compose_prepare(o, &sub, &doc, error, error_len);
    if (err == WEFT_OK) {
        err = weft_tools_new(&tools);
    }
    if (err == WEFT_OK) {
        err = weft_tools_add(tools, "submit_team", "Submit the team for checking",
                             "{\"type\": \"object\", \"properties\": {\"team\": {\"type\": "
                             "\"object\"}}, \"required\": [\"team\"]}",
                             submit_team, &sub);
    }
    if (err == WEFT_OK && weft__workflow_load_doc(o->base->path, doc, &wf, &d) != WEFT_OK) {
        snprintf(error, error_len, "architect: cannot make its workflow%s%s",
                 d.count > 0 ? ": " : "", d.count > 0 ? d.items[0].message : "");
        err = WEFT_EIO;
    }
    if (err == WEFT_OK) {
        span = compose_span_start(o, &tracer);
        weft_span_context_of(span, &ctx);
        memset(&ro, 0, sizeof(ro));
        ro.provider = o->provider;
        ro.state_path = o->state_path;
        ro.input = o->goal;
        ro.tools = tools;
        ro.capture_content = o->capture_content;
        ro.parent_context = span != NULL ? &ctx : o->parent;
        err = run_entry(run_ctx, wf, &ro, &r, error, error_len) == WEFT_OK ? WEFT_OK : WEFT_EIO;
        if (err == WEFT_OK && o->usage != NULL) {
            o->usage->input_tokens = r->input_tokens;
            o->usage->output_tokens = r->output_tokens;
            o->usage->cost_usd = r->cost_usd;
            o->usage->llm_calls = r->llm_calls;
            o->usage->tool_calls = r->tool_calls;
        }
        if (err == WEFT_OK) {
            err = compose_outcome(&sub, r, path, error, error_len);
        }
        compose_span_end(tracer, span, err == WEFT_OK ? sub.team : NULL, sub.calls, error);
    }
    weft__free(sub.path);
    json_decref(sub.team);
    weft_run_result_free(r);
    weft_workflow_free(wf);
    weft_diags_cleanup(&d);
    weft_tools_free(tools);
    json_decref(doc);
    return err;
}

weft_err
weft_teams_list(const char *state_path,
                const char *run_id,
                size_t limit,
                struct weft_team_record **out,
                size_t *count)
{
    struct rt_state *st = NULL;
    struct weft__state_team *rows = NULL;
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (out == NULL || count == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    *count = 0;
    err = weft__state_open_existing(state_path, &st);
    if (err == WEFT_OK) {
        err = weft__state_teams_list(st, run_id, limit, &rows, &n);
    }
    weft__state_close(st);
    if (err == WEFT_OK && n > 0) {
        *out = weft__calloc(n, sizeof(**out));
        err = *out != NULL ? WEFT_OK : WEFT_ENOMEM;
    }
    for (size_t i = 0; err == WEFT_OK && i < n; i++) {
        struct weft_team_record *t = &(*out)[i];
        t->id = weft__strdup(rows[i].id);
        t->name = rows[i].name;
        t->path = rows[i].path;
        t->goal = rows[i].goal;
        t->document = rows[i].document;
        t->run_id = rows[i].run_id;
        t->created_ns = rows[i].created_ns;
        memset(&rows[i], 0, sizeof(rows[i])); /* taken over */
        err = t->id != NULL ? WEFT_OK : WEFT_ENOMEM;
        *count = i + 1;
    }
    weft__state_teams_free(rows, n);
    if (err != WEFT_OK) {
        weft_teams_free(*out, *count);
        *out = NULL;
        *count = 0;
    }
    return err;
}

void
weft_teams_free(struct weft_team_record *teams, size_t count)
{
    for (size_t i = 0; teams != NULL && i < count; i++) {
        weft__free(teams[i].id);
        weft__free(teams[i].name);
        weft__free(teams[i].path);
        weft__free(teams[i].goal);
        weft__free(teams[i].document);
        weft__free(teams[i].run_id);
    }
    weft__free(teams);
}
