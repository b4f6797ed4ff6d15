"""The exercise format: YAML a trainer can read, validated before anything is applied.

An exercise = a queue tree + ordered steps. Each step applies / patches / deletes workloads, may
wait for the cluster to settle, then checks `expect` (eventually true, within `timeout`) and
`stays` (true for a whole window). `invariants` are watched for the whole run. Field names here
are the YAML's; `kailab schema` prints the JSON Schema.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from typing import ClassVar

from pydantic import (BaseModel, ConfigDict, Discriminator, Field, PrivateAttr, Tag, field_validator,
                      model_validator)

from ..errors import InputError
from ..fleet import (LABEL_KEY, LABEL_VALUE, RESERVED_LABEL_PREFIXES, RESERVED_LABELS, Fleet, Taint,
                     fleet_path, load_fleet)
from ..paths import fleets_dir
from .. import workloads
from ..inputs import UNION_TAGS, one_line, read_yaml, validate

NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)$")
INVARIANTS = ("no-gpu-overcommit", "gang-never-partial", "nonpreemptible-within-quota", "queue-within-limit")


def seconds(text: str) -> float:
    m = DURATION.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration like 500ms, 15s or 2m")
    value, unit = float(m.group(1)), m.group(2)
    return value / 1000 if unit == "ms" else value * 60 if unit == "m" else value


Duration = Annotated[str, Field(pattern=DURATION.pattern, description="e.g. 500ms, 15s, 2m")]


def _name(v: str) -> str:
    if not NAME.match(v) or len(v) > 40:
        raise ValueError(f"{v!r} is not a valid name (lower-case letters, digits, '-'; max 40)")
    return v


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


class GpuShare(Strict):
    quota: float = Field(0, ge=-1, description="guaranteed GPUs; -1 = unlimited")
    limit: float = Field(-1, ge=-1, description="max GPUs; -1 = no limit")
    over_quota_weight: float = Field(1, ge=0, alias="overQuotaWeight")
    priority: int | None = None

    def as_queue_gpu(self) -> dict:
        out = {"quota": self.quota, "limit": self.limit, "overQuotaWeight": self.over_quota_weight}
        if self.priority is not None:
            out["priority"] = self.priority
        return out


class QueueNode(Strict):
    gpu: GpuShare = GpuShare()
    children: dict[str, "QueueNode"] = {}


class Range(Strict):
    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=0)
    why: str = Field("", description="why KAI's fairness allows a range here")

    @model_validator(mode="after")
    def _bounds(self) -> "Range":
        if self.min is None and self.max is None:
            raise ValueError("a range needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self

    def holds(self, n: int) -> bool:
        return (self.min is None or n >= self.min) and (self.max is None or n <= self.max)

    def __str__(self) -> str:
        if self.min is not None and self.max is not None:
            return f"{self.min}..{self.max}"
        return f">= {self.min}" if self.min is not None else f"<= {self.max}"


Count = Union[Annotated[int, Field(ge=0)], Range]


def count_holds(expected: Count, observed: int) -> bool:
    return observed == expected if isinstance(expected, int) else expected.holds(observed)


def count_text(expected: Count) -> str:
    return str(expected)


# ----------------------------------------------------------------------------- workloads
class TopologyConstraint(Strict):
    """Where a workload's pods must (required) or should (preferred) stay together: a level (node
    label) of the exercise's topology."""

    required: str | None = None
    preferred: str | None = None

    @model_validator(mode="after")
    def _some(self) -> "TopologyConstraint":
        if self.required is None and self.preferred is None:
            raise ValueError("a topology constraint names required, preferred or both (a level's node label)")
        return self


class _Workload(Strict):
    name: str
    queue: str
    gpus: int = Field(1, ge=0, le=64, description="GPUs per pod")
    priority_class: str | None = Field("train", alias="priorityClass")
    preemptible: bool | None = Field(None, description="sets kai.scheduler/preemptibility")
    unschedulable: bool = Field(False, description="this workload is meant never to fit a node")
    node_selector: dict[str, str] | None = Field(None, alias="nodeSelector",
                                                 description="only nodes with these labels (e.g. kubernetes.io/hostname)")
    topology: TopologyConstraint | None = Field(None, description="keep its pods within a topology level")

    _n = field_validator("name")(staticmethod(_name))


class PodsWorkload(_Workload):
    count: int = Field(ge=1, le=10000)
    run_duration: Duration | None = Field(None, alias="runDuration")
    gpu_fraction: float | None = Field(None, gt=0, lt=1, alias="gpuFraction",
                                       description="a part of one GPU's memory (KAI's gpu-fraction), e.g. 0.5")
    gpu_memory: int | None = Field(None, gt=0, alias="gpuMemory", description="MiB of one GPU (KAI's gpu-memory)")

    @model_validator(mode="after")
    def _share(self) -> "PodsWorkload":
        shares = [k for k in ("gpu_fraction", "gpu_memory") if getattr(self, k) is not None]
        if len(shares) > 1:
            raise ValueError("gpuFraction and gpuMemory are two ways to ask for a part of a GPU: use one")
        if shares and "gpus" in self.model_fields_set and self.gpus:
            raise ValueError("a pod asking for a part of a GPU asks for no whole GPUs: drop gpus")
        return self

    @property
    def share(self) -> dict | None:
        if self.gpu_fraction is not None:
            return {workloads.GPU_FRACTION: str(self.gpu_fraction)}
        if self.gpu_memory is not None:
            return {workloads.GPU_MEMORY: str(self.gpu_memory)}
        return None


