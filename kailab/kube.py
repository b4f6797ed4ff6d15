"""Talking to a lab's API server with the official client: one Kube object per kubeconfig."""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
import time
from concurrent.futures import ThreadPoolExecutor

# The official client is imported on first use, not with this module: it takes a quarter of a
# second, which commands that never talk to a cluster (`kailab down`, `--help`) should not pay.

from .errors import KailabError
from .paths import state_dir

FIELD_MANAGER = "kailab"


class ApiRefused(KailabError):
    """The API server (or an admission webhook) refused an object: its own message, one line."""


def server_message(err) -> str:
    """The API server's own words from an error response, on one line."""
    try:
        message = json.loads(err.body or "{}").get("message") or ""
    except (ValueError, AttributeError):
        message = ""
    return " ".join((message or f"{err.status} {err.reason}").split())


class Kube:
    """API access for one cluster. Never touches the process-wide default client config."""

    def __init__(self, kubeconfig: str | Path, timeout: float = 30):
        from kubernetes import client, config

        self.kubeconfig = str(kubeconfig)
        cfg = client.Configuration()
        config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        cfg.retries = 2
        self.timeout = timeout
        self.api_client = client.ApiClient(cfg)

    @cached_property
    def core(self):
        """The typed client for core/v1: slow to build (its models), so only where it pays."""
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    @cached_property
    def dynamic(self):
        from kubernetes.dynamic import DynamicClient

        # a lab's discovery cache lives in the lab (the client's default is a new file in /tmp
        # for every API server port, never removed)
        here = Path(self.kubeconfig).resolve().parent
        if state_dir().resolve() in here.parents:
            return DynamicClient(self.api_client, cache_file=str(here / ".discovery-cache.json"))
        return DynamicClient(self.api_client)

    def resource(self, api_version: str, kind: str):
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def apply(self, obj: dict) -> dict:
        """Server-side apply: create or update, idempotent. A refusal raises ApiRefused."""
        res = self.resource(obj["apiVersion"], obj["kind"])
        meta = obj["metadata"]
        try:
            out = self.dynamic.server_side_apply(res, body=obj, name=meta["name"],
                                                 namespace=meta.get("namespace"),
                                                 field_manager=FIELD_MANAGER, force_conflicts=True)
        except _api_exception() as err:
            if err.status and 400 <= err.status < 500 and err.status not in (404, 409, 429):
                where = f"{meta['namespace']}/" if meta.get("namespace") else ""
                raise ApiRefused(f"the API server refused {obj['kind']} {where}{meta['name']}: "
                                 f"{server_message(err)}") from None
            raise
        return out.to_dict()

    def apply_settling(self, obj: dict, seconds: float = 10) -> dict:
        """apply(), again for up to `seconds` while a webhook refuses it for something it cannot find: an
        object made a moment before that its cache has not seen yet (Volcano's queue webhook looking up
        the parent queue just created). Any other refusal, or the same after `seconds`, stands."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                return self.apply(obj)
            except ApiRefused as err:
                if "not found" not in str(err) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)

    def create_many(self, objs: list[dict], threads: int = 16) -> None:
        """POST each object from a thread pool, without the client's models (thousands of objects: the
        dynamic client's server-side apply spends more of the machine than the API server does). An object
        already there counts as made; the server refusing one raises ApiRefused naming it."""
        host = self.api_client.configuration.host
        paths: dict[tuple[str, str], tuple[str, bool, str]] = {}
        for obj in objs:
            key = (obj["apiVersion"], obj["kind"])
            if key not in paths:
                res = self.resource(*key)
                paths[key] = (f"{host}/{'apis' if '/' in key[0] else 'api'}/{key[0]}", res.namespaced, res.name)

        def one(obj: dict) -> None:
            base, namespaced, plural = paths[(obj["apiVersion"], obj["kind"])]
            meta = obj["metadata"]
            url = f"{base}/namespaces/{meta['namespace']}/{plural}" if namespaced else f"{base}/{plural}"
            _, refused = self.post(url, obj)
            if refused:
                where = f"{meta['namespace']}/" if meta.get("namespace") else ""
                raise ApiRefused(f"the API server refused {obj['kind']} {where}{meta['name']}: {refused}")

        with ThreadPoolExecutor(max_workers=threads) as ex:
            list(ex.map(one, objs))

    def apply_status(self, obj: dict) -> None:
        """Set an object's status (e.g. a node's allocatable, which a device plugin would set)."""
        res = self.resource(obj["apiVersion"], obj["kind"]).subresources["status"]
        meta = obj["metadata"]
        self.dynamic.server_side_apply(res, body={"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                                                  "metadata": {"name": meta["name"]},
                                                  "status": obj["status"]},
                                       name=meta["name"], namespace=meta.get("namespace"),
                                       field_manager=FIELD_MANAGER + "-status", force_conflicts=True)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        try:
            return self.resource(api_version, kind).get(name=name, namespace=namespace).to_dict()
        except _not_found():
            return None

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             label_selector: str | None = None) -> list[dict]:
        res = self.resource(api_version, kind)
        kwargs = {"namespace": namespace} if namespace and res.namespaced else {}
        if label_selector:
            kwargs["label_selector"] = label_selector
        return res.get(**kwargs).to_dict().get("items", [])

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               grace: int | None = None) -> bool:
        try:
            body = {"propagationPolicy": "Background"}
            if grace is not None:
                body["gracePeriodSeconds"] = grace
            self.resource(api_version, kind).delete(name=name, namespace=namespace, body=body)
            return True
        except _not_found() + _kind_not_served():  # no such object, or the kind is not served
            return False

    def post(self, url: str, obj: dict, attempts: int = 6):
        """POST one object, again after what the server may answer later (429, 5xx): (response, None)
        when it is made or already there (409), else (response, "HTTP <status>: <its message>")."""
        pool = self.api_client.rest_client.pool_manager
        body = json.dumps(obj).encode()
        for attempt in range(attempts):
            resp = pool.request("POST", url, body=body, headers={"Content-Type": "application/json"}, timeout=60)
            if resp.status in (200, 201, 409):
                return resp, None
            if resp.status not in (429, 500, 503, 504):
                break
            time.sleep(0.2 * (attempt + 1))
        try:
            message = json.loads(resp.data).get("message", "")
        except ValueError:
            message = resp.data[:200].decode(errors="replace")
        return resp, f"HTTP {resp.status}: {message}"

    def delete_pods(self, namespace: str) -> None:
        """Every pod of a namespace, at once (a 1 s grace period): for clean-up. Not 0: a pod removed
        without its node's say never reaches a terminal phase, and in a vCluster (whose pods the host's
        KWOK ends) a Job's pod then keeps its tracking finalizer, and its GPUs, for good."""
        try:
            # the client sends a collection delete only with a selector; this one matches every pod
            self.resource("v1", "Pod").delete(namespace=namespace, field_selector=f"metadata.namespace={namespace}",
                                              body={"gracePeriodSeconds": 1})
        except _not_found():
            pass

    def readyz(self) -> bool:
        host = self.api_client.configuration.host
        try:
            resp = self.api_client.rest_client.pool_manager.request(
                "GET", f"{host}/readyz", timeout=5, retries=False)
            return resp.status == 200
        except Exception:  # noqa: BLE001 - not ready, in whatever way
            return False

    def close(self) -> None:
        self.api_client.close()


