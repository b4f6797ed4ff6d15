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
