"""A few rows of Alibaba's GPU trace in its own format and a clone's layout (the real data is never
copied into kailab): what the import's unit tests and the live replay read."""

from __future__ import annotations

from pathlib import Path

NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,32000,131072,2,T4
openb-node-0001,32000,131072,2,T4
openb-node-0002,96000,786432,4,V100M32
"""
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
PODS = HEADER + """openb-pod-0000,4000,16384,1,1000,V100M32,LS,Running,100,160,100
openb-pod-0001,2000,8192,1,500,,BE,Succeeded,110,170,112
openb-pod-0002,8000,0,0,0,,Burstable,Running,120,180,120
openb-pod-0003,16000,32768,2,1000,T4,LS,Running,130,190,130
openb-pod-0004,4000,16384,1,1000,V100M16|V100M32,Guaranteed,Running,140,200,141
openb-pod-0005,4000,16384,1,1000,,BE,Pending,150,200,
"""


def clone(root: Path, pods: str = PODS, tasks: str = "default") -> Path:
    csv = root / "cluster-trace-gpu-v2023" / "csv"
    csv.mkdir(parents=True)
    (csv / "openb_node_list_gpu_node.csv").write_text(NODES)
    (csv / f"openb_pod_list_{tasks}.csv").write_text(pods)
    return root
