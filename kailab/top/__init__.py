"""`kailab top`: the scheduler's picture, live — KAI's queues (GPUs against fair share, quota and
limit; who waits, how long, and KAI's reason), GPUs per node pool and node, the last evictions with
KAI's action and for whom. Read only, from the API server's watch and (when there is one) the lab's
Prometheus; any cluster with KAI.

The parts: mirror (the watched objects), model (one snapshot, a plain dict), prom (KAI's fair
share), screen (the terminal)."""

from __future__ import annotations

import time
from pathlib import Path

from ..errors import KailabError
from ..kube import Kube
from .mirror import SOURCES, Mirror, NotKai
from .model import pod_gpus, snapshot
from .prom import fair_share


class Top:
    """A watched cluster for the length of a `with` block; `snapshot()` the picture now."""

    def __init__(self, kubeconfig: str | Path, prometheus: str | None = None):
        try:
            self.kube = Kube(kubeconfig)
        except Exception as err:  # noqa: BLE001 - the client's config errors have no common base worth naming
            raise KailabError(f"{kubeconfig}: not a kubeconfig the client can use ({' '.join(str(err).split())}): "
                              "give a cluster's kubeconfig (e.g. `kailab env` prints a lab's)") from None
        self.prometheus = prometheus
        self.mirror = Mirror(self.kube)
        self._prometheus_quiet_until = 0.0  # after a failed query: the picture goes on without it a while

    def __enter__(self) -> Top:
        self.mirror.__enter__()
        self.mirror.wait_ready()
        return self

    def __exit__(self, *exc) -> None:
        self.mirror.__exit__(*exc)
        self.kube.close()

    def snapshot(self) -> dict:
        now = time.time()
        shares = None
        if self.prometheus and now >= self._prometheus_quiet_until:
            shares = fair_share(self.prometheus)
            if shares is None:  # not answering: ask again in 10 s, not at every refresh
                self._prometheus_quiet_until = now + 10
        return snapshot(self.mirror.objects(), now, shares)


def once(kube: Kube, prometheus: str | None = None, missing_ok: bool = False) -> dict | None:
    """The picture now from one list of each kind (no watch): for a step's evidence. Where the
    cluster serves no KAI Queue: NotKai, or None when `missing_ok`."""
    import json

    try:
        Mirror(kube).check_kai()
    except NotKai:
        if missing_ok:
            return None
        raise
    pool, host = kube.api_client.rest_client.pool_manager, kube.api_client.configuration.host
    objects = {}
    for name, (path, query) in SOURCES.items():
        listed = json.loads(pool.request("GET", host + path + (f"?{query}" if query else ""), timeout=60).data)
        objects[name] = listed.get("items") or []
    return snapshot(objects, time.time(), fair_share(prometheus))


__all__ = ["NotKai", "Top", "once", "pod_gpus", "snapshot"]
