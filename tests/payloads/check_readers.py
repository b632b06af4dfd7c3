#!/usr/bin/env python3
"""tests/payloads/check_readers.py WEFT_BIN SOURCE_DIR - content-addressed payloads end to end:
every reader returns the very text a store without payloads returns.

The 25-step conversation of scripts/payload-bytes-workflow.py runs with --capture-content
twice, in two WEFT_HOMEs: one with WEFT_PAYLOADS=off (inline text, how stores were written
before: the reference) and one with payloads on. Then, for the run with payloads:
  - the stores really hold references and records, span store and run state (LLM exchanges,
    tool results, the workflow snapshot): the check is not vacuous; the other home none;
  - `weft trace show --json`, the explorer API (`weft serve`: /api/v1/traces/ID and
    /api/v1/runs/ID/trace) and `weft mcp serve` (tools get_trace and get_span) return, for
    every span, exactly the long texts the inline store holds (run and trace ids normalised);
  - `weft replay` answers every LLM call from the stored exchanges and every tool call from the
    stored results and reports the replay identical; `weft fork --from s20` reuses the steps
    before s20 from the stored results and completes.
An API key in the agent's instructions is redacted before anything is hashed or stored: it is
in no file of either WEFT_HOME and in no payload record once inflated.
Exit status 0 when all hold; a message on stderr and 1 otherwise.
"""
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

WEFT, SRC = sys.argv[1], sys.argv[2]
LONG = 512
SECRET = "sk-live-0123456789abcdefABCDEF"


def fail(msg):
    sys.stderr.write("check_readers: " + msg + "\n")
    sys.exit(1)


def weft(home, *args, mode="on", check=True, stdin=None):
    env = dict(os.environ, WEFT_HOME=home, WEFT_PAYLOADS=mode)
    r = subprocess.run([WEFT] + list(args), env=env, capture_output=True, text=True, input=stdin,
                       timeout=120)
    if check and r.returncode != 0:
        fail("weft %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr[-3000:]))
    return r


def long_texts(spans, ids):
    """{(position, key): text} for every string attribute of LONG bytes or more, with the run's
    ids replaced so that two runs compare."""
    out = {}
    for pos, span in enumerate(spans):
        for key, value in span["attributes"].items():
            if isinstance(value, str) and len(value.encode()) >= LONG:
                for old, new in ids:
                    value = value.replace(old, new)
                out[(pos, span["name"], key)] = value
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=30) as r:
        body = r.read()
    return json.loads(body) if path.startswith("/api/") else body


def serve_reads(home, run_id, trace_id):
    port = free_port()
    env = dict(os.environ, WEFT_HOME=home)
    proc = subprocess.Popen([WEFT, "serve", "--addr", "127.0.0.1:%d" % port], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            try:
                api_get(port, "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        else:
            fail("weft serve did not answer on port %d" % port)
        by_trace = api_get(port, "/api/v1/traces/%s" % trace_id)["spans"]
        by_run = api_get(port, "/api/v1/runs/%s/trace" % run_id)["spans"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return by_trace, by_run


def mcp_reads(home, trace_id, spans):
    """get_trace of the trace, and get_span of each span with a long text, over stdio."""
    calls = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "check_readers", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "get_trace", "arguments": {"trace_id": trace_id, "limit": 2000}}}]
    wanted = [s["span_id"] for s in spans
              if any(isinstance(v, str) and len(v.encode()) >= LONG
                     for v in s["attributes"].values())]
    for n, span_id in enumerate(wanted):
        calls.append({"jsonrpc": "2.0", "id": 100 + n, "method": "tools/call",
                      "params": {"name": "get_span",
                                 "arguments": {"trace_id": trace_id, "span_id": span_id}}})
    r = weft(home, "mcp", "serve", stdin="".join(json.dumps(c) + "\n" for c in calls))
    answers = {}
    for line in r.stdout.splitlines():
        msg = json.loads(line)
        if "id" in msg and msg["id"] != 1:
            if "error" in msg or msg["result"].get("isError"):
                fail("mcp call %s failed: %s" % (msg["id"], line[:500]))
            answers[msg["id"]] = json.loads(msg["result"]["content"][0]["text"])
    if 2 not in answers or len(answers) != 1 + len(wanted):
        fail("mcp serve answered %d of %d calls" % (len(answers), 1 + len(wanted)))
    one = {sid: answers[100 + n] for n, sid in enumerate(wanted)}
    return answers[2], one


def store_counts(home):
    span_db = sqlite3.connect(os.path.join(home, "weft.db"))
    refs = span_db.execute("SELECT count(*) FROM spans WHERE attributes LIKE"
                           " '%{\"type\":\"payload\"%'").fetchone()[0]
    records = span_db.execute("SELECT count(*) FROM payloads").fetchone()[0]
    span_db.close()
    state = sqlite3.connect(os.path.join(home, "state.db"))
    refs += state.execute("SELECT (SELECT count(*) FROM llm_exchanges WHERE entry_ref IS NOT NULL)"
                          " + (SELECT count(*) FROM tool_results WHERE request_ref IS NOT NULL"
                          " OR outcome_ref IS NOT NULL)"
                          " + (SELECT count(*) FROM runs WHERE workflow_snapshot_ref IS NOT NULL)"
                          ).fetchone()[0]
    records += state.execute("SELECT count(*) FROM payloads").fetchone()[0]
    state.close()
    return refs, records


