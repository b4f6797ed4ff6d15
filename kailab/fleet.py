"""Fleet specs (fleets/*.yaml): pools of fake GPU nodes, and the Node objects they become.

Nodes look the way fake-gpu-operator + KWOK make them on a kind lab: `nvidia.com/gpu` in
capacity/allocatable and the `nvidia.com/gpu.*` labels, so KAI cannot tell the runtimes apart.
A pool with `dra: true` publishes its GPUs as DRA devices instead, as fake-gpu-operator's KWOK DRA
plugin does in KAI's own e2e setup: one ResourceSlice per node under driver `gpu.nvidia.com` and a
DeviceClass of that name, and no `nvidia.com/gpu` on the node (KAI would count both).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .errors import InputError
from .paths import fleets_dir
from .inputs import is_file, read_yaml, validate
from .node_labels import (DEVICE_PLUGIN_LABEL, DRA_PLUGIN_LABEL, FLEET_LABEL, KWOK_ANNOTATION,  # noqa: F401
                          POOL_LABEL, SIMULATED_POOL_LABEL)

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_NODES = 5000
LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
RESERVED_LABEL_PREFIXES = ("nvidia.com/gpu.",)
RESERVED_LABELS = {"kubernetes.io/hostname", "type", "run.ai/simulated-gpu-node-pool",
                   "kailab.io/fleet", "kailab.io/pool"}


class Taint(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Pool(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    count: int = Field(ge=1, le=MAX_NODES)
    gpus: int = Field(ge=0, le=64, description="whole GPUs per node")
    product: str = "NVIDIA-A100-SXM4-80GB"
    gpu_memory_mib: int = Field(81920, ge=1, le=1 << 22, alias="gpuMemoryMiB")
    cpu: int = Field(64, ge=1, le=4096)
    memory_gib: int = Field(512, ge=1, le=1 << 16, alias="memoryGiB")
    max_pods: int = Field(110, ge=1, le=10000, alias="maxPods")
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    # topology levels: label key -> domain names; the pool's nodes are split into contiguous
    # blocks, one per domain (e.g. 4 nodes, racks [r1, r2] -> r1, r1, r2, r2)
    topology: dict[str, list[str]] = {}
    dra: bool = Field(False, description="GPUs as DRA devices (ResourceSlices), not nvidia.com/gpu")

    @field_validator("dra")
    @classmethod
    def _dra_has_gpus(cls, v: bool, info) -> bool:
        if v and not info.data.get("gpus"):
            raise ValueError("a DRA pool publishes its GPUs as devices: give it gpus >= 1 (and a product)")
        return v

    @field_validator("topology")
    @classmethod
    def _topology(cls, v: dict[str, list[str]], info) -> dict[str, list[str]]:
        count = info.data.get("count", 0)
        for key, domains in v.items():
            if not domains:
                raise ValueError(f"topology level {key!r} needs at least one domain")
            if len(set(domains)) != len(domains):
                raise ValueError(f"topology level {key!r} lists a domain twice")
            for d in domains:
                cls._labels({key: d})
            if count and len(domains) > count:
                raise ValueError(f"topology level {key!r} has {len(domains)} domains for {count} nodes")
        return v

    def topology_labels(self, index: int) -> dict[str, str]:
        return {key: domains[index * len(domains) // self.count] for key, domains in self.topology.items()}

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not DNS_LABEL.match(v) or len(v) > 40:
            raise ValueError(f"{v!r} is not a DNS label (lower-case letters, digits, '-'; max 40)")
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
                raise ValueError(f"{key!r} is not a valid label key ([prefix/]name, name up to 63 chars)")
            if key.startswith(RESERVED_LABEL_PREFIXES) or key in RESERVED_LABELS:
                raise ValueError(f"label {key!r} is set by kailab itself; choose another key")
            if not LABEL_VALUE.match(value):
                raise ValueError(f"{value!r} (label {key}) is not a valid label value (max 63 chars)")
        return v

    @field_validator("product")
    @classmethod
    def _label_value(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", v):
            raise ValueError(f"{v!r} cannot be a label value (letters, digits, '-', '_', '.')")
        return v


NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class Node(BaseModel):
    """One node as a cluster had it (a twin's fleet, kailab.twin): its own name, labels, taints and
    resources, where a pool's nodes are made alike."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    unschedulable: bool = False
    capacity: dict[str, str]
    allocatable: dict[str, str]

    @field_validator("name")
    @classmethod
    def _node_name(cls, v: str) -> str:
        if not NODE_NAME.match(v) or len(v) > 253:
            raise ValueError(f"{v!r} is not a node name (DNS subdomain: lower-case letters, digits, '-', '.')")
        return v

    @property
    def gpus(self) -> int:
        return int(self.allocatable.get("nvidia.com/gpu", "0") or 0)

    def manifest(self, fleet: str) -> dict:
        labels = {**self.labels, "kubernetes.io/hostname": self.name, "type": "kwok", FLEET_LABEL: fleet}
        spec: dict = {"taints": [t.model_dump() for t in self.taints]} if self.taints else {}
        if self.unschedulable:
            spec["unschedulable"] = True
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.name, "labels": labels,
                             "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"}},
                "spec": spec, "status": {"capacity": dict(self.capacity), "allocatable": dict(self.allocatable)}}