class JobWorkload(_Workload):
    parallelism: int = Field(ge=1, le=10000)
    gang: int | None = Field(None, ge=1, description="KAI gang size (kai.scheduler/batch-min-member)")
    run_duration: Duration | None = Field(None, alias="runDuration")

    @model_validator(mode="after")
    def _gang(self) -> "JobWorkload":
        if self.gang is not None and self.gang > self.parallelism:
            raise ValueError(f"gang {self.gang} is larger than parallelism {self.parallelism}: it could never start")
        return self


class ElasticWorkload(_Workload):
    pods: int = Field(ge=1, le=10000, description="pods in the group")
    min_member: int = Field(ge=1, alias="minMember", description="KAI runs at least this many together")

    @model_validator(mode="after")
    def _min(self) -> "ElasticWorkload":
        if self.min_member > self.pods:
            raise ValueError(f"minMember {self.min_member} is larger than pods {self.pods}: it could never start")
        return self


class DeploymentWorkload(_Workload):
    replicas: int = Field(ge=0, le=10000)
    priority_class: str | None = Field(None, alias="priorityClass",
                                       description="unset: KAI's podgrouper gives Deployments 'inference'")


class ManifestWorkload(Strict):
    """The escape hatch: any namespaced Kubernetes object the format does not model (a JobSet, a
    PyTorchJob, a pod with its own annotations). kailab puts it in the run's namespace, labels it
    (and its pod template) with the workload's name and, with `queue`, with the real queue."""

    queue: str | None = Field(None, description="sets kai.scheduler/queue to this queue's real name")
    object: dict = Field(description="the manifest: apiVersion, kind, metadata.name, ...")

    @model_validator(mode="after")
    def _shape(self) -> "ManifestWorkload":
        o = self.object
        for key in ("apiVersion", "kind"):
            if not isinstance(o.get(key), str) or not o[key]:
                raise ValueError(f"object.{key} is required")
        meta = o.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise ValueError("object.metadata.name is required")
        _name(meta["name"])
        if "namespace" in meta:
            raise ValueError("object.metadata.namespace is set by the run (each run has its own): remove it")
        return self

    # what the rest of the format asks of a workload
    @property
    def name(self) -> str:
        return self.object["metadata"]["name"]

    gpus: ClassVar[int] = 0
    unschedulable: ClassVar[bool] = False
    node_selector: ClassVar[None] = None
    topology: ClassVar[None] = None


WORKLOAD_KINDS = ("pods", "job", "deployment", "elastic", "manifest")


class ApplyItem(Strict):
    pods: PodsWorkload | None = None
    job: JobWorkload | None = None
    deployment: DeploymentWorkload | None = None
    elastic: ElasticWorkload | None = None
    manifest: ManifestWorkload | None = None

    @model_validator(mode="after")
    def _one(self) -> "ApplyItem":
        if sum(getattr(self, k) is not None for k in WORKLOAD_KINDS) != 1:
            raise ValueError("each apply item is exactly one of: " + ", ".join(WORKLOAD_KINDS))
        return self

    @property
    def workload(self) -> _Workload:
        return getattr(self, self.kind)

    @property
    def kind(self) -> str:
        return next(k for k in WORKLOAD_KINDS if getattr(self, k) is not None)

    @property
    def gang(self) -> int | None:
        """The minimum KAI must run together, for gang-never-partial (None: no gang)."""
        return self.job.gang if self.job else self.elastic.min_member if self.elastic else None

    def manifests(self, namespace: str, queue: str, topology: str | None = None) -> list[dict]:
        """The objects this item creates, in the cluster's namespace and real queue name; with a
        topology constraint, annotated where KAI's podgrouper reads it (the top owner)."""
        objs = self._objects(namespace, queue)
        t = self.workload.topology
        if t is not None and topology:
            marks = {workloads.TOPOLOGY: topology,
                     **({workloads.TOPOLOGY_REQUIRED: t.required} if t.required else {}),
                     **({workloads.TOPOLOGY_PREFERRED: t.preferred} if t.preferred else {})}
            for obj in objs:
                if obj["kind"] in ("Job", "Deployment", "Pod"):
                    obj["metadata"].setdefault("annotations", {}).update(marks)
        return objs

    def _objects(self, namespace: str, queue: str) -> list[dict]:
        if self.pods:
            p = self.pods
            return workloads.pods(p.name, namespace, queue, p.count, 0 if p.share else p.gpus, p.priority_class,
                                  p.preemptible, p.run_duration, node_selector=p.node_selector, share=p.share)
        if self.job:
            j = self.job
            return [workloads.job(j.name, namespace, queue, j.parallelism, j.gpus, j.gang, j.priority_class,
                                  j.preemptible, j.run_duration)]
        if self.elastic:
            e = self.elastic
            return workloads.elastic(e.name, namespace, queue, e.pods, e.min_member, e.gpus, e.priority_class,
                                     e.preemptible)
        if self.manifest:
            return [workloads.adopt(self.manifest.object, namespace, queue if self.manifest.queue else None)]
        d = self.deployment
        return [workloads.deployment(d.name, namespace, queue, d.replicas, d.gpus, d.priority_class,
                                     d.preemptible, node_selector=d.node_selector)]


