"""A small KAI scheduler snapshot, as `/get-snapshot` holds one, with what a production one carries
(env values, pull secrets, a token annotation, a volume claim, an owner): the twin's unit tests build on it."""

from __future__ import annotations

import json
import zipfile

TOKEN = "s3cr3t-t0ken-value"


def node(name: str, gpus: int, ready: str = "True") -> dict:
    res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "H100", "zone": "z1",
                                                  "kubernetes.io/hostname": name}},
            "spec": {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]},
            "status": {"capacity": res, "allocatable": res, "conditions": [{"type": "Ready", "status": ready}]}}


def pod(name: str, node: str | None, queue: str = "team-a") -> dict:
    spec = {"schedulerName": "kai-scheduler", "priorityClassName": "train", "priority": 50,
            "imagePullSecrets": [{"name": "regcred"}], "serviceAccountName": "robot",
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-pvc"}}],
            "containers": [{"name": "main", "image": "registry.example.com/private/train:7",
                            "command": ["python", "train.py", f"--token={TOKEN}"],
                            "env": [{"name": "API_TOKEN", "value": TOKEN}],
                            "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "ml", "labels": {"kai.scheduler/queue": queue},
                         "annotations": {"pod-group-name": f"pg-{name}", "example.com/token": TOKEN},
                         "ownerReferences": [{"kind": "Job", "name": "train"}]},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


def snapshot(**change) -> dict:
    data = {"config": {"actions": "allocate, reclaim", "tiers": [{"plugins": [{"name": "proportion"}]}]},
            "schedulerParams": {"schedulerName": "kai-scheduler", "updatePodEvictionCondition": True,
                                "schedulePeriod": 1000000000, "someFutureParam": 3},
            "rawObjects": {
                "nodes": [node("gpu-a", 8), node("gpu-b", 8, ready="False")],
                "pods": [pod("run-0", "gpu-a"), pod("wait-0", None)],
                "queues": [{"metadata": {"name": "team-a"}, "spec": {"parentQueue": "org"}, "status": {"x": 1}},
                           {"metadata": {"name": "org"}, "spec": {}}],
                "podGroups": [{"metadata": {"name": f"pg-{n}", "namespace": "ml"}, "spec": {"minMember": 1, "queue": "team-a"}}
                              for n in ("run-0", "wait-0")],
                "priorityClasses": [{"metadata": {"name": "train"}, "value": 50},
                                    {"metadata": {"name": "system-node-critical"}, "value": 2000001000}],
                "persistentVolumeClaims": [{"metadata": {"name": "data-pvc", "namespace": "ml"}}],
                "bindRequests": None}}
    data.update(change)
    return data


def as_zip(tmp_path, data, member: str = "snapshot.json"):
    path = tmp_path / "snap.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, json.dumps(data) if not isinstance(data, str) else data)
    return path


def plant_secrets(src, dst, token: str) -> None:
    """A real snapshot (a lab's scheduler-snapshot.zip) as a production one would carry secrets: env values,
    pull secrets, a token annotation, private images."""
    with zipfile.ZipFile(src) as zf:
        data = json.loads(zf.read("snapshot.json"))
    for p in data["rawObjects"]["pods"]:
        p["metadata"].setdefault("annotations", {})["example.com/api-token"] = token
        p["spec"]["imagePullSecrets"] = [{"name": f"regcred-{token}"}]
        for c in p["spec"]["containers"]:
            c["image"] = f"registry.example.com/{token}:1"
            c["env"] = [{"name": "API_TOKEN", "value": token}]
    with zipfile.ZipFile(dst, "w") as zf:
        zf.writestr("snapshot.json", json.dumps(data))
