"""A failed kind `up` names the nodes that are not Ready, with their condition's reason."""

from kailab.runtimes.kind.runtime import _not_ready


def test_only_nodes_not_ready_are_named_with_their_reason():
    def node(name, *conditions):
        return {"metadata": {"name": name}, "status": {"conditions": list(conditions)}}

    nodes = {"items": [node("a", {"type": "Ready", "status": "True"}),
                       node("b", {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "no CNI"}),
                       node("c", {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}),
                       node("d")]}
    assert _not_ready(nodes) == ["b Ready=False KubeletNotReady: no CNI", "c Ready=Unknown NodeStatusUnknown",
                                 "d Ready=none"]
