"""`kailab trial --runtime kind|existing --dry-run`: every command and file of a vCluster trial, run
nothing. On an existing host the host's facts are read (nothing is changed); a kind host does not
exist yet, so its node and address are shown as what they will be."""

from __future__ import annotations

from pathlib import Path

from .. import versions
from ..fleet import load_fleet
from ..kube import Kube
from ..paths import state_dir
from ..runtimes.clusterinfo import api_server
from . import plan as plan_mod
from . import host as host_mod


def dry_run_text(version_list: list[str], fleet: str, exercises: list[str], warnings: list[str],
                 runtime: str = "kind", kubeconfig: str | None = None, against_binary: bool = True) -> str:
    loaded = load_fleet(fleet)
    trial = "trial-<utc time>"
    newest = max(version_list, key=versions.parse)
    kubernetes = versions.kai_release(newest).kubernetes
    work = str(state_dir().parent / "trials" / trial)
    if runtime == "existing" and kubeconfig:
        kube = Kube(kubeconfig)
        try:
            facts = host_mod.facts(kube, api_server(kubeconfig))
            from .state import coredns_image

            coredns = coredns_image(kube)
        finally:
            kube.close()
        th = plan_mod.TrialHost(kubeconfig=str(Path(kubeconfig).resolve()), infra_node=facts.infra_node,
                                infra_ip=facts.infra_ip, lab_dir=work, kind_cluster=facts.kind_cluster, kubernetes=kubernetes)
        host_lines = [f"# the cluster {api_server(kubeconfig)} (read now: infra node {facts.infra_node}, "
                      f"{facts.infra_ip}{', kind cluster ' + facts.kind_cluster if facts.kind_cluster else ''}), "
                      "changed only as below and put back"]
    else:
        host_kc = str(state_dir() / trial / "kubeconfig")
        th = plan_mod.TrialHost(kubeconfig=host_kc, infra_node=f"kailab-{trial}-control-plane",
                                infra_ip="<its address>", lab_dir=work, kind_cluster=f"kailab-{trial}", kubernetes=kubernetes)
        coredns = "<the host's own CoreDNS image>"
        host_lines = [f"# a kind lab {trial}: `kailab up --runtime kind --without-kai --without-metrics --fleet {fleet} "
                      f"--images local --kai-version {newest}` (its own plan: add --dry-run), taken down at the end"]
    host_lines += [f"# then: the KWOK Stages {', '.join(s['metadata']['name'] for s in host_mod.trial_stages())} "
                   "(KAI's GPU reservations under vCluster's names; a deleted pod ends Failed, then goes), "
                   "the sentinel workload (namespace kailab-trial-sentinel: two pods on the host's own KWOK nodes), "
                   "a snapshot of the host; after the last vCluster's deletion, another, which must equal it"]
    plans = plan_mod.trial_plans(version_list, loaded, th, trial, coredns)
    notes = [f"exercises, each version at once in its own vCluster: {', '.join(exercises)}",
             *([f"then, the vClusters gone: the same exercises on a binary lab per version ({', '.join(version_list)}; "
                "`kailab up --runtime binary`), each verdict set against the vCluster's (--no-against-binary: not)"]
               if against_binary else []),
             *[f"warning: {w}" for w in warnings]]
    return plan_mod.render(plans, th, host_lines, plan_mod.images_to_load(version_list, kubernetes), notes)
