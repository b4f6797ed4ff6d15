"""Kubernetes manifests for KAI objects and fake GPU workloads (queues, pods, Jobs, Deployments).

One place builds every object an exercise or the lab applies, so labels and fields KAI reads
(queue label, schedulerName, priority class, gang size) are set the same way everywhere.
"""

from __future__ import annotations

import copy

SCHEDULER_NAME = "kai-scheduler"  # the schedulerName every workload names (KAI stack: its scheduler)

QUEUE_LABEL = "kai.scheduler/queue"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
# KAI reads the gang size from the Job/JobSet's own metadata, never from a pod template
GANG_ANNOTATION = "kai.scheduler/batch-min-member"
# how a pod ends on the fleet's KWOK nodes (kailab/data/kwok-stages.yaml): after its run time, with
# its exit code (0 = Succeeded, else Failed); when deleted, with its termination exit code (default
# 143, a process stopped by SIGTERM: Failed; 0: it exits cleanly on SIGTERM, Succeeded)
RUN_DURATION_ANNOTATION = "kailab.io/run-duration"
EXIT_CODE_ANNOTATION = "kailab.io/exit-code"
TERMINATION_EXIT_CODE_ANNOTATION = "kailab.io/termination-exit-code"
PODGROUP_ANNOTATION = "pod-group-name"  # the PodGroup a pod belongs to (set by KAI's podgrouper, or by us)
# a part of one GPU (KAI's GPU sharing): a fraction of its memory, or MiB of it
GPU_FRACTION, GPU_MEMORY = "gpu-fraction", "gpu-memory"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set on every fleet node (kailab/fleet.py)
GPU_GROUP_LABEL = "runai-gpu-group"  # KAI's binder: the shared device a fractional pod is on
# KAI's admission webhook names the config maps its binder writes for a fractional pod (this
# annotation). kailab then creates those maps right after each fractional pod, only to work around a
# KAI bug: its binder (v0.17.0 and before) creates them at bind time and reads them straight back
# through its informer cache; on a busy machine that read misses, the bind is rolled back and the
# scheduler puts the pod on another device, leaking a reservation (KAI issue #2016, fix in PR #2028
# unreleased). A map that already exists is only patched by the binder. The name, env, volume and
# RuntimeClass on the pod are all the webhook's own doing, in every runtime.
SHARED_GPU_CONFIGMAP = "runai/shared-gpu-configmap"
# a workload's topology constraint, read by KAI's podgrouper from the top owner's annotations
TOPOLOGY = "kai.scheduler/topology"
TOPOLOGY_REQUIRED = "kai.scheduler/topology-required-placement"
TOPOLOGY_PREFERRED = "kai.scheduler/topology-preferred-placement"


def topology(name: str, levels: list[str]) -> dict:
    """A KAI Topology: nodes grouped into nested domains by these labels, widest first."""
    return {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in levels]}}
OWNER_LABEL = "kailab.io/workload"
RUN_QUEUE_LABEL = "kailab.io/queue"  # the run's queue, in the lab's own words: read back whatever the stack
IMAGE = "kailab.io/fake-gpu-workload:never-pulled"  # KWOK never pulls: any name works
# workload kinds backed by a controller: (apiVersion, kind) to delete them by name
CONTROLLERS = {"job": ("batch/v1", "Job"), "deployment": ("apps/v1", "Deployment")}
# kinds applied before the rest of a step's objects, which read them
CREATED_FIRST = ("ConfigMap",)


def queue(name: str, gpu: dict, parent: str | None = None, labels: dict | None = None) -> dict:
    """A KAI Queue; cpu and memory are left unlimited so only GPUs decide."""
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    spec: dict = {"resources": {"gpu": {"quota": gpu.get("quota", 0), "limit": gpu.get("limit", -1),
                                        "overQuotaWeight": gpu.get("overQuotaWeight", 1)},
                                "cpu": dict(unlimited), "memory": dict(unlimited)}}
    if "priority" in gpu:
        spec["priority"] = gpu["priority"]
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "kailab", **(labels or {})}},
            "spec": spec}