def secret_nowhere(home):
    """The secret is in no file under @home, and in no payload record of its SQLite stores."""
    for root, _, files in os.walk(home):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                if SECRET.encode() in f.read():
                    fail("the secret is in %s" % os.path.join(root, name))
    inflated = 0
    for db in ("weft.db", "state.db"):
        con = sqlite3.connect(os.path.join(home, db))
        if con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'payloads'").fetchone()[0]:
            for kind, data in con.execute("SELECT kind, data FROM payloads"):
                if kind == 0:
                    text = zlib.decompressobj(-15).decompress(data)
                    inflated += 1
                    if SECRET.encode() in text:
                        fail("the secret is in a payload record of %s" % db)
        con.close()
    return inflated


def main():
    with tempfile.TemporaryDirectory(prefix="weft-payload-readers-") as tmp:
        wf_dir = os.path.join(tmp, "wf")
        os.makedirs(wf_dir)
        subprocess.run([sys.executable, os.path.join(SRC, "scripts", "payload-bytes-workflow.py"),
                        wf_dir, SECRET], check=True)
        workflow = os.path.join(wf_dir, "workflow.json")
        runs = {}
        for mode in ("off", "on"):
            home = os.path.join(tmp, "home-" + mode)
            os.makedirs(home)
            r = weft(home, "run", workflow, "--capture-content", "--input", "Write the report",
                     "--json", mode=mode)
            result = json.loads(r.stdout)
            if result.get("status") != "completed":
                fail("the %s run did not complete: %s" % (mode, r.stdout[:500]))
            shown = json.loads(weft(home, "trace", "show", "last", "--json", mode=mode).stdout)
            runs[mode] = (home, result["run_id"], shown["trace_id"], shown["spans"])
        off_home, off_run, off_trace, off_spans = runs["off"]
        on_home, on_run, on_trace, on_spans = runs["on"]
        ids = [(on_run, "RUN"), (on_trace, "TRACE"), (on_home, "HOME")]
        want = long_texts(off_spans, [(off_run, "RUN"), (off_trace, "TRACE"), (off_home, "HOME")])

        refs, records = store_counts(on_home)
        if refs < 120 or records < 100:
            fail("payloads on: %d spans with references, %d records" % (refs, records))
        if store_counts(off_home) != (0, 0):
            fail("payloads off: references or records were written")

        # Each reader of the store with payloads against the same reader of the inline store.
        def same(what, on, off):
            got = long_texts(on, ids)
            ref = long_texts(off, [(off_run, "RUN"), (off_trace, "TRACE"), (off_home, "HOME")])
            if len(ref) < 100 or got != ref:
                diff = sorted(set(got.items()) ^ set(ref.items()))[:2]
                fail("%s differs from the inline store's (%d vs %d texts): %s" %
                     (what, len(got), len(ref), str(diff)[:800]))

        same("weft trace show --json", on_spans, off_spans)
        redacted = [v for s in on_spans for k, v in s["attributes"].items()
                    if k == "gen_ai.system_instructions"]
        if not redacted or any(SECRET in v or "[REDACTED]" not in v for v in redacted):
            fail("the instructions on the spans are not redacted: %s" % str(redacted)[:300])
        on_api = serve_reads(on_home, on_run, on_trace)
        off_api = serve_reads(off_home, off_run, off_trace)
        same("GET /api/v1/traces/ID", on_api[0], off_api[0])
        same("GET /api/v1/runs/ID/trace", on_api[1], off_api[1])
        on_mcp = mcp_reads(on_home, on_trace, on_spans)
        off_mcp = mcp_reads(off_home, off_trace, off_spans)
        same("mcp get_trace", on_mcp[0]["spans"], off_mcp[0]["spans"])
        same("mcp get_span", [on_mcp[1][s["span_id"]] | {"name": s["name"]} for s in on_spans
                              if s["span_id"] in on_mcp[1]],
             [off_mcp[1][s["span_id"]] | {"name": s["name"]} for s in off_spans
              if s["span_id"] in off_mcp[1]])

        if secret_nowhere(on_home) < 50:
            fail("too few payload records were inflated")
        secret_nowhere(off_home)
        r = weft(on_home, "replay", on_run, "--json", check=False)
        if r.returncode != 0:
            fail("weft replay exited %d: %s %s" % (r.returncode, r.stdout[-1500:], r.stderr[-1500:]))
        replay = json.loads(r.stdout).get("replay") or {}
        if (replay.get("identical") is not True or replay["llm_calls"]["replayed"] != 51 or
                replay["tool_calls"]["replayed"] != 25):
            fail("the replay is not identical from the stored records: %s" % json.dumps(replay))
        r = weft(on_home, "fork", on_run, "--from", "s20", "--json", check=False)
        if r.returncode != 0:
            fail("weft fork exited %d: %s" % (r.returncode, r.stderr[-1500:]))
        fork = json.loads(r.stdout)
        if fork.get("status") != "completed":
            fail("the fork did not complete: %s" % r.stdout[:800])
    print("check_readers: %d long texts read back identical through trace show, the API (2"
          " routes), MCP (get_trace, get_span); replay identical; fork completed" % len(want))


main()