class PatchItem(Strict):
    queue: str | None = None
    gpu: GpuShare | None = None
    deployment: str | None = None
    replicas: int | None = Field(None, ge=0, le=10000)

    @model_validator(mode="after")
    def _one(self) -> "PatchItem":
        if (self.queue is None) == (self.deployment is None):
            raise ValueError("a patch names exactly one of: queue (with gpu), deployment (with replicas)")
        if self.queue is not None and self.gpu is None:
            raise ValueError("a queue patch needs gpu: {quota, limit, overQuotaWeight}")
        if self.deployment is not None and self.replicas is None:
            raise ValueError("a deployment patch needs replicas")
        return self


FAULT_TARGETS = ("scheduler", "binder", "podgrouper", "queuecontroller", "podgroupcontroller",
                 "kube-controller-manager", "kwok")


class FaultItem(Strict):
    """In order, after the step's apply: kill or restart a lab process (binary runtime), take a
    fleet node away (its Node object is deleted, as when a machine dies) or bring it back, pause."""

    kill: Literal[FAULT_TARGETS] | None = None  # type: ignore[valid-type]
    restart: Literal[FAULT_TARGETS] | None = None  # type: ignore[valid-type]
    node_down: str | None = Field(None, alias="nodeDown")
    node_up: str | None = Field(None, alias="nodeUp")
    pause: Duration | None = None

    @model_validator(mode="after")
    def _one(self) -> "FaultItem":
        if sum(x is not None for x in (self.kill, self.restart, self.node_down, self.node_up, self.pause)) != 1:
            raise ValueError("each fault is exactly one of: kill, restart, nodeDown, nodeUp, pause")
        return self


class UsageSetting(Strict):
    """KAI's time-based fair share (its `usageDBConfig`, read from the lab's Prometheus) and the
    proportion plugin's kValue. The window is sliding: KAI's default and the one its docs advise."""

    windowSize: Duration = Field("5m", description="how much past usage counts (KAI's default: 1w)")
    halfLifePeriod: Duration | None = Field(None, description="exponential decay of past usage (off when unset)")
    fetchInterval: Duration = Field("2s", description="how often the scheduler re-reads usage (KAI's default: 1m)")
    queryResolution: Duration = Field("2s", description="the usage query's step (usageParams.extraParams)")
    kValue: float = Field(1.0, gt=0, description="how strongly past usage lowers a queue's over-quota share")


class SchedulerSetting(Strict):
    """How KAI's scheduler places pods from this step on (restarted with a generated configuration;
    binary runtime). Any value but the exact word `spread` would silently mean binpack in KAI."""

    placement: Literal["binpack", "spread"] = Field("binpack", description="binpack: fullest node first "
                                                   "(KAI's default); spread: emptiest node first")
    usage: UsageSetting | None = Field(None, description="time-based fair share from the lab's Prometheus "
                                       "(off when unset)")
    shard: dict[str, Any] | None = Field(None, description="any SchedulingShard spec fragment (plugins, actions, "
                                         "kValue, queueDepthPerAction, …) merged over placement and usage; the lab's "
                                         "KAI operator code renders it and refuses what that KAI version does not accept")


class DeleteItem(Strict):
    workload: str


class NodeChoice(Strict):
    """Nodes by name or by labels (a selector is read when used: a step may have relabelled nodes)."""

    node: str | None = None
    node_selector: dict[str, str] | None = Field(None, alias="nodeSelector", min_length=1)

    @model_validator(mode="after")
    def _one(self) -> "NodeChoice":
        if (self.node is None) == (self.node_selector is None):
            raise ValueError("name nodes by exactly one of: node, nodeSelector")
        return self

    def holds(self, name: str | None, labels: dict[str, str]) -> bool:
        if not name:
            return False
        if self.node is not None:
            return name == self.node
        return all(labels.get(k) == v for k, v in (self.node_selector or {}).items())

    def __str__(self) -> str:
        return self.node if self.node is not None else ",".join(f"{k}={v}" for k, v in (self.node_selector or {}).items())


