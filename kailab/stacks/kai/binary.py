"""KAI on the binary runtime: its processes started through the runtime's primitives (ProcessHost),
its webhooks registered on loopback, and its scheduler's configuration as a file it reads.

What KAI's chart and operator would do in a cluster, done for local processes: the operator's
rendering of the SchedulingShard (render.py), the CRDs, the chart's objects, the webhook
registrations (install.webhook_configurations), the flags the operator passes.
"""

from __future__ import annotations

import base64
import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from ... import versions
from ...runtimes.addon import ProcessHost
from ...runtimes.base import ControlsProcesses, LabRecord
from ...runtimes.labkit import PROBE_NAMESPACE
from ...runtimes.waits import wait_until
from ..base import SchedulerConfig
from . import install as kai
from . import probe

# the scheduler's configuration in the lab dir: what it runs now, and the lab's default
SCHEDULER_CONF, DEFAULT_SCHEDULER_CONF = "scheduler-conf.yaml", "scheduler-conf.default.yaml"
SCHEDULER_ARGS = "scheduler-args.json"  # the flags a SchedulingShard's `args` added to the scheduler


def start(host: ProcessHost, recipe, tree: Path) -> None:
    """KAI's scheduler configuration, CRDs, processes, chart objects and webhooks; returns once
    the probe pod is bound."""
    lab, kube, ports = host.lab, host.kube, host.ports
    with host.timed("KAI's scheduler configuration rendered"):
        # what KAI's operator would write for the chart's SchedulingShard: the lab's default
        (lab / DEFAULT_SCHEDULER_CONF).write_text(yaml.safe_dump(kai.installed_default(recipe, tree), sort_keys=False))
        shutil.copyfile(lab / DEFAULT_SCHEDULER_CONF, lab / SCHEDULER_CONF)
    with host.timed("KAI CRDs Established"):
        host.install_crds(kai.crd_documents(tree))
    # KAI starts as soon as its kinds are served, and what it watches for (the chart's objects,
    # the probe) is created while it starts. For 2 s after a CRD is Established the API server
    # holds every create of its kind (an HA safeguard in apiextensions-apiserver), so the
    # probe's queues and PodGroup wait that out whatever we do; nothing else should.
    with host.timed("KAI serving"):
        for comp in versions.KAI_COMPONENTS:
            env = {"KUBECONFIG": str(host.kubeconfig)}
            if comp in kai.WEBHOOK_SERVERS:
                env["TMPDIR"] = str(_webhook_tmpdir(lab, comp))
            host.start(comp, kai.component_argv(comp, host.bins[comp], ports, lab / SCHEDULER_CONF), env=env)
        with ThreadPoolExecutor(max_workers=1) as pool:
            objects = pool.submit(lambda: [kube.apply(o) for o in kai.base_objects() + kai.chart_objects(tree)])
            pod = probe.submit_probe(kube, lab)
            for comp in versions.KAI_COMPONENTS:
                host.wait_healthy(comp)
            objects.result()
    with host.timed("KAI's webhooks registered"):
        _register_webhooks(lab, kube, ports, kai.admission_validates_topologies(tree))
    with host.timed("probe pod bound"):
        probe.await_probe(kube, pod, lab)


def scheduler_argv(lab: Path, argv: list[str], setting) -> tuple[list[str], list[str]]:
    """The scheduler's command line with the setting's whole configuration as --scheduler-conf and
    its shard's `args` as flags, as the operator passes them (None: the lab's default, the
    operator's rendering of the chart's shard); and the flags added, to take off next time."""
    conf = getattr(setting, "conf", setting)
    args = list(getattr(setting, "args", ()))
    given = lab / SCHEDULER_ARGS  # the flags the last change added, taken off again
    before = set(json.loads(given.read_text())) if given.is_file() else set()
    out = [a for a in argv if not a.startswith("--scheduler-conf=") and a not in before]
    path, default = lab / SCHEDULER_CONF, lab / DEFAULT_SCHEDULER_CONF
    if conf is not None:
        path.write_text(yaml.safe_dump(conf, sort_keys=False))
        out.append(f"--scheduler-conf={path}")
    elif default.is_file():
        shutil.copyfile(default, path)
        out.append(f"--scheduler-conf={path}")
    out += args  # after kailab's own: the last of a repeated flag wins, as in a Deployment's args
    given.write_text(json.dumps(args))
    return out, args


