"""The "no scheduler" stack (`--without-kai`): a lab of control plane, fleet and metrics only,
for what needs a cluster but no batch scheduler (the KAI e2e harness's own checks, comparisons)."""

from __future__ import annotations

from ..errors import LabError
from ..runtimes.addon import Addon, NoScheduler
from ..runtimes.base import LabRecord, LabSpec
from .base import Stack


class NoStack(Stack):
    name = "none"
    title = "no scheduler"

    def addon(self, spec: LabSpec) -> Addon:
        return NoScheduler()

    def preflight(self, kube, record: LabRecord) -> None:
        raise LabError(f"lab {record.name!r} runs no scheduler (--without-kai): bring up a lab with one (`kailab up`)")