class NodeChange(NodeChoice):
    """Change fleet nodes mid-run (recorded in the timeline; put back as the fleet declares them
    when the run ends). Labels kailab sets for the fleet (hostname, pool, nvidia.com/gpu.*) are
    changed only by a change that says `reserved: true`."""

    label: dict[str, str] = Field({}, description="set these labels")
    unlabel: list[str] = Field([], description="remove these label keys")
    taint: list[Taint] = Field([], description="add (or replace, by key and effect) these taints")
    untaint: list[str] = Field([], description="remove the taints with these keys")
    cordon: bool = Field(False, description="mark the nodes unschedulable")
    uncordon: bool = Field(False, description="mark the nodes schedulable again")
    reserved: bool = Field(False, description="this change means to touch labels kailab sets for the fleet")

    @model_validator(mode="after")
    def _something(self) -> "NodeChange":
        if not (self.label or self.unlabel or self.taint or self.untaint or self.cordon or self.uncordon):
            raise ValueError("a node change needs one of: label, unlabel, taint, untaint, cordon, uncordon")
        if self.cordon and self.uncordon:
            raise ValueError("cordon and uncordon together cancel out: use one")
        _plain_labels(self.label)
        keys = set(self.label) | set(self.unlabel)
        reserved = sorted(k for k in keys if k.startswith(RESERVED_LABEL_PREFIXES) or k in RESERVED_LABELS)
        if reserved and not self.reserved:
            raise ValueError(f"label {reserved[0]!r} is set by kailab for the fleet: add reserved: true "
                             "to this change if the exercise means to change it")
        return self

    def describe(self) -> str:
        parts = ([f"label {','.join(f'{k}={v}' for k, v in self.label.items())}"] if self.label else []) + \
                ([f"unlabel {','.join(self.unlabel)}"] if self.unlabel else []) + \
                ([f"taint {','.join(f'{t.key}={t.value}:{t.effect}' for t in self.taint)}"] if self.taint else []) + \
                ([f"untaint {','.join(self.untaint)}"] if self.untaint else []) + \
                (["cordon"] if self.cordon else []) + (["uncordon"] if self.uncordon else [])
        return "; ".join(parts)


def _plain_labels(labels: dict[str, str]) -> None:
    """Label keys and values as Kubernetes takes them; reserved keys are refused by the caller."""
    for key, value in labels.items():
        if not LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
            raise ValueError(f"{key!r} is not a valid label key ([prefix/]name, name up to 63 chars)")
        if not LABEL_VALUE.match(value):
            raise ValueError(f"{value!r} (label {key}) is not a valid label value (max 63 chars)")


# ----------------------------------------------------------------------------- expectations
COUNT_METRICS = ("bound", "running", "pending", "evicted", "nodes", "devices", "domains")


class CountExpect(Strict):
    """Pod counts for a queue or a workload. bound = has a node; running = phase Running."""

    marker: ClassVar[str | None] = None  # the default kind: an item naming no other kind's marker

    queue: str | None = None
    workload: str | None = None
    bound: Count | None = None
    running: Count | None = None
    pending: Count | None = None
    evicted: Count | None = Field(None, description="pods of it deleted by KAI since the step began")
    nodes: Count | None = Field(None, description="distinct nodes its bound pods are on")
    devices: Count | None = Field(None, description="GPU devices its bound pods use (a shared device counts once)")
    domains: Count | None = Field(None, description="distinct values of node label `level` among its bound pods' nodes")
    level: str | None = Field(None, description="with domains: the node label, e.g. kailab.io/rack")
    on: "NodeChoice | None" = Field(None, description="count only its pods on these nodes (by name or labels)")
    why: str = Field("", description="one line: the KAI arithmetic behind the numbers, for a trainer")

    @model_validator(mode="after")
    def _shape(self) -> "CountExpect":
        if (self.queue is None) == (self.workload is None):
            raise ValueError("an expectation names exactly one of: queue, workload")
        if all(getattr(self, k) is None for k in COUNT_METRICS):
            raise ValueError("an expectation needs at least one of: " + ", ".join(COUNT_METRICS))
        if self.on is not None and self.pending is not None:
            raise ValueError("on counts pods placed on nodes; a pending pod is on none: drop pending or on")
        if (self.domains is None) != (self.level is None):
            raise ValueError("domains and level go together: domains counts the values of the node label `level`")
        return self


class ConditionExpect(Strict):
    """A PodGroup scheduling condition reason, e.g. NonPreemptibleOverQuota, OverLimit."""

    marker: ClassVar[str] = "podgroupOf"

    podgroup_of: str = Field(alias="podgroupOf", description="workload name")
    reason: str
    present: bool = True
    every: bool = Field(False, description="every pod of the workload has a PodGroup carrying the "
                        "reason (default: at least one PodGroup does) - proof that the scheduler has "
                        "seen all of them")
    why: str = Field("", description="one line: why KAI gives this reason here")


