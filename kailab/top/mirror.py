"""What `kailab top` watches: the cluster's pods, nodes, KAI's Queues and PodGroups and KAI's
eviction events, each kept current by one list-then-watch (never re-listed each refresh: a
1,000-node fleet is megabytes to list)."""

from __future__ import annotations

import threading

from ..errors import KailabError
from ..kube import Kube, watch_path

# name -> (path, query); events only KAI's evictions (a busy lab's other events are most of its traffic)
SOURCES = {
    "pods": ("/api/v1/pods", ""),
    "nodes": ("/api/v1/nodes", ""),
    "queues": ("/apis/scheduling.run.ai/v2/queues", ""),
    "podgroups": ("/apis/scheduling.run.ai/v2alpha2/podgroups", ""),
    "evictions": ("/api/v1/events", "fieldSelector=reason%3DEvict"),
}


class NotKai(KailabError):
    """The cluster serves no KAI Queues: there is nothing of KAI's to show."""


class Mirror:
    """The watched objects, by kind then namespace/name; `objects()` a consistent copy."""

    def __init__(self, kube: Kube):
        self.kube = kube
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._store: dict[str, dict[str, dict]] = {k: {} for k in SOURCES}
        self._ready = {k: threading.Event() for k in SOURCES}
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Mirror:
        self.check_kai()
        for name, (path, query) in SOURCES.items():
            t = threading.Thread(target=watch_path, name=f"top-{name}", daemon=True,
                                 args=(self.kube, path, self._on(name), self.stopping, self.errors),
                                 kwargs={"ready": self._ready[name], "query": query,
                                         "on_relist": self._relisted(name)})
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()

    def check_kai(self) -> None:
        host = self.kube.api_client.configuration.host
        try:
            resp = self.kube.api_client.rest_client.pool_manager.request(
                "GET", f"{host}{SOURCES['queues'][0]}?limit=1", timeout=15, retries=1)
        except Exception as err:  # noqa: BLE001 - unreachable, refused, TLS: one line, whatever the cause
            reason = getattr(err, "reason", None) or err
            raise KailabError(f"the API server at {host} does not answer ({' '.join(str(reason).split())[:200]}): "
                              "is the cluster up? (`kailab status` for a lab)") from None
        if resp.status == 404:
            raise NotKai("this cluster serves no KAI Queue (scheduling.run.ai/v2): `kailab top` shows KAI's queues, "
                         "so it needs KAI installed (a lab of another scheduler: Kueue's ClusterQueues and Volcano's "
                         "Queues are not shown yet)")
        if resp.status >= 400:
            raise KailabError(f"the API server answered {resp.status} to a list of KAI's Queues: "
                              f"{resp.data[:200].decode(errors='replace')}")

    def wait_ready(self, timeout: float = 30) -> None:
        for name, ready in self._ready.items():
            if not ready.wait(timeout):
                raise KailabError(f"kailab top: the first list of {name} did not arrive within {timeout:g} s"
                                  + (f" (last error: {self.errors[-1]})" if self.errors else ""))

    def _on(self, name: str):
        store = self._store[name]

        def on_event(kind: str, obj: dict) -> None:
            meta = obj["metadata"]
            key = f"{meta.get('namespace', '')}/{meta['name']}"
            with self._lock:
                if kind == "DELETED":
                    store.pop(key, None)
                else:
                    store[key] = obj
        return on_event

    def _relisted(self, name: str):
        def clear() -> None:
            with self._lock:
                self._store[name].clear()
        return clear

    def objects(self) -> dict[str, list[dict]]:
        with self._lock:
            return {k: list(v.values()) for k, v in self._store.items()}
