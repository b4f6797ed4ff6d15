"""Per-queue operational figures from a timeline (pure): waits created->bound, evictions, never bound."""

from __future__ import annotations

from kailab.exercise.state import TimelineEntry as T
from kailab.report.operations import peak_bound, quantile, queue_figures


def test_quantiles_are_values_that_occurred():
    values = [float(v) for v in range(1, 101)]
    assert (quantile(values, 50), quantile(values, 95), quantile(values, 99)) == (50, 95, 99)
    assert quantile([7.0], 99) == 7.0


def test_waits_count_from_created_to_first_bind_and_a_recreated_pod_waits_again():
    entries = [T(0, "created", "a", queue="real-q"), T(1.5, "bound", "a", queue="real-q"),
               T(0, "created", "b", queue="real-q"), T(3, "bound", "b", queue="real-q"),
               T(3.5, "running", "b", queue="real-q"), T(5, "bound", "a", queue="real-q"),  # not a new bind
               T(4, "evicted", "b", queue="real-q"), T(4.5, "created", "b", queue="real-q"),
               T(2, "created", "c", queue="real-p")]
    figs = queue_figures(entries, lambda real: real.removeprefix("real-"))
    assert figs == {"wait_p50_s.q": 1.5, "wait_p95_s.q": 3, "wait_p99_s.q": 3, "wait_max_s.q": 3,
                    "evicted.q": 1, "never_bound.q": 1, "never_bound.p": 1}


def test_a_gangs_peak_counts_pods_bound_at_once():
    entries = [T(1, "bound", "g-0", "g"), T(2, "bound", "g-1", "g"), T(3, "evicted", "g-0", "g"),
               T(4, "bound", "g-2", "g"), T(5, "bound", "x-0", "x")]
    assert peak_bound(entries, "g") == 2 and peak_bound(entries, "x") == 1 and peak_bound(entries, "none") == 0


def test_a_wait_expectation_passes_and_fails_on_the_timeline():
    from kailab.exercise.checks import Names, evaluate_wait
    from kailab.exercise.spec import WaitExpect
    from kailab.exercise.state import ClusterState

    state = ClusterState()
    state.timeline += [T(0, "created", "a", queue="x-q"), T(2, "bound", "a", queue="x-q"),
                       T(0, "created", "b", queue="x-q"), T(9, "bound", "b", queue="x-q")]
    names = Names("x", "ns")
    ok = evaluate_wait(state, WaitExpect.model_validate({"waitOf": "q", "p50": {"max": 2}}), names, "s")
    bad = evaluate_wait(state, WaitExpect.model_validate({"waitOf": "q", "p99": {"max": 5}}), names, "s")
    none = evaluate_wait(state, WaitExpect.model_validate({"waitOf": "other", "max": {"max": 5}}), names, "s")
    assert [r.passed for r in ok + bad + none] == [True, False, False]
    assert (bad[0].expected, bad[0].observed) == ("<= 5.0 s", "9 s") and none[0].observed == "no pod bound yet"