class EventExpect(Strict):
    """Kubernetes events about a workload's pods or podgroups, counted since the step began."""

    marker: ClassVar[str] = "eventReason"

    event_reason: str = Field(alias="eventReason")
    workload: str
    count: Count = Range(min=1)
    why: str = Field("", description="one line: why KAI records (or does not record) these events")


# what the run's watch keeps whole (see observer.py): an object assertion names one of these
OBJECT_KINDS = ("Pod", "PodGroup", "BindRequest", "ResourceClaim", "Node", "Queue")


class ObjectExpect(Strict):
    """A partial object that must match (as in chainsaw's and kuttl's asserts): objects of a kind,
    chosen by name, labels or workload, of which `count` match `match` (default: at least one;
    `count: 0` = no such object). Values in `match` may be expressions: {regex}, {min, max}, {exists}."""

    marker: ClassVar[str] = "object"

    object: Literal[OBJECT_KINDS] = Field(description="the kind: " + ", ".join(OBJECT_KINDS))  # type: ignore[valid-type]
    name: str | None = Field(None, description="its name (a queue's as in the exercise; ${...} names allowed)")
    of: str | None = Field(None, description="a workload: its pods, their PodGroups, BindRequests and ResourceClaims, the nodes they are on")
    label_selector: dict[str, str] | None = Field(None, alias="labelSelector", description="labels it carries")
    match: dict = Field({}, description="a partial object: metadata / spec / status keys that must match")
    count: Count = Field(Range(min=1), description="how many chosen objects match (0: none does)")
    why: str = Field("", description="one line: what KAI writes here and why")

    @model_validator(mode="after")
    def _shape(self) -> "ObjectExpect":
        from .match import check_pattern

        if self.of is not None and self.object == "Queue":
            raise ValueError("a queue belongs to no workload: choose it by name")
        if self.name is None and self.of is None and self.label_selector is None and self.object != "Queue":
            raise ValueError("choose the objects by name, of (a workload) or labelSelector")
        check_pattern(self.match)
        return self

    def subject(self) -> str:
        chosen = [f"{self.object}"] + ([self.name] if self.name else []) + ([f"of {self.of}"] if self.of else []) \
            + ([",".join(f"{k}={v}" for k, v in self.label_selector.items())] if self.label_selector else [])
        return " ".join(chosen)


class Seconds(Strict):
    """A bound on a duration in seconds (an upper bound is the usual ask of a wait)."""

    min: float | None = Field(None, ge=0)
    max: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> "Seconds":
        if self.min is None and self.max is None:
            raise ValueError("a bound needs min, max or both (seconds)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is greater than max {self.max}")
        return self

    def holds(self, v: float) -> bool:
        return (self.min is None or v >= self.min) and (self.max is None or v <= self.max)

    def __str__(self) -> str:
        return " and ".join(t for t in (f">= {self.min} s" if self.min is not None else "",
                                        f"<= {self.max} s" if self.max is not None else "") if t)


class WaitExpect(Strict):
    """How long a queue's pods waited from created to bound (the run's timeline so far): nearest-rank
    quantiles over every pod of the queue bound since the run began."""

    marker: ClassVar[str] = "waitOf"

    wait_of: str = Field(alias="waitOf", description="queue name")
    p50: Seconds | None = None
    p95: Seconds | None = None
    p99: Seconds | None = None
    max: Seconds | None = None
    why: str = Field("", description="one line: why KAI makes this queue wait so long, or so little")

    @model_validator(mode="after")
    def _some(self) -> "WaitExpect":
        if all(getattr(self, k) is None for k in ("p50", "p95", "p99", "max")):
            raise ValueError("a wait expectation needs at least one of: p50, p95, p99, max")
        return self


EXPECT_MODELS = (CountExpect, ConditionExpect, EventExpect, ObjectExpect, WaitExpect)
UNION_TAGS.update(m.__name__ for m in EXPECT_MODELS)


def _expect_kind(v: object) -> str:
    """The kind an item names by its marker key (Step refuses items naming two)."""
    if not isinstance(v, dict):
        return type(v).__name__
    named = [m for m in EXPECT_MODELS if m.marker is not None and m.marker in v]
    return named[0].__name__ if named else CountExpect.__name__


# tags are class names, never field names: error locations drop them (see inputs.validate)
ExpectItem = Annotated[Union[Annotated[CountExpect, Tag("CountExpect")],
                             Annotated[ConditionExpect, Tag("ConditionExpect")],
                             Annotated[EventExpect, Tag("EventExpect")],
                             Annotated[ObjectExpect, Tag("ObjectExpect")],
                             Annotated[WaitExpect, Tag("WaitExpect")]], Discriminator(_expect_kind)]


def _stays_kind(v: object) -> str:
    return ObjectExpect.__name__ if isinstance(v, dict) and ObjectExpect.marker in v else CountExpect.__name__


# what a window can watch: counts and objects (the watch sees every change of both)
StaysItem = Annotated[Union[Annotated[CountExpect, Tag("CountExpect")],
                            Annotated[ObjectExpect, Tag("ObjectExpect")]], Discriminator(_stays_kind)]


