"""The exercise format: YAML a trainer can read, validated before anything is applied (loading and
checking a file against its fleet: load.py; building blocks: spec_base.py; expectations: spec_expect.py).

An exercise = a queue tree + ordered steps. Each step applies / patches / deletes workloads, may
wait for the cluster to settle, then checks `expect` (eventually true, within `timeout`) and
`stays` (true for a whole window). `invariants` are watched for the whole run. Field names here
are the YAML's; `kailab schema` prints the JSON Schema.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from .. import workloads
from ..fleet import LABEL_KEY, LABEL_VALUE, RESERVED_LABEL_PREFIXES, RESERVED_LABELS, Taint

# the format's parts, re-exported: `from .spec import X` names any model of the format
from .spec_base import (DURATION, INVARIANTS, NAME, Count, Duration, GpuShare, NodeChoice, QueueNode, Range, Strict,  # noqa: F401
                        _name, count_holds, count_text, seconds)
from .spec_expect import (COUNT_METRICS, EXPECT_MODELS, OBJECT_KINDS, ConditionExpect, CountExpect,  # noqa: F401
                          EventExpect, ExpectItem, ObjectExpect, Seconds, StaysItem, WaitExpect)
from .faults import FaultItem  # a `faults:` item: one field a fault of the registry (faults.py)


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
    termination_exit_code: int | None = Field(
        None, ge=0, le=255, alias="terminationExitCode",
        description="the exit code its pods end with when deleted (default 143, SIGTERM: Failed; 0: Succeeded)")

    _n = field_validator("name")(staticmethod(_name))

    @property
    def ends(self) -> dict:
        """The annotations that say how its pods end, beyond a run time (workloads.ending)."""
        return workloads.ending(None, getattr(self, "exit_code", None), self.termination_exit_code)


class _RunsFor(Strict):
    """A workload whose pods may end by themselves: after a run time, with an exit code."""

    run_duration: Duration | None = Field(None, alias="runDuration",
                                          description="each pod ends this long after it starts")
    exit_code: int | None = Field(None, ge=0, le=255, alias="exitCode",
                                  description="with runDuration: the exit code it ends with (0: Succeeded, default; else Failed)")

    @model_validator(mode="after")
    def _exit_needs_run_time(self):
        if self.exit_code is not None and self.run_duration is None:
            raise ValueError("exitCode is how a pod ends after its runDuration: give runDuration too")
        return self


class PodsWorkload(_Workload, _RunsFor):
    count: int = Field(ge=1, le=10000)
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


class JobWorkload(_Workload, _RunsFor):
    parallelism: int = Field(ge=1, le=10000)
    gang: int | None = Field(None, ge=1, description="KAI gang size (kai.scheduler/batch-min-member)")
    completions: int | None = Field(None, ge=1, le=10000, description="default: parallelism")
    backoff_limit: int = Field(0, ge=0, le=1000, alias="backoffLimit",
                               description="failed pods the Job tolerates before it fails (default 0)")
    ignore_disruptions: bool = Field(
        True, alias="ignoreDisruptions",
        description="a podFailurePolicy that ignores pods ended with a DisruptionTarget condition (default true)")

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
                                  p.preemptible, p.run_duration, node_selector=p.node_selector, share=p.share,
                                  ends=p.ends)
        if self.job:
            j = self.job
            return [workloads.job(j.name, namespace, queue, j.parallelism, j.gpus, j.gang, j.priority_class,
                                  j.preemptible, j.run_duration, completions=j.completions,
                                  backoff_limit=j.backoff_limit, ignore_disruptions=j.ignore_disruptions,
                                  ends=j.ends)]
        if self.elastic:
            e = self.elastic
            return workloads.elastic(e.name, namespace, queue, e.pods, e.min_member, e.gpus, e.priority_class,
                                     e.preemptible, ends=e.ends)
        if self.manifest:
            return [workloads.adopt(self.manifest.object, namespace, queue if self.manifest.queue else None)]
        d = self.deployment
        return [workloads.deployment(d.name, namespace, queue, d.replicas, d.gpus, d.priority_class,
                                     d.preemptible, node_selector=d.node_selector, ends=d.ends)]


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


class UsageSetting(Strict):
    """KAI's time-based fair share (its `usageDBConfig`, read from the lab's Prometheus) and the
    proportion plugin's kValue. The window is sliding: KAI's default and the one its docs advise."""

    windowSize: Duration = Field("5m", description="how much past usage counts (KAI's default: 1w)")
    halfLifePeriod: Duration | None = Field(None, description="exponential decay of past usage (off when unset)")
    fetchInterval: Duration = Field("2s", description="how often the scheduler re-reads usage (KAI's default: 1m)")
    queryResolution: Duration = Field("2s", description="the usage query's step (usageParams.extraParams)")
    kValue: float = Field(1.0, gt=0, description="how strongly past usage lowers a queue's over-quota share")


class SchedulerSetting(Strict):
    """How the lab's scheduler places pods from this step on (KAI: restarted with a generated
    configuration; Volcano: its configuration file rewritten; binary runtime). Any value but the
    exact word `spread` would silently mean binpack in KAI."""

    placement: Literal["binpack", "spread"] = Field("binpack", description="binpack: fullest node first "
                                                   "(KAI's default); spread: emptiest node first")
    usage: UsageSetting | None = Field(None, description="time-based fair share from the lab's Prometheus "
                                       "(off when unset)")
    shard: dict[str, Any] | None = Field(None, description="any SchedulingShard spec fragment (plugins, actions, "
                                         "kValue, queueDepthPerAction, …) merged over placement and usage; the lab's "
                                         "KAI operator code renders it and refuses what that KAI version does not accept")
    volcano: str | dict[str, Any] | None = Field(None, description="the volcano stack's scheduler configuration: a "
                                                 "name kailab ships (capacity, proportion: kailab/data/volcano.yaml) or "
                                                 "a whole one (actions, tiers); placement turns its binpack plugin on "
                                                 "(binpack) or off (spread). Other stacks refuse it by name")


class DeleteItem(Strict):
    workload: str


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
    stacks: list[str] | None = Field(None, description="the scheduler stacks this exercise runs on (default: any); "
                                     "on another it is refused by name before anything is made")
    invariants_on: dict[str, list[Literal[INVARIANTS]]] = Field(  # type: ignore[valid-type]
        {}, alias="invariantsOn", description="per scheduler stack, the invariants watched on it instead of "
        "`invariants` (one a stack does not promise is left out there, and the file says why)")
    operators: list[str] = Field([], description="the workload operators its manifests need (kailab up --operators): "
                                 "a lab kailab brings up for it runs them; another lab without them is refused")
    proves: str = ""
    does_not_prove: str = ""

    _n = field_validator("exercise")(staticmethod(_name))

    @field_validator("operators")
    @classmethod
    def _known_operators(cls, value: list[str]) -> list[str]:
        from ..errors import KailabError
        from ..operators import parse

        try:
            return list(parse(value, where="operators"))
        except KailabError as err:  # one line naming the field, as every input error
            raise ValueError(str(err).removeprefix("operators: ")) from None

    def queue_tree(self) -> list[tuple[str, str | None, GpuShare]]:
        return queue_tree(self.queues)

    @property
    def names_nodes(self) -> bool:
        """It changes fleet nodes by name (faults that name a node, `nodes:` steps)."""
        return any(s.nodes or any(f.fault.names_node for f in s.faults) for s in self.steps)

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


def json_schema() -> dict:
    schema = Exercise.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "kailab exercise"
    return schema
