"""Small inputs the fill and replay tests write where they run: a fleet and task list in the Alibaba
GPU trace's format (the real data stays in the user's clone: 3 G2 nodes of 8 GPUs and 4 T4 nodes of 2,
eight tasks of the trace's shapes — fractions of a GPU, whole GPUs, four, none — which `kailab trace
import` reads as it reads the trace), and a two-team queue design for the tiny fleet's 8 GPUs."""

from __future__ import annotations

from pathlib import Path

NODES = ("sn,cpu_milli,memory_mib,gpu,model\n"
         + "".join(f"openb-node-{i:04d},32000,131072,8,G2\n" for i in range(3))
         + "".join(f"openb-node-{i:04d},16000,65536,2,T4\n" for i in range(3, 7)))
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
SHAPES = [(1, 1000), (1, 500), (1, 300), (2, 1000), (1, 1000), (1, 700), (4, 1000), (0, 0)]


def write_clusterdata(root: Path) -> Path:
    """`root`/clusterdata laid out as alibaba/clusterdata's GPU trace; its path."""
    csv = root / "clusterdata" / "cluster-trace-gpu-v2023" / "csv"
    csv.mkdir(parents=True)
    (csv / "openb_node_list_gpu_node.csv").write_text(NODES)
    (csv / "openb_pod_list_default.csv").write_text(HEADER + "".join(
        f"openb-pod-{i:04d},2000,4096,{g},{m},,BE,Running,{i},{i + 100},{i}\n" for i, (g, m) in enumerate(SHAPES)))
    return root / "clusterdata"


def two_teams(name: str = "even", team_a: int = 4) -> str:
    """A replay design: an org of the tiny fleet's 8 GPUs, team-a's quota `team_a`, team-b's the rest."""
    return (f"design: {name}\nqueues:\n  org:\n    gpu: {{quota: 8}}\n    children:\n"
            f"      team-a: {{gpu: {{quota: {team_a}}}}}\n      team-b: {{gpu: {{quota: {8 - team_a}}}}}\n")
