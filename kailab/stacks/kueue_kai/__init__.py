"""The kueue+kai stack: Kueue admits (quota, borrowing, preemption at admission), KAI places (its
scheduler, binder and queues decide where and when an admitted pod runs).

Both layers get the exercise's queue tree: Kueue as Cohorts, ClusterQueues and LocalQueues (the
kueue stack's vocabulary), KAI as its Queues; a workload keeps KAI's marks and names its LocalQueue,
and a Job starts suspended until Kueue admits it. Where their quotas can disagree: Kueue counts the
`nvidia.com/gpu` a pod requests when it admits, KAI counts what it places - so a GPU fraction (which
requests none) is refused here by name, and an admitted pod can still wait for KAI (its own fair
share, gangs, placement). Evictions come from either layer: Kueue suspends or deletes a workload it
preempts, KAI deletes a pod it reclaims; the run's evidence has both layers' objects.

On the binary runtime: KAI's five processes, Kueue's controller manager, and kube-scheduler for the
pods that name no scheduler (each pod chooses: the coexistence exercise, exercises/stacks/). On kind:
KAI's chart as the kai stack installs it, then Kueue's chart as the kueue stack does; kind's own
kube-scheduler places the pods that name no scheduler.
"""

from __future__ import annotations

from ... import versions, workloads
from ...runtimes.addon import Addon
from ...runtimes.base import InstallsCharts, LabRecord, LabSpec, Runtime
from ..base import QueueDecl, Ref, said_for
from ..combined import ChartsOfParts, CombinedAddon, ProcessesOfParts
from ..kai import KaiAddon, KaiStack
from ..kueue import KueueAddon, install as kueue_install, vocabulary as kueue_words
from ..kai import vocabulary as kai_words
from ..kueue import KueueStack

PROBE_QUEUE = "kailab-kueue-probe"


class KueueKaiAddon(CombinedAddon, ProcessesOfParts, ChartsOfParts):
    """KAI first (its own probe pod bound), then Kueue, whose probe Job's pod names KAI's scheduler
    and queue: Kueue admits it, KAI binds it."""

    def __init__(self, kai_version: str) -> None:
        self.kai = KaiAddon(kai_version)
        # KAI's chart brings the priority classes exercises name
        self.kueue = KueueAddon(kueue_install.kubernetes_of(kai_version), priorities=False,
                                probe_pod=_kai_places, probe_objects=(_probe_queue(),))
        super().__init__(self.kai, self.kueue, name="kueue+kai")
        self.version = f"kueue {self.kueue.version} + KAI {self.kai.version}"

    image_stack = "kueue+kai"
    start_title = "KAI, Kueue and kube-scheduler serving, probe Job admitted by Kueue and bound by KAI"

    def plan_lines(self) -> list[str]:
        return [f"{self.kai.plan_lines()[0]} placing", f"Kueue {self.kueue.version} admitting"]

    def probe_text(self) -> str:
        return (f"{self.kai.probe_text()}; then {self.kueue.probe_text()} (the pod names KAI's scheduler and "
                f"queue {PROBE_QUEUE}: Kueue admits, KAI binds)")


def _kai_places(pod_spec: dict, labels: dict) -> None:
    """The probe Job's pod names KAI's scheduler and a KAI queue: Kueue admits, KAI binds."""
    pod_spec["schedulerName"] = workloads.SCHEDULER_NAME
    labels[workloads.QUEUE_LABEL] = PROBE_QUEUE


def _probe_queue() -> dict:
    return workloads.queue(PROBE_QUEUE, {"quota": 1, "limit": -1})


class KueueKaiStack(KaiStack):
    """KAI's stack (its evidence, metrics, scheduler configuration) with Kueue in front of it."""

    name = "kueue+kai"
    title = "Kueue + KAI"

    def addon(self, spec: LabSpec) -> Addon:
        return KueueKaiAddon(versions.kai_release(spec.kai_version or versions.DEFAULT_KAI).version)

    def describe(self, runtime: Runtime, record: LabRecord) -> dict:
        out = super().describe(runtime, record)
        out["name"], out["version"] = self.name, (record.stack or {}).get("version", record.kai_version)
        out["install"] = said_for(runtime, {
            InstallsCharts: "KAI's helm chart (operator, admission webhook) placing and Kueue's helm chart admitting, "
                            "on a kind cluster"},
            "Kueue's controller manager admitting, KAI's components placing, as local processes")
        return out

    def preflight(self, kube, record: LabRecord) -> None:
        super().preflight(kube, record)

        KueueStack().preflight(kube, record)

    def queue_objects(self, queues: list[QueueDecl], namespace: str) -> list[dict]:
        return kueue_words.queue_objects(queues, namespace) + kai_words.queue_objects(queues)

    def queue_leftovers(self, queues: list[QueueDecl], namespace: str) -> list[Ref]:
        return kueue_words.queue_leftovers(queues, namespace) + kai_words.queue_leftovers(queues)

    def workload_objects(self, objs: list[dict], where: str) -> list[dict]:
        return kueue_words.workload_objects(objs, where, kai_places=True)

    def snapshot_objects(self, kube, namespace: str, queues: list[str]) -> dict[str, list]:
        return {**super().snapshot_objects(kube, namespace, queues),
                **KueueStack().snapshot_objects(kube, namespace, queues)}
