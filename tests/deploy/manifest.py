#!/usr/bin/env python3
"""Checks deploy/kubernetes.yaml against the image and against what
shellkeep needs, beyond what Kubernetes' schemas say:

- the pod runs as the image's user (deploy/Dockerfile's `USER`);
- no volume is mounted at or above a directory where shellkeep keeps its
  private files (its runtime directory under /tmp or $XDG_RUNTIME_DIR, its
  state under $XDG_STATE_HOME or ~/.local/state): shellkeep refuses a
  directory whose ancestors another user could write to, and a volume is
  such a directory (the kubelet makes an emptyDir 0777 without the sticky
  bit, and fsGroup makes a volume group-writable), so shellkeep would not
  start, or would run without its audit log;
- the Service selects the pod, its target port is one the container
  declares, and the probes ask /healthz on that port;
- the workload keeps one replica (a workspace's state lives in one
  process).

Needs PyYAML (from .venv-deploy, which scripts/lint-deploy installs).
Usage: manifest.py [deploy/kubernetes.yaml [deploy/Dockerfile]].
"""

import pathlib
import re
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKLOADS = {"StatefulSet", "Deployment", "Pod"}


def image_user(dockerfile):
    """The image's user: (uid, gid, home), from `USER` and `useradd`."""
    user = re.findall(r"^USER\s+(\d+)(?::(\d+))?\s*$", dockerfile, re.M)
    if not user:
        raise SystemExit("deploy/Dockerfile has no numeric `USER uid[:gid]` line")
    uid, gid = user[-1][0], user[-1][1] or user[-1][0]
    # The command up to its end: continued lines joined, then cut at `&&`.
    added = re.search(r"useradd\b((?:[^\n]*\\\n)*[^\n]*)", dockerfile)
    if not added:
        raise SystemExit("deploy/Dockerfile adds no user with useradd")
    words = added.group(1).replace("\\\n", " ").split("&&")[0].split()
    name = words[-1]
    if "--home-dir" in words:
        home = words[words.index("--home-dir") + 1]
    else:
        home = f"/home/{name}"
    return int(uid), int(gid), home


def is_at_or_above(mount, path):
    mount = mount.rstrip("/") or "/"
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def pod_of(workload):
    if workload["kind"] == "Pod":
        return workload["metadata"], workload["spec"]
    template = workload["spec"]["template"]
    return template["metadata"], template["spec"]


def check(manifest_text, dockerfile_text):
    problems = []
    uid, gid, image_home = image_user(dockerfile_text)
    documents = [d for d in yaml.safe_load_all(manifest_text) if d]
    workloads = [d for d in documents if d.get("kind") in WORKLOADS]
    services = [d for d in documents if d.get("kind") == "Service"]
    if not workloads:
        return ["no StatefulSet, Deployment or Pod"]
    for workload in workloads:
        name = f"{workload['kind']}/{workload['metadata']['name']}"
        if workload["kind"] != "Pod" and workload["spec"].get("replicas", 1) != 1:
            problems.append(f"{name}: replicas is not 1: a workspace's state lives in one process")
        metadata, spec = pod_of(workload)
        pod_security = spec.get("securityContext", {})
        for container in spec["containers"]:
            where = f"{name}, container {container['name']}"
            security = {**pod_security, **container.get("securityContext", {})}
            if (security.get("runAsUser"), security.get("runAsGroup")) != (uid, gid):
                problems.append(
                    f"{where}: runs as {security.get('runAsUser')}:{security.get('runAsGroup')}, "
                    f"not the image's user {uid}:{gid}"
                )
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            home = env.get("HOME") or image_home
            state = env.get("XDG_STATE_HOME") or f"{home}/.local/state"
            private = [f"{env.get('TMPDIR') or '/tmp'}/shellkeep-{uid}", f"{state}/shellkeep"]
            if env.get("XDG_RUNTIME_DIR"):
                private.append(f"{env['XDG_RUNTIME_DIR']}/shellkeep")
            for mount in container.get("volumeMounts", []):
                for path in private:
                    if is_at_or_above(mount["mountPath"], path):
                        problems.append(
                            f"{where}: volume {mount['name']} is mounted at {mount['mountPath']}, "
                            f"at or above {path}, where shellkeep keeps private files; a volume is "
                            "writable by others, so shellkeep refuses it"
                        )
            ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
            for probe in ["readinessProbe", "livenessProbe"]:
                get = container.get(probe, {}).get("httpGet")
                if not get or get.get("path") != "/healthz":
                    problems.append(f"{where}: the {probe} does not ask /healthz")
                elif get["port"] not in ports and get["port"] not in ports.values():
                    problems.append(f"{where}: the {probe} asks port {get['port']}, not the container's")
        selected = [
            s for s in services
            if s["spec"].get("selector")
            and s["spec"]["selector"].items() <= metadata.get("labels", {}).items()
        ]
        if not selected:
            problems.append(f"{name}: no Service selects its pod")
        for service in selected:
            names = {p.get("name") for c in spec["containers"] for p in c.get("ports", [])}
            numbers = {p["containerPort"] for c in spec["containers"] for p in c.get("ports", [])}
            for port in service["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                if target not in names and target not in numbers:
                    problems.append(
                        f"Service/{service['metadata']['name']}: target port {target} is not one "
                        f"of {name}'s"
                    )
    return problems


def main():
    manifest = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "deploy/kubernetes.yaml"
    dockerfile = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "deploy/Dockerfile"
    problems = check(manifest.read_text(), dockerfile.read_text())
    for problem in problems:
        print(f"error: {manifest.name}: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"ok: {manifest.name} runs as the image's user, mounts no volume over shellkeep's "
          "private directories, and its Service and probes reach the container's port")


if __name__ == "__main__":
    main()