def watch_pods(kube: Kube, namespace: str, on_event, stopping, errors: list[str], ready=None,
               timeout_s: int = 120) -> None:
    """List, then watch, the pods of `namespace` (see watch_path)."""
    watch_path(kube, f"/api/v1/namespaces/{namespace}/pods", on_event, stopping, errors, ready, timeout_s)


def watch_path(kube: Kube, path: str, on_event, stopping, errors: list[str], ready=None,
               timeout_s: int = 120, query: str = "", on_relist=None) -> None:
    """List, then watch, the objects at `path` (e.g. /api/v1/pods; `query` a field or label selector
    like `fieldSelector=reason%3DEvict`) until `stopping` is set, calling on_event(type, obj) for every
    object listed ("LISTED"; `on_relist()` first, when a list starts again after a dropped watch) and every
    ADDED / MODIFIED / DELETED event. A watch that ends at its timeout goes on from the last
    resourceVersion seen (bookmarks keep it current); only a dropped or expired one relists (10,000
    pods are tens of MB to list and decode). Lean on purpose (JSON over the client's connection
    pool, no typed models): the harness must keep up with thousands of pods. Errors are kept in
    `errors`, never raised."""
    pool = kube.api_client.rest_client.pool_manager
    base = f"{kube.api_client.configuration.host}{path}"
    sep = f"?{query}&" if query else "?"
    rv = None
    while not stopping.is_set():
        try:
            if rv is None:
                listed = json.loads(pool.request("GET", base + (f"?{query}" if query else ""), timeout=60).data)
                if "items" not in listed:
                    raise RuntimeError(f"list answered: {listed.get('message') or listed}"[:200])
                if on_relist is not None:
                    on_relist()
                for pod in listed.get("items", []):
                    on_event("LISTED", pod)
                if ready is not None:
                    ready.set()
                rv = listed["metadata"]["resourceVersion"]
            resp = pool.request("GET", f"{base}{sep}watch=1&allowWatchBookmarks=true&resourceVersion={rv}"
                                f"&timeoutSeconds={timeout_s}", preload_content=False, timeout=None)
            if resp.status != 200:
                raise RuntimeError(f"watch answered {resp.status}: {resp.data[:200]!r}")
            buf = b""
            for chunk in resp.stream(65536):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line:
                        event = json.loads(line)
                        kind = event.get("type")
                        if kind == "ERROR":  # 410 Gone: the resourceVersion expired; list again
                            raise RuntimeError(f"watch ended: {event['object'].get('message', '')}")
                        rv = event["object"]["metadata"]["resourceVersion"]
                        if kind in ("ADDED", "MODIFIED", "DELETED"):
                            on_event(kind, event["object"])
                if stopping.is_set():
                    break
            resp.release_conn()
        except Exception as err:  # noqa: BLE001 - relist and go on; kept for the report
            errors.append(f"{type(err).__name__}: {err}"[:200])
            rv = None
            time.sleep(0.5)


def _api_exception() -> type:
    from kubernetes.client.exceptions import ApiException

    return ApiException


def _not_found() -> tuple[type, ...]:
    from kubernetes.dynamic.exceptions import NotFoundError

    return (NotFoundError,)


def _kind_not_served() -> tuple[type, ...]:
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    return (ResourceNotFoundError,)