class Fleet(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    description: str = ""
    nodes: list[Node] = []  # nodes one by one, as a cluster had them (a twin's fleet); then pools may be []
    pools: list[Pool]

    @model_validator(mode="before")
    @classmethod
    def _nodes_alone(cls, data):
        if isinstance(data, dict) and data.get("nodes") and "pools" not in data:
            return {**data, "pools": []}
        return data

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:  # the value of a label on every node: the pools' rule
        return Pool._dns(v)

    @field_validator("pools")
    @classmethod
    def _unique(cls, pools: list[Pool], info) -> list[Pool]:  # a field validator, so errors name `pools`
        if not pools and not info.data.get("nodes"):
            raise ValueError("List should have at least 1 item (a pool of nodes)")
        seen: set[str] = set()
        for pool in pools:
            if pool.name in seen:
                raise ValueError(f"pool name {pool.name!r} is used twice")
            seen.add(pool.name)
        total = sum(p.count for p in pools) + len(info.data.get("nodes") or [])
        if total > MAX_NODES:
            raise ValueError(f"{total} nodes is more than the {MAX_NODES} a lab supports")
        named = {n.name for n in info.data.get("nodes") or []} & {node_name(p, i) for p in pools for i in range(p.count)}
        if named:
            raise ValueError(f"node {sorted(named)[0]!r} is both a pool's and listed in nodes")
        return pools

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, nodes: list[Node], info) -> list[Node]:
        names = [n.name for n in nodes]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"node {twice[0]!r} is listed twice")
        return nodes

    @property
    def nodes_total(self) -> int:
        return sum(p.count for p in self.pools) + len(self.nodes)

    @property
    def gpus_total(self) -> int:
        return sum(p.count * p.gpus for p in self.pools) + sum(n.gpus for n in self.nodes)

    @property
    def products(self) -> set[str]:
        """The GPU products its nodes carry (nvidia.com/gpu.product)."""
        return {p.product for p in self.pools if p.gpus} | {
            n.labels["nvidia.com/gpu.product"] for n in self.nodes if n.gpus and "nvidia.com/gpu.product" in n.labels}

    @property
    def max_gpus_per_node(self) -> int:
        return max([p.gpus for p in self.pools] + [n.gpus for n in self.nodes])

    @property
    def dra_gpus(self) -> int:
        return sum(p.count * p.gpus for p in self.pools if p.dra)

    def node_manifests(self, prefix: str = "", labels: dict[str, str] | None = None) -> list[dict]:
        """The fleet's KWOK nodes; with `prefix`, named `<prefix><name>` (a pool of its own on a host
        shared with other pools of the same fleet), carrying `labels` besides the fleet's."""
        nodes = [node for pool in self.pools for node in _pool_nodes(self.name, pool)]
        nodes += [n.manifest(self.name) for n in self.nodes]
        for node in nodes if prefix or labels else []:
            meta = node["metadata"]
            meta["name"] = prefix + meta["name"]
            meta["labels"].update({**(labels or {}), "kubernetes.io/hostname": meta["name"]})
        return nodes

    def dra_objects(self) -> list[dict]:
        """The DeviceClass and one ResourceSlice per node of the DRA pools ([] without any)."""
        slices = [_resource_slice(f"{pool.name}-{i}", pool) for pool in self.pools if pool.dra
                  for i in range(pool.count)]
        return [device_class(), *slices] if slices else []


