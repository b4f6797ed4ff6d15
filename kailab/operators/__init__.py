"""Workload operators a lab runs beside its scheduler: the kinds teams submit (PyTorchJob, JobSet,
RayCluster/RayJob, LeaderWorkerSet), which KAI's podgrouper groups by its own plugins.

    kailab up --operators kubeflow,ray,jobset,lws        # the versions KAI v0.17.0 pins
    kailab up --operators kubeflow@v1.9.3                # another version: name@version

One registry (OPERATORS); each operator a small class (base.Operator) built from the Go module proxy
and run as a supervised process of the lab (the binary runtime). kailab/labs.py hands them to the
runtime with the stack's addon; the lab record lists them (`stack.operators`).
"""

from __future__ import annotations

import importlib
import re
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

import yaml

from ..errors import KailabError

if TYPE_CHECKING:
    from .base import Operator

MANAGED = {"app.kubernetes.io/managed-by": "kailab"}

# name -> "module:class", imported on first use (an exercise file's checks read only the pins)
OPERATORS = {"kubeflow": "kailab.operators.kubeflow:Kubeflow", "jobset": "kailab.operators.configured:JobSet",
             "lws": "kailab.operators.configured:LeaderWorkerSet", "ray": "kailab.operators.configured:KubeRay"}


@lru_cache(maxsize=1)
def pins() -> dict:
    """data/operators.yaml: each operator's pinned version, module, process, folders and kinds."""
    return yaml.safe_load(resources.files("kailab").joinpath("data/operators.yaml").read_text())


def owner_kinds() -> dict[str, str]:
    """Every operator's kinds, each with its apiVersion."""
    return {kind: api for pin in pins().values() for kind, api in pin["kinds"].items()}

_VERSION = re.compile(r"^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")


def parse(values: str | list[str] | tuple[str, ...], where: str = "--operators") -> tuple[str, ...]:
    """`kubeflow,ray` or ["kubeflow@v1.9.3", "ray"] as canonical `name@version` items, in registry
    order, each checked; one line naming the bad one otherwise."""
    items = values.split(",") if isinstance(values, str) else list(values)
    out: dict[str, str] = {}
    for item in (i.strip() for i in items):
        if not item:
            continue
        name, _, version = item.partition("@")
        if name not in OPERATORS:
            raise KailabError(f"{where}: unknown operator {name!r}: choose from {', '.join(OPERATORS)} "
                              "(name, or name@version)")
        if version and not _VERSION.match(version):
            raise KailabError(f"{where}: {item!r}: a version looks like v1.2.3 (the pinned one: "
                              f"{name}@{pins()[name]['version']})")
        out[name] = version or pins()[name]["version"]
    return tuple(f"{n}@{out[n]}" for n in OPERATORS if n in out)


def get(item: str) -> "Operator":
    name, _, version = item.partition("@")
    module, cls = OPERATORS[name].split(":")
    return getattr(importlib.import_module(module), cls)(version or None)


def kinds_of(running: dict[str, str]) -> dict[str, str]:
    """The kinds (kind -> apiVersion) of the operators a lab runs (its record's `stack.operators`)."""
    return {kind: api for name in running for kind, api in pins()[name]["kinds"].items()}


def owner_of(api_version: str, kind: str) -> str | None:
    """The operator whose kind this is (None: not an operator's)."""
    group = api_version.split("/")[0]
    for name, pin in pins().items():
        if pin["kinds"].get(kind, "").split("/")[0] == group:
            return name
    return None


def missing_for(objs: list[dict], running: dict[str, str], where: str) -> None:
    """One line naming the `--operators` value a lab lacks for these objects' kinds."""
    lacking = {}
    for obj in objs:
        name = owner_of(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if name and name not in running:
            lacking.setdefault(name, obj.get("kind"))
    if lacking:
        kinds = ", ".join(f"{k} ({n})" for n, k in lacking.items())
        have = ", ".join(running) or "none"
        raise KailabError(f"{where}: {kinds} needs its operator, which this lab does not run (operators: {have}): "
                          f"bring the lab up with `kailab up --operators {','.join([*running, *lacking])}`")


__all__ = ["OPERATORS", "get", "kinds_of", "missing_for", "owner_kinds", "owner_of", "parse", "pins"]
