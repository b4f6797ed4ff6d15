"""Real worker nodes beside a kind lab's control plane (`kailab up --runtime kind --workers N`).

A kind lab is one real node (the control plane: KWOK, the scheduler, the metrics) and the fleet's
KWOK nodes, where no container runs. Pods that need a real kubelet — a fan-out's units, each a binary
lab of its own, with this lab as their host — run on workers. kind taints the control plane when a
cluster has workers; the lab's own pods are pinned to it (CONTROL_PLANE_SELECTOR), so the taint goes.

With the images built here the node image carries a static CNI (no kindnetd image to pull), one
subnet a node: each worker gets the next /24 after the control plane's, and every node a route to the
others' through their address on kind's network (what kindnetd would do).
"""

from __future__ import annotations

import ipaddress
import json

from ...images.node import cni_conflist
from .pins import pins

CNI_FILE = "/etc/cni/net.d/10-kailab.conflist"  # the node image's (kailab/images/node.py)
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane:NoSchedule"


def control_plane(cluster: str) -> str:
    return f"{cluster}-control-plane"


def worker_names(cluster: str, workers: int) -> list[str]:
    """kind's names: <cluster>-worker, <cluster>-worker2, …"""
    return [f"{cluster}-worker{i if i > 1 else ''}" for i in range(1, workers + 1)]


def subnets(cluster: str, workers: int) -> dict[str, str]:
    """Each node's pod subnet: the control plane's as the node image has it, then the next ones."""
    first = ipaddress.ip_network(pins()["local_images"]["node"]["pod_subnet"])
    step = first.num_addresses
    names = [control_plane(cluster), *worker_names(cluster, workers)]
    return {n: str(ipaddress.ip_network(f"{first.network_address + i * step}/{first.prefixlen}"))
            for i, n in enumerate(names)}


def _routes_script(node: str, nets: dict[str, str]) -> str:
    """On `node`: a route to every other node's pods, through that node's address on kind's network
    (Docker's DNS names the containers)."""
    lines = ["set -e"]
    for other, subnet in nets.items():
        if other != node:
            lines.append(f"ip=$(getent ahostsv4 {other} | head -n 1 | cut -d ' ' -f 1); "
                         f"[ -n \"$ip\" ] || {{ echo 'cannot resolve {other}' >&2; exit 1; }}; "
                         f"ip route replace {subnet} via \"$ip\"")
    return "\n".join(lines)


def steps(cluster: str, workers: int, kubectl: list[str], static_cni: bool, timeout: str) -> list[tuple[str, list[str]]]:
    """(description, argv) steps run right after `kind create cluster`, before anything is installed."""
    if workers <= 0:
        return []
    names = worker_names(cluster, workers)
    out = [(f"Let the lab's own pods on the control plane again (kind taints it when a cluster has workers; "
            f"they are pinned to it)",
            [*kubectl, "taint", "nodes", control_plane(cluster), f"{CONTROL_PLANE_TAINT}-"])]
    if static_cni:
        nets = subnets(cluster, workers)
        for w in names:
            text = cni_conflist(nets[w]).decode()
            out.append((f"Give {w} a pod subnet of its own ({nets[w]}; the node image's static CNI has the control plane's)",
                        ["docker", "exec", w, "sh", "-c", f"printf '%s\\n' '{json.dumps(json.loads(text))}' > {CNI_FILE}"]))
        for n in nets:
            out.append((f"Routes from {n} to the other nodes' pods",
                        ["docker", "exec", n, "sh", "-c", _routes_script(n, nets)]))
        # a pod a worker took before its subnet was its own (CoreDNS, say) has an address of the control
        # plane's: made again, it gets one of the worker's
        for w in names:
            out.append((f"Make again any pod {w} took before its subnet was its own",
                        [*kubectl, "delete", "pods", "--all-namespaces", "--wait=false",
                         "--field-selector", f"spec.nodeName={w},spec.hostNetwork=false"]))
    out.append((f"Wait for the {workers} worker(s) to be Ready",
                [*kubectl, "wait", "--for=condition=Ready", *(f"node/{w}" for w in names), f"--timeout={timeout}"]))
    return out


def states(nodes: list[dict], cluster: str, workers: int) -> dict[str, dict]:
    """The workers as the lab's components (status, deaths): running while their node is Ready."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    out = {}
    for w in worker_names(cluster, workers):
        node = by_name.get(w)
        ready = next((c for c in ((node or {}).get("status") or {}).get("conditions") or []
                      if c.get("type") == "Ready"), {})
        state = "missing" if node is None else "running" if ready.get("status") == "True" else "not ready"
        out[f"worker {w}"] = {"state": state, "pid": None, "ports": {}, "log": None,
                              **({"reason": f"{ready.get('reason', '')}: {ready.get('message', '')}".strip(": ")}
                                 if node is not None and state != "running" else {})}
    return out
