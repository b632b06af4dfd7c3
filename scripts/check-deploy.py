#!/usr/bin/env python3
"""scripts/check-deploy.py - static checks of the deploy files that no tool here can run:
every YAML file parses (all documents), Kubernetes manifests carry apiVersion, kind and a
name and run their containers as non-root, compose services have an image or a build and
publish ports on 127.0.0.1 only, the files they mount and build from exist and the variables
they need are set by the env example beside them (what `docker compose config` checks, so that
a machine without Docker still checks the stacks), and the systemd units name an ExecStart. For distributed
runs: a weft container says what it runs (command or args), a `weft worker` gets more time to
stop than its --grace for finishing tasks, and in Kubernetes a readiness probe; every worker
and orchestrator (`weft run --executor amqp`) gets the signing key (WEFT_DIST_KEY or
WEFT_DIST_KEY_FILE; a secret like the others); RabbitMQ and
PostgreSQL services have a healthcheck. No credentials in the files: a secret-looking variable
or a URL with a password takes its value from the environment (${VAR}) in compose and from a
Secret in Kubernetes, which ships no Secret with data. Prints one line per problem (file: what)
and exits 1 when there is any. Run by `make test` (ctest deploy/files).
"""
import configparser
import pathlib
import re
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
problems = []

# Variable names that hold credentials (not *_FILE, which names a file holding one).
SECRET_NAME = re.compile(
    r"(PASSWORD|_PASS$|SECRET|TOKEN|API_KEY|PRIVATE_KEY|ENCRYPTION_KEY|DIST_KEY|_AUTH$)")
# A URL with a password: scheme://user:password@host
URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:([^@\s]+)@")
# `weft worker` stops after at most --grace seconds of finishing tasks (default 30).
WORKER_GRACE_DEFAULT = 30


def is_weft_image(image):
    return str(image or "").split("/")[-1].split(":")[0] == "weft"


def worker_grace(argv):
    """--grace of a `weft worker` command line, or None when argv runs something else."""
    argv = [str(a) for a in argv or []]
    if not argv or argv[0] != "worker":
        return None
    for i, arg in enumerate(argv):
        if arg == "--grace" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--grace="):
            return int(arg.split("=", 1)[1])
    return WORKER_GRACE_DEFAULT


def signs_messages(argv, env):
    """Does this command line run a process of a distributed run that signs or checks task and
    result messages: a `weft worker`, or an orchestrator (`weft run` or `weft resume` with the
    amqp executor, by flag or WEFT_EXECUTOR)?"""
    argv = [str(a) for a in argv or []]
    if not argv:
        return False
    if argv[0] == "worker":
        return True
    if argv[0] not in ("run", "resume"):
        return False
    for i, arg in enumerate(argv):
        if arg == "--executor" and i + 1 < len(argv):
            return argv[i + 1] == "amqp"
        if arg.startswith("--executor="):
            return arg.split("=", 1)[1] == "amqp"
    return str(env.get("WEFT_EXECUTOR", "")) == "amqp"


def check_dist_key(path, where, argv, env):
    """A worker or an orchestrator without the signing key runs unsigned (docs/distributed.md,
    "Signing"): every one must get WEFT_DIST_KEY or WEFT_DIST_KEY_FILE."""
    if signs_messages(argv, env) and not ({"WEFT_DIST_KEY", "WEFT_DIST_KEY_FILE"} & set(env)):
        problems.append(f"{path}: {where}: a distributed weft process without WEFT_DIST_KEY or "
                        f"WEFT_DIST_KEY_FILE (its messages would go unsigned)")


