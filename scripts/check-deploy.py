#!/usr/bin/env python3
"""scripts/check-deploy.py - static checks of the deploy files that no tool here can run:
every YAML file parses (all documents), Kubernetes manifests carry apiVersion, kind and a
name and run their containers as non-root, compose services have an image or a build and
publish ports on 127.0.0.1 only, and the systemd units name an ExecStart. Prints one line per
problem (file: what) and exits 1 when there is any. Run by `make test` (ctest deploy/files).
"""
import configparser
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
problems = []


def check_k8s(path, doc):
    for key in ("apiVersion", "kind"):
        if not doc.get(key):
            problems.append(f"{path}: a document without {key}")
    if not (doc.get("metadata") or {}).get("name"):
        problems.append(f"{path}: {doc.get('kind')} without metadata.name")
    spec = doc.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec")
    if pod is None:
        return
    if not (pod.get("securityContext") or {}).get("runAsNonRoot"):
        problems.append(f"{path}: {doc['kind']} {doc['metadata']['name']}: pod not runAsNonRoot")
    volumes = {v.get("name") for v in pod.get("volumes") or []}
    for c in pod.get("containers") or []:
        if not c.get("image"):
            problems.append(f"{path}: container {c.get('name')} without an image")
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