def scheduler_config(lab: Path) -> dict | None:
    path = lab / SCHEDULER_CONF
    return yaml.safe_load(path.read_text()) if path.is_file() else None


class OnProcesses(SchedulerConfig):
    """KAI's scheduler as a process of the lab: its --scheduler-conf, and the process run again."""

    runtime = ControlsProcesses

    def current(self, runtime, record: LabRecord) -> dict | None:
        return scheduler_config(record.dir)

    def apply(self, runtime: ControlsProcesses, record: LabRecord, setting) -> None:
        argv, _ = scheduler_argv(record.dir, runtime.process_command(record, "scheduler"), setting)
        runtime.rerun(record, "scheduler", argv)


def _webhook_tmpdir(lab: Path, comp: str) -> Path:
    """The TMPDIR of a KAI webhook server, holding the serving certificate where controller-runtime
    looks for it (the lab CA signs it for 127.0.0.1)."""
    tmp = lab / "webhooks" / comp
    certs = kai.webhook_cert_dir(tmp)
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(lab / "pki" / "kai-webhooks.crt", certs / "tls.crt")
    shutil.copyfile(lab / "pki" / "kai-webhooks.key", certs / "tls.key")
    return tmp


# what proves each webhook answers: a dry run (admission runs, nothing is stored) of an object it acts on
_FRACTION_PROBE = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "kailab-webhook-probe", "namespace": PROBE_NAMESPACE,
                                "annotations": {"gpu-fraction": "0.5"}},
                   "spec": {"schedulerName": kai.SCHEDULER_NAME,
                            "containers": [{"name": "c", "image": "kailab.io/never-pulled"}]}}
_INVALID_PODGROUP = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                     "metadata": {"name": "kailab-webhook-probe", "namespace": PROBE_NAMESPACE},
                     "spec": {"minMember": 1, "minSubGroup": 1, "queue": "kailab-probe"}}


def _register_webhooks(lab: Path, kube, ports: dict[str, int], topologies: bool) -> None:
    """KAI's webhook configurations, then wait until the API server calls both servers: a dry-run
    fractional pod comes back mutated by KAI's admission, a dry-run invalid PodGroup is denied by
    KAI's PodGroup validation."""
    ca = base64.b64encode((lab / "pki" / "ca.crt").read_bytes()).decode()
    for obj in kai.webhook_configurations(ports, ca, topologies):
        kube.apply(obj)
    pods = kube.resource("v1", "Pod")
    groups = kube.resource("scheduling.run.ai/v2alpha2", "PodGroup")

    def admission_mutates() -> bool:
        out = pods.create(body=_FRACTION_PROBE, namespace=PROBE_NAMESPACE, dry_run="All").to_dict()
        return "runai/shared-gpu-configmap" in (out["metadata"].get("annotations") or {})

    def podgroups_validated() -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            groups.create(body=_INVALID_PODGROUP, namespace=PROBE_NAMESPACE, dry_run="All")
        except ApiException as err:
            return "podgroup-validation.kai.scheduler" in str(err.body)
        return False

    wait_until("KAI's admission webhook to mutate pods", _swallow(admission_mutates),
               timeout="scheduler-component-healthy", lab=lab, component="admission",
               hint="the API server calls it on 127.0.0.1; see its log")
    wait_until("KAI's PodGroup validation webhook to answer", _swallow(podgroups_validated),
               timeout="scheduler-component-healthy", lab=lab, component="podgroupcontroller")


def _swallow(check):
    """A check that counts any API error (the webhook not answering yet: failurePolicy Fail) as not yet."""
    def run() -> bool:
        try:
            return check()
        except Exception:  # noqa: BLE001 - retried until the wait's timeout, which shows the log
            return False
    return run