class Stays(Strict):
    """Conditions that must hold at every moment of the window (checked on every watch event)."""

    for_: Duration = Field(alias="for")
    that: list[StaysItem] = Field(min_length=1)


# the step keys that act (see actions.py), in the order used when a step is not built from a file
OPERATIONS = ("scheduler", "delete", "patch", "apply", "nodes", "faults", "settle", "expect", "stays")


class Step(Strict):
    name: str
    explain: str = ""
    predict: str | None = Field(None, description="question for a learner before the step runs")
    scheduler: SchedulerSetting | None = None
    apply: list[ApplyItem] = []
    patch: list[PatchItem] = []
    delete: list[DeleteItem] = []
    faults: list[FaultItem] = []
    nodes: list[NodeChange] = Field([], description="label, unlabel, taint, untaint, cordon, uncordon fleet nodes")
    settle: Duration | None = Field(None, description="wait until pod placement is unchanged this long")
    expect: list[ExpectItem] = []
    stays: Stays | None = None
    timeout: Duration = "120s"
    _order: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _one_kind_per_expectation(cls, data):
        if isinstance(data, dict) and isinstance(data.get("expect"), list):
            markers = [m.marker for m in EXPECT_MODELS if m.marker]
            for i, item in enumerate(data["expect"]):
                named = [k for k in markers if isinstance(item, dict) and k in item]
                if len(named) > 1:
                    raise ValueError(f"expect[{i}] names {' and '.join(named)}: one kind per item")
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data, handler):
        # the operations run in the order the file writes them: remember it (models keep none)
        step = handler(data)
        if isinstance(data, dict):
            step._order = [k for k in data if k in OPERATIONS]
        return step

    def operations(self) -> list[tuple[str, object]]:
        """(key, value) of each operation the step has, in the order written."""
        order = self._order or list(OPERATIONS)
        present = {k: v for k in OPERATIONS if (v := getattr(self, k)) not in (None, [])}
        return [(k, present[k]) for k in order if k in present]


class Exercise(Strict):
    exercise: str
    title: str
    concept: str
    fleet: str = Field(description="the fleet the numbers are chosen for (fleets/NAME.yaml)")
    queues: dict[str, QueueNode] = Field(min_length=1)
    topology: list[str] | None = Field(None, min_length=1, description="a KAI Topology: its levels' node labels, "
                                       "widest first (e.g. [topology.kubernetes.io/zone, kailab.io/rack])")
    steps: list[Step] = Field(min_length=1)
    invariants: list[Literal[INVARIANTS]] = []  # type: ignore[valid-type]
    proves: str = ""
    does_not_prove: str = ""

    _n = field_validator("exercise")(staticmethod(_name))

    def queue_tree(self) -> list[tuple[str, str | None, GpuShare]]:
        return queue_tree(self.queues)

    def leaf_queues(self) -> set[str]:
        return leaf_queues(self.queues)


def queue_tree(queues: dict[str, QueueNode]) -> list[tuple[str, str | None, GpuShare]]:
    """(name, parent, gpu) parents first."""
    out: list[tuple[str, str | None, GpuShare]] = []

    def walk(nodes: dict[str, QueueNode], parent: str | None) -> None:
        for name, node in nodes.items():
            out.append((name, parent, node.gpu))
            walk(node.children, name)

    walk(queues, None)
    return out


def leaf_queues(queues: dict[str, QueueNode]) -> set[str]:
    tree = queue_tree(queues)
    parents = {p for _, p, _ in tree if p}
    return {n for n, _, _ in tree if n not in parents}


