"""kailab against kwokctl at equal readiness (the same fleet Ready, /readyz)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import statistics
from pathlib import Path
import subprocess
import sys
import tempfile

from .. import toolchain, versions
from .common import _record, _time, machine
from ..fleet import load_fleet
from ..kube import Kube
from ..runtimes import clusterinfo
from ..runtimes.labkit import create_fleet
from ..runtimes.waits import wait_until


def peer_comparison(runs: int = 5, fleet: str = "tiny", echo=print) -> dict:
    """kailab against KWOK's own `kwokctl create cluster --runtime binary`, side by side: the same
    cached etcd, kube-apiserver, kube-controller-manager and kwok binaries, kube-scheduler off,
    alternating runs, whole commands timed from a shell's point of view (kailab's Python start-up
    included). Two peer figures: kwokctl bare (create + delete, as it ships: it returns once the
    API server answers /version, with no nodes) and kwokctl at kailab's readiness (the same fleet's
    nodes created over the API and Ready, and the API server's /readyz answering, as kailab's `up`
    waits for) — the fair comparison."""
    recipes = [r for r in toolchain.recipes_for(versions.DEFAULT_KAI) if r.component != "kai"]
    built = toolchain.build_all(recipes + toolchain.peer_recipes())
    bins = {n: built[r.key] / n for r in recipes + toolchain.peer_recipes() for n in r.binaries}
    kailab_cli = [sys.executable, "-m", "kailab.cli"]
    name = f"bench-{os.getpid()}-peer"
    fl = load_fleet(fleet)
    work = Path(tempfile.mkdtemp(prefix="kailab-kwokctl-"))
    env = {**os.environ, "KWOK_WORKDIR": str(work)}
    kwokctl = [str(bins["kwokctl"])]
    create = kwokctl + ["create", "cluster", "--name", name, "--runtime", "binary",
                        f"--etcd-binary={bins['etcd']}", f"--kube-apiserver-binary={bins['kube-apiserver']}",
                        f"--kube-controller-manager-binary={bins['kube-controller-manager']}",
                        f"--kwok-controller-binary={bins['kwok']}", "--disable=kube-scheduler", "--quiet-pull"]
    delete = kwokctl + ["delete", "cluster", "--name", name]

    def run(cmd: list[str], **kw) -> None:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, **kw)

    def kwokctl_with_fleet() -> None:
        run(create)
        kc = work / "kubeconfig.yaml"
        kc.write_text(subprocess.run(kwokctl + ["get", "kubeconfig", "--name", name], check=True,
                                     capture_output=True, text=True, env=env).stdout)
        kube = Kube(kc)
        try:  # the readiness kailab's `up` returns at: /readyz, and every node of the fleet Ready
            create_fleet(kube, fl)
            wait_until("the peer's fleet to be Ready",
                       lambda: clusterinfo.ready_node_count(kube) == fl.nodes_total, timeout="nodes-ready")
            wait_until("the peer's API server /readyz", kube.readyz, timeout="apiserver-ready")
        finally:
            kube.close()
        run(delete)

    cases = {
        # the same components as kwokctl's (no Prometheus, no kube-state-metrics: kwokctl runs none by default)
        "kailab up --without-kai --without-metrics + down": lambda: (run(kailab_cli + ["up", "--fleet", fleet,
                                                                                       "--without-kai", "--without-metrics",
                                                                                       "--name", name]),
                                                    run(kailab_cli + ["down", "--name", name])),
        "kwokctl create + delete": lambda: (run(create), run(delete)),
        "kwokctl create + same fleet Ready + /readyz + delete": kwokctl_with_fleet,
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    try:
        for fn in cases.values():  # one unmeasured round: seeds, page cache
            fn()
        for i in range(runs):
            for label, fn in cases.items():
                times[label].append(_time(fn))
            echo(f"peer round {i + 1}/{runs}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()))
    finally:
        subprocess.run(delete, env=env, capture_output=True)
        subprocess.run(kailab_cli + ["down", "--name", name], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    med = {k: round(statistics.median(v), 2) for k, v in times.items()}
    ours = med["kailab up --without-kai --without-metrics + down"]
    return {"fleet": fleet, "runs": runs, "median_s": med, "all_s": times,
            "ratio_vs_kwokctl_bare": round(ours / med["kwokctl create + delete"], 2),
            "ratio_vs_kwokctl_equal_readiness": round(ours / med["kwokctl create + same fleet Ready + /readyz + delete"], 2)}


def peer_markdown(peer: dict) -> list[str]:
    lines = [f"Side by side with KWOK's own kwokctl (fleet {peer['fleet']}, {peer['runs']} alternating "
             "runs, whole commands, same binaries):", "", "| command | median s |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in peer["median_s"].items()]
    lines += ["", f"Ratio kailab / kwokctl bare: **{peer['ratio_vs_kwokctl_bare']}**; "
              f"kailab / kwokctl at equal readiness (same fleet Ready, /readyz): **{peer['ratio_vs_kwokctl_equal_readiness']}**."]
    return lines


def record_peer(peer: dict, out_dir: Path | None = None) -> dict:
    """`kailab bench peer` on its own: bench/results/<date>-peer.{json,md}."""
    results = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "machine": machine(), **peer}
    text = "\n".join([f"# kailab up/down against kwokctl, {results['date']}", "",
                      f"{results['machine']['cores']} cores. Recorded, not asserted.", ""] + peer_markdown(peer)) + "\n"
    return _record(results, "-peer", text, out_dir)
