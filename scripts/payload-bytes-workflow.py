# scripts/payload-bytes-workflow.py DIR [SECRET] - writes the workflow scripts/payload-bytes.py measures by
# default, and its script: a 25-step, 50-agent-LLM-call conversation. One writer agent (1.5 KB
# of instructions); each step a write_file tool call and then an answer of about 700 bytes, and
# each step is given every earlier step's answer (depends_on all of them), so the text sent to
# the model grows step after step as a conversation's history does. Text is drawn from a
# seeded generator over a vocabulary: the same every time, and no more repetitive than prose.
# SECRET, when given, is written into the agent's instructions (tests/payloads: it must be
# redacted before anything is hashed or stored).
import json
import os
import random
import sys

STEPS = 25
rng = random.Random(28)
VOCAB = ("span trace agent tool plan step model token cost loop verdict reward store payload "
         "sample keep drop retry spool collector export ingest fleet query index partition "
         "latency budget watchdog handoff reflection correction supervisor router memory skill "
         "workflow result answer prompt history context message system user assistant").split()


def prose(words):
    return " ".join(rng.choice(VOCAB) for _ in range(words)).capitalize() + "."


instructions = " ".join(prose(12) for _ in range(18))
if len(sys.argv) > 2:
    instructions += " Deploy with the key %s when asked." % sys.argv[2]
plan = [{"agent": "writer", "task": "Write section %d of the report on tracing agent runs." % i,
         "depends_on": ["s%d" % j for j in range(1, i)]} for i in range(1, STEPS + 1)]
acts = []
for i in range(1, STEPS + 1):
    acts.append({"tool_calls": [{"name": "write_file", "arguments": {
        "path": "section%d.md" % i, "content": " ".join(prose(14) for _ in range(8))}}],
        "usage": {"input_tokens": 900 + 150 * i, "output_tokens": 300}})
    acts.append({"content": "Section %d: " % i + " ".join(prose(12) for _ in range(8)),
                 "usage": {"input_tokens": 1100 + 150 * i, "output_tokens": 200}})
script = {"version": 1, "responses": {
    "supervisor": {"plan": [{"content": {"thought": "Write the sections in order.", "plan": plan}}]},
    "writer": {"act": acts}}}
workflow = {
    "name": "report-25",
    "description": "25 steps, 50 agent LLM calls; each step sees every earlier answer",
    "models": {"scripted": {"provider": "scripted", "model": "scripted-gpt-4o-mini",
                            "script": "script.json"}},
    "supervisor": {"instructions": "You plan a report and route the sections to the writer.",
                   "max_iterations": 80, "timeout_s": 120},
    "agents": [{"name": "writer", "instructions": instructions, "tools": ["write_file"]}],
}
out = sys.argv[1]
with open(os.path.join(out, "script.json"), "w") as f:
    json.dump(script, f, indent=1)
with open(os.path.join(out, "workflow.json"), "w") as f:
    json.dump(workflow, f, indent=1)