def _check_references(ex: Exercise, fleet: Fleet, path: Path) -> None:
    """Cross-field checks pydantic cannot do: names exist, sizes fit the fleet."""
    names = [n for n, _, _ in ex.queue_tree()]
    for n in names:
        try:
            _name(n)
        except ValueError as err:
            raise InputError(path, f"queues.{one_line(str(n))}", str(err)) from None
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InputError(path, "queues", f"queue {sorted(dup)[0]!r} appears twice in the tree", "rename one")
    leaves = ex.leaf_queues()
    workloads: dict[str, str] = {}
    nodes = {n["metadata"]["name"] for n in fleet.node_manifests()}
    set_labels: set[tuple[str, str]] = set()  # labels node steps set so far (a selector may name them)
    known_names = run_names(ex)
    step_labels = {item for step in ex.steps for change in step.nodes for item in change.label.items()}
    for si, step in enumerate(ex.steps):
        where = f"steps[{si}] ({one_line(step.name)})"
        for ai, item in enumerate(step.apply):
            w = item.workload
            kind = item.kind
            field = f"{where}.apply[{ai}].{kind}"
            if w.queue is None:  # a manifest that names no queue
                pass
            elif w.queue not in names:
                raise InputError(path, f"{field}.queue", f"queue {w.queue!r} is not in the queue tree",
                                 f"define it under queues (have: {', '.join(names)})")
            if w.queue is not None and w.queue not in leaves:
                raise InputError(path, f"{field}.queue", f"queue {w.queue!r} has children; KAI schedules "
                                 "workloads in leaf queues only", "use one of its child queues")
            if w.gpus > fleet.max_gpus_per_node and not w.unschedulable:
                raise InputError(path, f"{field}.gpus", f"{w.gpus} GPUs per pod is more than any node of "
                                 f"fleet {fleet.name!r} has ({fleet.max_gpus_per_node})",
                                 "lower it, or set unschedulable: true if that is the point")
            if w.node_selector and not any(all(n["metadata"]["labels"].get(k) == v for k, v in w.node_selector.items())
                                           for n in fleet.node_manifests()) \
                    and not set(w.node_selector.items()) <= step_labels:  # waits for a node step's label
                raise InputError(path, f"{field}.nodeSelector", f"no node of fleet {fleet.name!r} has the labels "
                                 f"{w.node_selector}", "use a node's labels, e.g. kubernetes.io/hostname: <node>, "
                                 "or set them with a nodes: step")
            if w.topology is not None:
                levels = ex.topology or []
                for which in ("required", "preferred"):
                    level = getattr(w.topology, which)
                    if level is not None and level not in levels:
                        raise InputError(path, f"{field}.topology.{which}", f"{level!r} is not a level of the "
                                         "exercise's topology", f"levels: {', '.join(levels) or 'none (add topology:)'}")
            if kind == "manifest":
                _check_placeholders(item.manifest.object, known_names, path, f"{field}.object")
                _check_device_classes(item.manifest.object, fleet, path, f"{field}.object")
            if w.name in workloads and workloads[w.name] != kind:
                raise InputError(path, f"{field}.name", f"workload {w.name!r} is already a {workloads[w.name]}")
            workloads[w.name] = kind
        for pi, p in enumerate(step.patch):
            if p.queue is not None and p.queue not in names:
                raise InputError(path, f"{where}.patch[{pi}].queue", f"queue {p.queue!r} is not in the queue tree")
            if p.deployment is not None and workloads.get(p.deployment) != "deployment":
                raise InputError(path, f"{where}.patch[{pi}].deployment",
                                 f"no deployment {p.deployment!r} was applied before this step")
        for ni, change in enumerate(step.nodes):
            _check_nodes(change, fleet, set_labels, path, f"{where}.nodes[{ni}]")
        for change in step.nodes:
            set_labels.update(change.label.items())
        for fi, f in enumerate(step.faults):
            node = f.node_down or f.node_up
            if node is not None and node not in nodes:
                raise InputError(path, f"{where}.faults[{fi}]", f"node {node!r} is not in fleet {fleet.name!r}",
                                 f"nodes: {', '.join(sorted(nodes)[:6])}...")
        for di, d in enumerate(step.delete):
            if d.workload not in workloads:
                raise InputError(path, f"{where}.delete[{di}].workload",
                                 f"no workload {d.workload!r} was applied before this step")
        checks: list[tuple[str, ExpectItem]] = [(f"{where}.expect[{i}]", e) for i, e in enumerate(step.expect)]
        if step.stays:
            checks += [(f"{where}.stays.that[{i}]", e) for i, e in enumerate(step.stays.that)]
        for field, e in checks:
            if isinstance(e, CountExpect) and e.queue is not None and e.queue not in names:
                raise InputError(path, f"{field}.queue", f"queue {e.queue!r} is not in the queue tree")
            if isinstance(e, WaitExpect):
                if e.wait_of not in names:
                    raise InputError(path, f"{field}.waitOf", f"queue {e.wait_of!r} is not in the queue tree",
                                     f"name one of: {', '.join(names)}")
                continue
            if isinstance(e, CountExpect) and e.on is not None:
                _check_nodes(e.on, fleet, set_labels, path, f"{field}.on")
            if isinstance(e, ObjectExpect):
                _check_object(e, names, nodes, known_names, path, field)
            ref = (e.workload if isinstance(e, (CountExpect, EventExpect))
                   else e.of if isinstance(e, ObjectExpect) else e.podgroup_of)
            if ref is not None and ref not in workloads:
                raise InputError(path, f"{field}", f"workload {ref!r} is not applied by this or an earlier step")


def _check_device_classes(obj: dict, fleet: Fleet, path: Path, field: str) -> None:
    """A ResourceClaim(Template) must ask for a DeviceClass the fleet publishes (a typo would leave
    the pod pending with no reason the exercise means)."""
    kind = obj.get("kind")
    if kind not in ("ResourceClaim", "ResourceClaimTemplate"):
        return
    spec = obj.get("spec") or {}
    spec = (spec.get("spec") or {}) if kind == "ResourceClaimTemplate" else spec
    prefix = f"{field}.spec" + (".spec" if kind == "ResourceClaimTemplate" else "")
    classes = {o["metadata"]["name"] for o in fleet.dra_objects() if o["kind"] == "DeviceClass"}
    for i, req in enumerate(((spec.get("devices") or {}).get("requests")) or []):
        name = ((req or {}).get("exactly") or {}).get("deviceClassName")
        if name is not None and name not in classes:
            raise InputError(path, f"{prefix}.devices.requests[{i}].exactly.deviceClassName",
                             f"DeviceClass {one_line(str(name))!r} is not published by fleet {fleet.name!r}",
                             f"use {', '.join(sorted(classes))}" if classes
                             else "give a pool dra: true (e.g. fleet dra) for DRA devices")