def duration_seconds(text):
    """A compose duration (1m30s, 90s, 2m) in seconds, or None."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|ns)", str(text))
    if not parts or "".join(n + u for n, u in parts) != str(text):
        return None
    scale = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    return sum(float(n) * scale[u] for n, u in parts)


def check_compose_secret(path, where, name, value):
    value = str(value)
    if name is not None and SECRET_NAME.search(name) and not name.endswith("_FILE"):
        if value and not value.startswith("${"):
            problems.append(f"{path}: {where}: {name} is a literal credential, not ${{VAR}}")
    for password in URL_PASSWORD.findall(value):
        if not password.startswith("${"):
            problems.append(f"{path}: {where}: a URL with a literal password")


def check_k8s_env(path, where, env):
    for var in env or []:
        name = var.get("name", "")
        value = var.get("value")
        if value is None:
            continue
        if SECRET_NAME.search(name) and not name.endswith("_FILE") and str(value):
            problems.append(f"{path}: {where}: {name} has a literal value, not a secretKeyRef")
        if any(not p.startswith("$(") for p in URL_PASSWORD.findall(str(value))):
            problems.append(f"{path}: {where}: {name} holds a URL with a password, not a "
                            f"secretKeyRef")


def check_k8s(path, doc):
    for key in ("apiVersion", "kind"):
        if not doc.get(key):
            problems.append(f"{path}: a document without {key}")
    if not (doc.get("metadata") or {}).get("name"):
        problems.append(f"{path}: {doc.get('kind')} without metadata.name")
    if doc.get("kind") == "Secret" and (doc.get("data") or doc.get("stringData")):
        problems.append(f"{path}: Secret {doc['metadata'].get('name')} ships credentials "
                        f"(create it with kubectl instead)")
    spec = doc.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec")
    if pod is None:
        return
    if not (pod.get("securityContext") or {}).get("runAsNonRoot"):
        problems.append(f"{path}: {doc['kind']} {doc['metadata']['name']}: pod not runAsNonRoot")
    volumes = {v.get("name") for v in pod.get("volumes") or []}
    for c in pod.get("containers") or []:
        where = f"container {c.get('name')}"
        if not c.get("image"):
            problems.append(f"{path}: container {c.get('name')} without an image")
        if is_weft_image(c.get("image")) and not (c.get("args") or c.get("command")):
            problems.append(f"{path}: {where}: a weft container without args")
        grace = worker_grace(c.get("args") or c.get("command"))
        if grace is not None:
            period = pod.get("terminationGracePeriodSeconds")
            if period is None or period <= grace:
                problems.append(f"{path}: {where}: weft worker needs a "
                                f"terminationGracePeriodSeconds above its --grace ({grace} s)")
            if not c.get("readinessProbe"):
                problems.append(f"{path}: {where}: weft worker without a readinessProbe")
        check_k8s_env(path, where, c.get("env"))
        env = {v.get("name"): v.get("value", "") for v in c.get("env") or []}
        check_dist_key(path, where, c.get("args") or c.get("command"), env)
        for m in c.get("volumeMounts") or []:
            if m.get("name") not in volumes:
                problems.append(f"{path}: container {c.get('name')} mounts unknown volume "
                                f"{m.get('name')}")


def check_compose(path, doc):
    services = doc.get("services") or {}
    if not services:
        problems.append(f"{path}: no services")
    declared = set((doc.get("volumes") or {}).keys())
    for name, svc in services.items():
        if "image" not in svc and "build" not in svc:
            problems.append(f"{path}: service {name} has neither image nor build")
        weft = is_weft_image(svc.get("image")) or "build" in svc
        if weft and not svc.get("command"):
            problems.append(f"{path}: service {name}: a weft service without a command")
        image = str(svc.get("image") or "").split("/")[-1]
        if image.startswith(("rabbitmq:", "postgres:")) and not svc.get("healthcheck"):
            problems.append(f"{path}: service {name}: {image} without a healthcheck")
        grace = worker_grace(svc.get("command")) if weft else None
        if grace is not None:
            stop = duration_seconds(svc.get("stop_grace_period", "10s"))
            if stop is None or stop <= grace:
                problems.append(f"{path}: service {name}: weft worker needs a "
                                f"stop_grace_period above its --grace ({grace} s)")
        env = svc.get("environment") or {}
        if isinstance(env, list):
            env = dict(str(e).split("=", 1) if "=" in str(e) else (str(e), "") for e in env)
        for key, value in env.items():
            check_compose_secret(path, f"service {name}", key, "" if value is None else value)
        command = svc.get("command") or []
        for arg in command if isinstance(command, list) else [command]:
            check_compose_secret(path, f"service {name} command", None, arg)
        if weft:
            check_dist_key(path, f"service {name}",
                           command if isinstance(command, list) else str(command).split(), env)
        for port in svc.get("ports") or []:
            if not str(port).startswith("127.0.0.1:"):
                problems.append(f"{path}: service {name} publishes {port} beyond 127.0.0.1")
        for vol in svc.get("volumes") or []:
            source = str(vol).split(":", 1)[0]
            if not source.startswith((".", "/")) and source not in declared:
                problems.append(f"{path}: service {name} uses undeclared volume {source}")
        for dep in svc.get("depends_on") or []:
            if dep not in services:
                problems.append(f"{path}: service {name} depends on unknown service {dep}")
        check_compose_files(path, name, svc)


# ${VAR}, ${VAR:?why}, ${VAR?why} need VAR set; ${VAR:-x}, ${VAR-x}, ${VAR:+x} do not.
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?([-?+])[^}]*)?\}")


def check_compose_files(path, name, svc):
    """What `docker compose config` would find missing, without Docker: the files a service
    mounts from the tree and the build context and Dockerfile it names exist."""
    base = (ROOT / path).parent
    for vol in svc.get("volumes") or []:
        source = str(vol).split(":", 1)[0]
        if source.startswith(".") and not (base / source).exists():
            problems.append(f"{path}: service {name} mounts {source}, which does not exist")
    build = svc.get("build")
    if build is not None:
        context = build if isinstance(build, str) else build.get("context", ".")
        dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        if not (base / context).is_dir():
            problems.append(f"{path}: service {name} builds in {context}, not a directory")
        elif not (base / context / dockerfile).is_file():
            problems.append(f"{path}: service {name} builds with {dockerfile}, which does not exist")


def check_compose_variables(path, text):
    """Every variable the file needs set (no default) is set by an *.env.example beside it, so
    that the documented `--env-file ....env.example` trial interpolates."""
    needed = sorted({m.group(1) for m in INTERPOLATION.finditer(text) if m.group(2) in (None, "?")})
    if not needed:
        return
    examples = sorted((ROOT / path).parent.glob("*.env.example"))
    given = set()
    for example in examples:
        for line in example.read_text().splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                given.add(line.split("=", 1)[0].strip())
    for var in needed:
        if var not in given:
            problems.append(f"{path}: needs ${{{var}}} but no *.env.example beside it sets it")


def main():
    for path in sorted(ROOT.glob("deploy/**/*.y*ml")) + sorted(ROOT.glob("dashboards/**/*.y*ml")):
        rel = path.relative_to(ROOT)
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as e:
            problems.append(f"{rel}: {e}".replace("\n", " "))
            continue
        for doc in docs:
            if "k8s" in rel.parts:
                check_k8s(rel, doc)
            elif "compose" in rel.parts and "services" in doc:
                check_compose(rel, doc)
                check_compose_variables(rel, path.read_text())
    for path in sorted(ROOT.glob("deploy/systemd/*.service")):
        unit = configparser.ConfigParser(strict=False, interpolation=None)
        unit.optionxform = str
        unit.read(path)
        if not unit.has_option("Service", "ExecStart"):
            problems.append(f"{path.relative_to(ROOT)}: no ExecStart")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