def _pod_spec(gpus: int, priority_class: str | None, node_selector: dict | None = None,
              cpu_milli: int = 100, memory_mib: int = 128, gpu_models: list[str] | None = None) -> dict:
    size = {"cpu": f"{cpu_milli}m", "memory": f"{memory_mib}Mi"}
    container = {"name": "main", "image": IMAGE, "resources": {"requests": dict(size), "limits": dict(size)}}
    if gpus:
        container["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    # terminationGracePeriodSeconds left at Kubernetes' 30 s: a deleted pod ends as a kubelet ends it,
    # within the lab's termination grace (0 would let the API server remove a bare pod at once, unended)
    spec: dict = {"schedulerName": SCHEDULER_NAME, "containers": [container], "automountServiceAccountToken": False}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_selector:
        spec["nodeSelector"] = node_selector
    if gpu_models:  # any of these products (a trace's GPU-model constraint)
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": GPU_PRODUCT_LABEL, "operator": "In", "values": list(gpu_models)}]}]}}}
    return spec


def _labels(queue_name: str, workload: str, preemptible: bool | None, extra: dict | None) -> dict:
    labels = {QUEUE_LABEL: queue_name, RUN_QUEUE_LABEL: queue_name, OWNER_LABEL: workload, **(extra or {})}
    if preemptible is not None:
        labels[PREEMPTIBILITY_LABEL] = "preemptible" if preemptible else "non-preemptible"
    return labels


def ending(run_duration: str | None = None, exit_code: int | None = None,
           termination_exit_code: int | None = None) -> dict:
    """The annotations that say how a pod ends on the fleet's nodes (none: it runs until deleted and
    then ends Failed with 143)."""
    return {**({RUN_DURATION_ANNOTATION: run_duration} if run_duration else {}),
            **({EXIT_CODE_ANNOTATION: str(exit_code)} if exit_code is not None else {}),
            **({TERMINATION_EXIT_CODE_ANNOTATION: str(termination_exit_code)} if termination_exit_code is not None else {})}


def pods(name: str, namespace: str, queue_name: str, count: int, gpus: int = 1,
         priority_class: str | None = "train", preemptible: bool | None = None,
         run_duration: str | None = None, labels: dict | None = None,
         node_selector: dict | None = None, share: dict | None = None, size: dict | None = None,
         ends: dict | None = None) -> list[dict]:
    """`count` bare pods named <name>-<i>; KAI's podgrouper gives each its own PodGroup.
    `share` ({GPU_FRACTION: "0.5"} or {GPU_MEMORY: "20000"}): a part of one GPU instead of `gpus`.
    `ends`: more of how each ends (ending())."""
    out = []
    for i in range(count):
        meta: dict = {"name": f"{name}-{i}", "namespace": namespace,
                      "labels": _labels(queue_name, name, preemptible, labels)}
        annotations = {**(share or {}), **ending(run_duration), **(ends or {})}
        if annotations:
            meta["annotations"] = annotations
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                    "spec": _pod_spec(gpus, priority_class, node_selector, **(size or {}))})
    return out


