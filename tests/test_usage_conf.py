"""Time-based fair share in the scheduler configuration (pure): KAI's field names and places."""

from __future__ import annotations

from kailab import kai


def test_usage_goes_where_kais_code_reads_it():
    base = {"actions": "allocate", "tiers": [{"plugins": [{"name": "predicates"}, {"name": "proportion"}]}]}
    conf = kai.with_usage(base, "http://127.0.0.1:9", {"windowSize": "90s", "fetchInterval": "2s",
                                                       "queryResolution": "2s", "kValue": 2.0})
    assert conf["usageDBConfig"] == {"clientType": "prometheus", "connectionString": "http://127.0.0.1:9",
                                     "usageParams": {"windowType": "sliding", "windowSize": "90s",
                                                     "fetchInterval": "2s",
                                                     "extraParams": {"queryResolution": "2s"}}}
    assert conf["tiers"][0]["plugins"] == [{"name": "predicates"},
                                           {"name": "proportion", "arguments": {"kValue": "2.0"}}]
    assert "usageDBConfig" not in base and base["tiers"][0]["plugins"][1] == {"name": "proportion"}


def test_usage_on_a_shard_is_what_kais_time_aware_e2e_patches():
    """KAI's operator renders usage from the SchedulingShard's usageDBConfig and kValue (its
    test/e2e/suites/timeaware patches exactly these); the scheduler's own configuration says the same."""
    base = kai.SchedulerChange({"actions": "allocate", "tiers": [{"plugins": [{"name": "proportion"}]}]},
                               {"placementStrategy": {"gpu": "binpack", "cpu": "binpack"}})
    usage = {"windowSize": "90s", "fetchInterval": "2s", "queryResolution": "2s", "kValue": 1}
    out = kai.usage_setting(base, "http://prometheus.monitoring.svc:9090", usage)
    assert out.shard["placementStrategy"] == base.shard["placementStrategy"]
    assert out.shard["kValue"] == 1.0 and isinstance(out.shard["kValue"], float)
    assert out.shard["usageDBConfig"] == out.conf["usageDBConfig"]
    assert out.shard["usageDBConfig"]["connectionString"] == "http://prometheus.monitoring.svc:9090"
    assert kai.usage_setting(kai.SchedulerChange(base.conf, None), "http://x", usage).shard is None
