"""`kailab status` on a lab that is not up exits 1 and says why in one line on stderr."""

from kailab.cli.labs import why_not_up


def _info(state: str, **components: dict) -> dict:
    return {"state": state, "components": {n: {"state": "running", **c} for n, c in components.items()}}


def test_a_dead_component_and_a_failing_scrape_are_named():
    info = _info("broken", scheduler={"state": "exited"},
                 prometheus={"scrape_failures": ["kube-state-metrics: context deadline exceeded"]})
    assert why_not_up(info) == ("scheduler exited; Prometheus cannot scrape kube-state-metrics: "
                                "context deadline exceeded")


def test_broken_with_every_component_running_is_the_api_server():
    assert why_not_up(_info("broken", etcd={})) == "its API server does not answer"


def test_a_lab_still_starting_has_nothing_to_blame():
    assert why_not_up(_info("starting", etcd={})) == ""