def sharing_config_maps(pod: dict) -> list[dict]:
    """For a pod as the API server returned it (after KAI's webhook): the GPU-sharing config maps of
    its first container under the name the webhook chose, empty until KAI's binder fills them at
    bind time; none for a pod that is not fractional. See SHARED_GPU_CONFIGMAP for why."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    prefix = annotations.get(SHARED_GPU_CONFIGMAP)
    if not prefix or not (GPU_FRACTION in annotations or GPU_MEMORY in annotations):
        return []
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{prefix}-0{suffix}",
             "namespace": meta["namespace"]}, "data": {}} for suffix in ("", "-evar")]


def job(name: str, namespace: str, queue_name: str, parallelism: int, gpus: int = 1,
        gang: int | None = None, priority_class: str | None = "train",
        preemptible: bool | None = None, run_duration: str | None = None,
        labels: dict | None = None, size: dict | None = None, completions: int | None = None,
        backoff_limit: int = 0, ignore_disruptions: bool = True, ends: dict | None = None) -> dict:
    """`size`: cpu_milli, memory_mib and gpu_models of each pod (default 100m, 128Mi, any GPU).
    `completions` defaults to parallelism; `ends`: more of how each pod ends (ending())."""
    meta: dict = {"name": name, "namespace": namespace,
                  "labels": _labels(queue_name, name, preemptible, labels)}
    if gang:
        meta["annotations"] = {GANG_ANNOTATION: str(gang)}
    template_meta: dict = {"labels": _labels(queue_name, name, preemptible, labels)}
    annotations = {**ending(run_duration), **(ends or {})}
    if annotations:
        template_meta["annotations"] = annotations
    pod_spec = _pod_spec(gpus, priority_class, **(size or {}))
    pod_spec["restartPolicy"] = "Never"
    spec: dict = {"parallelism": parallelism, "completions": completions or parallelism, "backoffLimit": backoff_limit}
    if ignore_disruptions:
        # a pod ended by a disruption (lost with its node: DeletionByPodGC; evicted by KAI with its
        # DisruptionTarget condition on: PreemptionByScheduler) is replaced, not counted as the job
        # failing - as training jobs are usually set up
        spec["podFailurePolicy"] = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {**spec, "template": {"metadata": template_meta, "spec": pod_spec}}}


def elastic(name: str, namespace: str, queue_name: str, count: int, min_member: int, gpus: int = 1,
            priority_class: str | None = "train", preemptible: bool | None = None,
            ends: dict | None = None) -> list[dict]:
    """An elastic workload as KAI's own e2e tests build one: a PodGroup with minMember below its
    pod count, and `count` bare pods in it. KAI runs at least min_member together, grows into
    idle GPUs, and under reclaim evicts only pods above the minimum (or the whole group)."""
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": namespace,
                          "labels": _labels(queue_name, name, preemptible, None)},
             "spec": {"minMember": min_member, "queue": queue_name}}
    if priority_class:
        group["spec"]["priorityClassName"] = priority_class
    members = pods(name, namespace, queue_name, count, gpus, priority_class, preemptible,
                   labels={PODGROUP_ANNOTATION: name}, ends=ends)
    for pod in members:
        pod["metadata"]["annotations"] = {**(pod["metadata"].get("annotations") or {}), PODGROUP_ANNOTATION: name}
    return [group, *members]


def deployment(name: str, namespace: str, queue_name: str, replicas: int, gpus: int = 1,
               priority_class: str | None = None, preemptible: bool | None = None,
               labels: dict | None = None, node_selector: dict | None = None, ends: dict | None = None) -> dict:
    pod_labels = _labels(queue_name, name, preemptible, labels)
    pod_labels["app"] = name
    template_meta: dict = {"labels": pod_labels, **({"annotations": dict(ends)} if ends else {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": _labels(queue_name, name, preemptible, labels)},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": template_meta,
                                  "spec": _pod_spec(gpus, priority_class, node_selector)}}}


def adopt(obj: dict, namespace: str, queue_name: str | None) -> dict:
    """A user's manifest, made a workload of the run: its namespace, the workload label (on it and on
    every pod template it holds: a Job's, a PyTorchJob's replicas', a JobSet's jobs', an LWS's leader
    and workers', a RayCluster's groups') and, when given, KAI's queue label. A workload operator's kind
    (a PyTorchJob, a JobSet, ...): its pod templates that name no scheduler name the lab's, as every
    workload kailab builds does; any other manifest keeps what it says (none: the default scheduler)."""
    out = copy.deepcopy(obj)
    name = out["metadata"]["name"]
    marks = {OWNER_LABEL: name, **({QUEUE_LABEL: queue_name, RUN_QUEUE_LABEL: queue_name} if queue_name else {})}
    out["metadata"]["namespace"] = namespace
    out["metadata"]["labels"] = {**(out["metadata"].get("labels") or {}), **marks}
    for template in pod_templates(out):
        template.setdefault("metadata", {})
        template["metadata"]["labels"] = {**(template["metadata"].get("labels") or {}), **marks}
        if of_an_operator(out):
            template["spec"].setdefault("schedulerName", SCHEDULER_NAME)
    return out


def pod_templates(obj: dict) -> list[dict]:
    """Every pod template inside an object (a mapping whose `spec` has `containers`), outermost first;
    a Pod's own spec is not a template."""
    found: list[dict] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, dict) and isinstance(value.get("spec"), dict) \
                        and isinstance(value["spec"].get("containers"), list) and key != "metadata":
                    found.append(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                if isinstance(value, dict) and isinstance(value.get("spec"), dict) \
                        and isinstance(value["spec"].get("containers"), list):
                    found.append(value)
                walk(value)

    walk(obj.get("spec") or {})
    return found


def _replicas(spec: dict | None, default: int = 1) -> int:
    value = (spec or {}).get("replicas")
    return default if value is None else int(value)


# the API groups of the workload operators' kinds (kailab/operators: data/operators.yaml says which kinds)
OPERATOR_GROUPS = ("kubeflow.org", "jobset.x-k8s.io", "leaderworkerset.x-k8s.io", "ray.io")


def of_an_operator(obj: dict) -> bool:
    """A workload operator's kind (a PyTorchJob, a JobSet, an LWS, a RayCluster or RayJob)."""
    return str(obj.get("apiVersion", "")).split("/")[0] in OPERATOR_GROUPS


def operator_pods(obj: dict) -> int | None:
    """How many pods a workload operator's object makes at once (None: not such a kind): a Kubeflow
    job its replicas, a JobSet each replicated Job's replicas x parallelism, an LWS its groups x
    size, a RayCluster its head and workers."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    api = str(obj.get("apiVersion", ""))
    if api.startswith("kubeflow.org/"):
        specs = next((v for k, v in spec.items() if k.endswith("ReplicaSpecs") and isinstance(v, dict)), {})
        return sum(_replicas(s) for s in specs.values())
    if kind == "JobSet":
        return 0 if spec.get("suspend") else sum(
            _replicas(rj) * int(((rj.get("template") or {}).get("spec") or {}).get("parallelism", 1))
            for rj in spec.get("replicatedJobs") or [])
    if kind == "LeaderWorkerSet":
        return _replicas(spec) * int((spec.get("leaderWorkerTemplate") or {}).get("size", 1))
    if kind == "RayCluster":
        workers = sum(int(g.get("replicas", g.get("minReplicas", 0)) or 0) * int(g.get("numOfHosts", 1) or 1)
                      for g in spec.get("workerGroupSpecs") or [])
        return 0 if spec.get("suspend") else 1 + workers
    return None


def pods_made(obj: dict) -> int:
    """How many pods of its workload an object makes as soon as it exists: a Pod itself, a Job its
    parallelism (none while suspended: something admits it later), a Deployment its replicas, an
    operator's kind what its operator makes; 0 for what makes none, or whose pods would not carry the
    workload label."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind == "Pod":
        return 1 if OWNER_LABEL in (obj["metadata"].get("labels") or {}) else 0
    made = operator_pods(obj)
    if made is not None:
        labelled = all(OWNER_LABEL in ((t.get("metadata") or {}).get("labels") or {}) for t in pod_templates(obj))
        return made if labelled else 0
    template = spec.get("template")
    if kind not in ("Job", "Deployment") or not isinstance(template, dict) \
            or OWNER_LABEL not in ((template.get("metadata") or {}).get("labels") or {}):
        return 0
    if kind == "Job":
        return 0 if spec.get("suspend") else min(int(spec.get("parallelism", 1)),
                                                 int(spec.get("completions") or spec.get("parallelism", 1)))
    return int(spec.get("replicas", 1))


def namespace(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "kailab", **(labels or {})}}}


def service_account(name: str, ns: str) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}}


def probe_objects(ns: str) -> list[dict]:
    """What `kailab up` asks KAI to schedule before it calls the lab up: one 1-GPU pod."""
    # the namespace's ServiceAccount is made here, not awaited from kube-controller-manager: the
    # API server's admission would hold the probe pod until it exists
    return [namespace(ns), service_account("default", ns),
            queue("kailab-probe-root", {"quota": -1, "limit": -1}),
            queue("kailab-probe", {"quota": 0, "limit": -1}, parent="kailab-probe-root"),
            *pods("kai-probe", ns, "kailab-probe", 1, gpus=1)]
