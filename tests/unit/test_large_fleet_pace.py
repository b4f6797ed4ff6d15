"""A large fleet's KWOK nodes renew their Leases and report their status less often, in proportion
to their number (the API server of a 1,213-node lab spent a quarter of its idle CPU on them); the
shipped fleets (20 nodes and fewer) keep Kubernetes' pace. Whether nodes stay Ready through a
full-scale fill is recorded by the fill itself (run.json: nodes_not_ready)."""

from __future__ import annotations

import yaml

from kailab.runtimes.binary import NODE_LEASE_S, node_lease_seconds
from kailab.runtimes.labkit import kwok_config_text


def _heartbeat(text: str) -> dict:
    return next(d for d in yaml.safe_load_all(text) if d and d.get("metadata", {}).get("name") == "kailab-node-heartbeat")["spec"]["delay"]


def test_small_fleets_keep_kubernetes_pace():
    assert node_lease_seconds(20) == NODE_LEASE_S == 40
    assert kwok_config_text(20) == kwok_config_text() == kwok_config_text(270)
    assert _heartbeat(kwok_config_text()) == {"durationMilliseconds": 240000, "jitterDurationMilliseconds": 300000}


def test_a_large_fleet_writes_about_three_times_a_second_in_all():
    for nodes in (1000, 1213):
        renewals_per_s = 4 * nodes / node_lease_seconds(nodes)  # KWOK renews at a quarter of the lease
        delay = _heartbeat(kwok_config_text(nodes))
        reports_per_s = nodes / ((delay["durationMilliseconds"] + delay["jitterDurationMilliseconds"]) / 2000)
        assert 1.9 <= renewals_per_s <= 2.0 and 0.99 <= reports_per_s <= 1.01, (nodes, renewals_per_s, reports_per_s)