DRA_DRIVER = "gpu.nvidia.com"  # KAI counts GPUs of drivers and classes whose name holds "gpu"


def device_class() -> dict:
    """The GPU DeviceClass as fake-gpu-operator (v0.2.0) and NVIDIA's DRA driver name it."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": DRA_DRIVER, "labels": {"app.kubernetes.io/managed-by": "kailab-fake-nodes"}},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRA_DRIVER}' && "
                                                          f"device.attributes['{DRA_DRIVER}'].type == 'gpu'"}}]}}


def _resource_slice(node: str, pool: "Pool") -> dict:
    """What a DRA driver on `node` publishes: one device per GPU, with the GPU's product, UUID and
    memory (the attributes fake-gpu-operator's KWOK DRA plugin sets)."""
    devices = [{"name": f"gpu-{k}",
                "attributes": {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{node}-{k}"},
                               "productName": {"string": pool.product}},
                "capacity": {"memory": {"value": f"{pool.gpu_memory_mib}Mi"}}}
               for k in range(pool.gpus)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu", "labels": {"app.kubernetes.io/managed-by": "kailab-fake-nodes",
                                                          POOL_LABEL: pool.name}},
            "spec": {"driver": DRA_DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def node_name(pool: Pool, index: int) -> str:
    return f"{pool.name}-{index}"


def _pool_nodes(fleet: str, pool: Pool) -> list[dict]:
    nodes = []
    for i in range(pool.count):
        name = node_name(pool, i)
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            FLEET_LABEL: fleet,
            POOL_LABEL: pool.name,
            # fake-gpu-operator's pool: GPU pools only. On a kind lab its status-exporter labels every
            # node of a pool it knows, a CPU node too (nvidia.com/gpu.present=true, gpu.count=0 and its
            # default product): KAI's e2e then took a CPU node for a GPU one (predicates, 2026-11-29)
            **({SIMULATED_POOL_LABEL: pool.name} if pool.gpus else {}),
            **pool.labels,
            **pool.topology_labels(i),
        }
        if pool.gpus:
            labels.update({
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(pool.gpus),
                "nvidia.com/gpu.product": pool.product,
                "nvidia.com/gpu.memory": str(pool.gpu_memory_mib),
            })
        if pool.dra:  # the labels KAI's e2e kind setup puts on its workers, by how their GPUs are published
            labels[DRA_PLUGIN_LABEL] = "true"
        elif pool.gpus:
            labels[DEVICE_PLUGIN_LABEL] = "true"
        resources = {"cpu": str(pool.cpu), "memory": f"{pool.memory_gib}Gi",
                     "pods": str(pool.max_pods), "ephemeral-storage": "1Ti"}
        if pool.gpus and not pool.dra:
            resources["nvidia.com/gpu"] = str(pool.gpus)
        nodes.append({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": [t.model_dump() for t in pool.taints]} if pool.taints else {},
            "status": {"capacity": dict(resources), "allocatable": dict(resources)},
        })
    return nodes


def fleet_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or "/" in name_or_path:
        return p
    return fleets_dir() / f"{name_or_path}.yaml"


def load_fleet(name_or_path: str) -> Fleet:
    path = fleet_path(name_or_path)
    if not is_file(path):
        known = ", ".join(sorted(f.stem for f in fleets_dir().glob("*.yaml")))
        raise InputError(path, "", "fleet file not found", f"known fleets: {known}")
    fleet = validate(Fleet, read_yaml(path), path)
    return fleet


