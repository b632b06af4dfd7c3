#!/usr/bin/env python3
"""scripts/payload-bytes.py [--runs N] [--workflow DIR] [--pg-url URL] - bytes that repeated runs
with content capture leave in the span store + state store (payload records included), with
content-addressed payloads off (WEFT_PAYLOADS=off: how stores were written before) and on.

Default workflow: the 25-step, 50-agent-LLM-call report (scripts/payload-bytes-workflow.py).
SQLite: the two files of $WEFT_HOME after a WAL checkpoint (TRUNCATE). PostgreSQL (--pg-url, a
maintenance database URL; scripts/bench-pg.sh gives one): a database per setting, sized after
CHECKPOINT as the sum of pg_total_relation_size of its tables (indexes and TOAST included).
Prints one JSON line per setting and one with the ratio. docs/PERFORMANCE.md, "Payloads".
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def psql(url, sql):
    out = subprocess.run(["psql", "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def db_url(url, name):
    base, _, query = url.partition("?")
    base = base.rsplit("/", 1)[0] + "/" + name
    return base + ("?" + query if query else "")


def run_all(args, workflow, env):
    for _ in range(args.runs):
        r = subprocess.run([args.weft, "run", workflow, "--capture-content", "--input",
                            "Write the report"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("weft run failed (%d): %s" % (r.returncode, r.stderr[-2000:]))


def measure(args, workflow, mode, tmp):
    env = dict(os.environ, WEFT_PAYLOADS=mode, WEFT_HOME=os.path.join(tmp, "home-" + mode))
    os.makedirs(env["WEFT_HOME"])
    result = {"bench": "payload_bytes", "payloads": mode, "runs": args.runs,
              "backend": "postgresql" if args.pg_url else "sqlite"}
    if args.pg_url:
        name = "weft_payload_bytes_" + mode
        psql(args.pg_url, "DROP DATABASE IF EXISTS %s" % name)
        psql(args.pg_url, "CREATE DATABASE %s" % name)
        env["WEFT_STATE_URL"] = db_url(args.pg_url, name)
        run_all(args, workflow, env)
        psql(args.pg_url, "CHECKPOINT")
        total = int(psql(env["WEFT_STATE_URL"],
                         "SELECT COALESCE(sum(pg_total_relation_size(oid)), 0) FROM pg_class"
                         " WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'"))
        result["total_bytes"] = total
        if args.detail:
            result["tables"] = psql(env["WEFT_STATE_URL"],
                                    "SELECT string_agg(relname || '=' || pg_total_relation_size(oid),"
                                    " ' ' ORDER BY pg_total_relation_size(oid) DESC) FROM pg_class"
                                    " WHERE relnamespace = 'public'::regnamespace AND relkind = 'r'"
                                    " AND pg_total_relation_size(oid) > 65536")
        psql(args.pg_url, "DROP DATABASE %s" % name)
    else:
        run_all(args, workflow, env)
        total = 0
        for name in ("state.db", "weft.db"):
            path = os.path.join(env["WEFT_HOME"], name)
            con = sqlite3.connect(path)
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.close()
            size = os.path.getsize(path)
            if os.path.exists(path + "-wal"):
                size += os.path.getsize(path + "-wal")
            result[name.replace(".db", "_bytes").replace("weft", "span_store")] = size
            total += size
        result["total_bytes"] = total
    result["bytes_per_run"] = result["total_bytes"] // args.runs
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--workflow", help="a directory with workflow.json (default: the 25-step report)")
    p.add_argument("--pg-url")
    p.add_argument("--detail", action="store_true", help="PostgreSQL: the tables over 64 KiB")
    p.add_argument("--weft", default=os.path.join(os.getcwd(), "build", "weft"))
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="weft-payload-bytes-") as tmp:
        wf_dir = args.workflow
        if wf_dir is None:
            wf_dir = os.path.join(tmp, "wf")
            os.makedirs(wf_dir)
            subprocess.run([sys.executable, os.path.join(HERE, "payload-bytes-workflow.py"), wf_dir],
                           check=True)
        workflow = os.path.join(os.path.abspath(wf_dir), "workflow.json")
        off = measure(args, workflow, "off", tmp)
        on = measure(args, workflow, "on", tmp)
    print(json.dumps(off))
    print(json.dumps(on))
    print(json.dumps({"bench": "payload_bytes", "backend": off["backend"],
                      "ratio_off_to_on": round(off["total_bytes"] / on["total_bytes"], 2)}))


if __name__ == "__main__":
    main()
