"""Time-based fair share in KAI's terms (pure): the usageDBConfig fields and where they sit.
The rendering into the scheduler's configuration is KAI's operator's (tests/unit/test_kai_render.py)."""

from __future__ import annotations

from kailab.stacks.kai import install as kai


def test_usage_goes_where_kais_code_reads_it():
    db, k_value = kai.usage_db_config("http://127.0.0.1:9", {"windowSize": "90s", "fetchInterval": "2s",
                                                             "queryResolution": "2s", "kValue": 2.0})
    # `extraParams` under `usageParams`, as KAI's code reads it (its docs show it beside)
    assert db == {"clientType": "prometheus", "connectionString": "http://127.0.0.1:9",
                  "usageParams": {"windowType": "sliding", "windowSize": "90s", "fetchInterval": "2s",
                                  "extraParams": {"queryResolution": "2s"}}}
    assert k_value == 2.0
