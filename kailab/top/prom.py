"""KAI's fair share per queue, from the lab's Prometheus (the scheduler's own gauge, as KAI's
queue dashboard charts it). None when there is no Prometheus or it does not answer."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

FAIR_SHARE = "max by (queue_name) (kai_queue_fair_share_gpu)"


def fair_share(prometheus: str | None, timeout: float = 1) -> dict[str, float] | None:
    if not prometheus:
        return None
    args = urllib.parse.urlencode({"query": FAIR_SHARE})
    try:
        with urllib.request.urlopen(f"{prometheus}/api/v1/query?{args}", timeout=timeout) as resp:  # noqa: S310
            result = json.load(resp)["data"]["result"]
    except (OSError, ValueError, KeyError):
        return None
    return {r["metric"].get("queue_name", "?"): float(r["value"][1]) for r in result}