def run_names(ex: Exercise) -> set[str]:
    """The ${...} names a file may use for what each run names anew (see checks.Names.of_run)."""
    return {"namespace", "run"} | ({"topology"} if ex.topology else set()) | \
        {f"queue:{n}" for n, _, _ in ex.queue_tree()}


def _check_placeholders(value: object, known: set[str], path: Path, field: str) -> None:
    from .match import placeholders

    for name in placeholders(value):
        if name not in known:
            queues = sorted(k for k in known if k.startswith("queue:"))
            raise InputError(path, field, f"unknown name ${{{one_line(name)}}}",
                             "use ${namespace}, ${run}, " + ("${topology}, " if "topology" in known else "")
                             + ", ".join(f"${{{q}}}" for q in queues[:4]))


def _check_nodes(choice: NodeChoice, fleet: Fleet, set_labels: set[tuple[str, str]], path: Path, field: str) -> None:
    """A node must be a fleet node; a selector must match one, or name labels a node step sets."""
    manifests = fleet.node_manifests()
    if choice.node is not None:
        if choice.node not in {n["metadata"]["name"] for n in manifests}:
            raise InputError(path, f"{field}.node", f"node {choice.node!r} is not in fleet {fleet.name!r}",
                             f"nodes: {', '.join(sorted(n['metadata']['name'] for n in manifests)[:6])}")
        return
    sel = choice.node_selector or {}
    if not any(all(n["metadata"]["labels"].get(k) == v for k, v in sel.items()) for n in manifests) \
            and not set(sel.items()) <= set_labels:
        raise InputError(path, f"{field}.nodeSelector", f"no node of fleet {fleet.name!r} has the labels {sel}",
                         "use a node's labels, or set them with an earlier nodes: step")


def _check_object(e: "ObjectExpect", queues: list[str], nodes: set[str], known: set[str], path: Path,
                  field: str) -> None:
    _check_placeholders({"name": e.name, "match": e.match}, known, path, field)
    if e.name is None or "${" in e.name:
        return
    if e.object == "Queue" and e.name not in queues:
        raise InputError(path, f"{field}.name", f"queue {e.name!r} is not in the queue tree")
    if e.object == "Node" and e.name not in nodes:
        raise InputError(path, f"{field}.name", f"node {e.name!r} is not in the exercise's fleet")


def fleet_reference(fleet: str, exercise_path: Path) -> str:
    """A fleet name as written; a fleet file's path relative to the exercise file, so the exercise
    means the same fleet from any working directory."""
    p = fleet_path(fleet)
    if p.is_absolute() or p.parent == fleets_dir():
        return fleet if p.parent == fleets_dir() else str(p)
    return str((exercise_path.parent / p).resolve())


def load_exercise(path: Path | str) -> Exercise:
    """Parse, validate and cross-check an exercise file; raise InputError naming file and field."""
    path = Path(path)
    data = read_yaml(path)
    if isinstance(data, dict) and isinstance(data.get("steps"), list):
        # name the step in errors: pydantic only knows its index
        for i, step in enumerate(data["steps"]):
            if isinstance(step, dict):
                known = set(Step.model_fields) | {"for"}
                unknown = [k for k in step if k not in known]
                if unknown:
                    label = one_line(str(step.get("name", "?")))
                    raise InputError(path, f"steps[{i}] ({label}).{one_line(str(unknown[0]))}",
                                     "unknown step field", "known: " + ", ".join(Step.model_fields))
    try:
        ex = validate(Exercise, data, path)
    except InputError as err:
        m = re.match(r"steps\[(\d+)\](.*)", err.field)
        if m and isinstance(data, dict):
            step = data["steps"][int(m.group(1))]
            label = one_line(str(step.get("name", "?"))) if isinstance(step, dict) else "?"
            raise InputError(path, f"steps[{m.group(1)}] ({label}){m.group(2)}", err.problem, err.fix) from None
        raise
    if ex.exercise != path.stem:
        raise InputError(path, "exercise", f"name {ex.exercise!r} differs from the file name {path.stem!r}",
                         "make them equal")
    ex.fleet = fleet_reference(ex.fleet, path)
    try:
        fleet = load_fleet(ex.fleet)
    except InputError as err:
        raise InputError(path, "fleet", f"unknown fleet {ex.fleet!r} ({err.problem})") from None
    _check_references(ex, fleet, path)
    return ex


def json_schema() -> dict:
    schema = Exercise.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kailab exercise"
    return schema
