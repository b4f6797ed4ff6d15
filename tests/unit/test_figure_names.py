"""Key figures for people: every verdict figure gets a label and a unit, in reading order."""

from kailab.report.figure_names import described, step_titles, text


def test_figures_read_in_words_and_units():
    figures = {"binds": 24, "evictions": 2, "gangs_complete": 3, "gangs_incomplete": 1,
               "wait_p99_s.prod": 1.678, "wait_p50_s.prod": 0.4, "never_bound.research": 2,
               "expected_after_s.02": 12.3, "gang_bind_spread_s.train": 0.012}
    titles = step_titles({"steps": [{"name": "fill"}, {"name": "research comes back"}]})
    pairs = dict(described(figures, titles))
    assert pairs["binds"] == "24" and pairs["evictions"] == "2"
    assert pairs["gangs complete"] == "3 of 4"
    assert pairs["waits p99"] == "prod 1.7 s"
    assert pairs["never bound"] == "research 2 pods"
    assert pairs["gang bind spread"] == "train 0.012 s"
    assert pairs["step 2 “research comes back”"] == "held after 12.3 s"
    assert not any("p50" in label for label in pairs)  # detail kept for the run's own table
    line = text(figures, titles)
    assert line.startswith("24 binds · 2 evictions · gangs complete: 3 of 4")
    assert "_s." not in line and "expected_after" not in line


def test_a_figure_not_known_yet_is_shown_not_dropped():
    assert ("new_thing", "7") not in described({"new_thing": 7})
    assert ("new thing", "7") in described({"new_thing": 7})
    assert text({}) == "-" and described(None) == []