# label keys Kubernetes itself may put on a node, and those that select a pool of the fleet on a host
# it shares with other pools (node_manifests' prefix): not the fleet's to declare
NOT_THE_FLEETS = ("node.kubernetes.io/", "node-role.kubernetes.io/", "beta.kubernetes.io/", "trial.kailab.io/")


def _labels_set_by_kailab(node: dict) -> set[str] | None:
    """Label keys kailab's field managers own on `node` (None when the object has no managedFields)."""
    fields = node["metadata"].get("managedFields") or node["metadata"].get("managed_fields")
    if not fields:
        return None
    keys: set[str] = set()
    for entry in fields:
        if not str(entry.get("manager", "")).startswith("kailab"):
            continue
        labels = ((entry.get("fieldsV1") or entry.get("fields_v1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        keys |= {k[2:] for k in labels if k.startswith("f:")}
    return keys


# taints Kubernetes' node lifecycle controller puts on and takes off (not-ready, unreachable, ...): a
# node's passing state, not the fleet's identity (fleet_check waits for them to go)
LIFECYCLE_TAINTS = "node.kubernetes.io/"


def fleet_difference(fleet: Fleet, nodes: list[dict], prefix: str = "") -> str | None:
    """How the cluster's fleet nodes (Node objects carrying kailab's fleet label) differ from what
    `fleet` declares - names, declared labels, GPUs, taints - or None when they are that fleet.
    An exercise's numbers are chosen for one fleet: a lab of another must not run it. `prefix`: the
    lab names its fleet's nodes `<prefix><name>` (node_manifests)."""
    have = {n["metadata"]["name"]: n for n in nodes if FLEET_LABEL in (n["metadata"].get("labels") or {})}
    want = {n["metadata"]["name"]: n for n in fleet.node_manifests(prefix)}
    running = sorted({(n["metadata"]["labels"] or {})[FLEET_LABEL] for n in have.values()})
    if set(have) != set(want):
        missing, extra = sorted(set(want) - set(have)), sorted(set(have) - set(want))
        parts = ([f"no node {', '.join(missing[:3])}"] if missing else []) + \
                ([f"unexpected node {', '.join(extra[:3])}"] if extra else [])
        return f"fleet {', '.join(running) or '(none)'} with {len(have)} nodes; {'; '.join(parts)}"
    for name, node in sorted(want.items()):
        got = have[name]
        labels = got["metadata"].get("labels") or {}
        for key, value in node["metadata"]["labels"].items():
            if labels.get(key) != value:
                return f"fleet {', '.join(running)}: node {name} has {key}={labels.get(key, '(unset)')}, not {value}"
        # labels another fleet's file gave the node: those kailab set (a GPU operator's own labels,
        # e.g. fake-gpu-operator's nvidia.com/mig.strategy on a kind lab, are not the fleet's)
        ours = _labels_set_by_kailab(got)
        extra = sorted(k for k in labels if k not in node["metadata"]["labels"] and not k.startswith(NOT_THE_FLEETS)
                       and (ours is None or k in ours))
        if extra:
            return f"fleet {', '.join(running)}: node {name} has label {extra[0]}={labels[extra[0]]}, which the fleet does not declare"
        gpus = str(((got.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu", "0"))
        declared = node["status"]["allocatable"].get("nvidia.com/gpu", "0")
        if gpus != declared:
            return f"fleet {', '.join(running)}: node {name} has {gpus} GPUs, not {declared}"
        taints = sorted((t.get("key"), t.get("value") or "", t.get("effect")) for t in (got.get("spec") or {}).get("taints") or []
                        if not str(t.get("key")).startswith(LIFECYCLE_TAINTS))
        declared_taints = sorted((t["key"], t["value"], t["effect"]) for t in node["spec"].get("taints", []))
        if taints != declared_taints:
            return f"fleet {', '.join(running)}: node {name} has taints {taints or 'none'}, not {declared_taints or 'none'}"
        if (got.get("spec") or {}).get("unschedulable"):
            return f"fleet {', '.join(running)}: node {name} is cordoned"
    return None
