"""What a fleet's free GPU is worth to the tasks that still come: allocation and fragmentation.

A node's GPUs are whole devices or shared ones (KAI's binder puts fractional pods on a device it
names with the pod's `runai-gpu-group` label). After a fill step:
  allocated   milli-GPU held by pods (a whole GPU 1000, a fraction its share) over the fleet's capacity
  fragmented  for a task shape, the free milli-GPU on nodes where that task cannot use it:
              all of a node's free GPU when the task does not fit its free CPU or memory, or (whole
              GPUs) when fewer whole GPUs are free than it asks; for a fraction f, the free part of
              each shared device with less than f left; all of it on a node whose GPU model the task
              does not accept (gpu_models: the artifact's "no access"). Weighted by how often each
              shape occurs in the task list: the expected fragmentation the next task meets (the
              measure of "Beware of Fragmentation", ATC '23, over this lab's real placements).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Node:
    gpus: int
    cpu_milli: int
    memory_mib: int
    whole_used: int = 0
    shared: dict[str, int] = field(default_factory=dict)  # gpu group -> milli used on that device
    cpu_used: int = 0
    memory_used: int = 0
    product: str = ""  # the GPU model (nvidia.com/gpu.product)

    def empty(self) -> Node:
        """The same node with nothing on it."""
        return Node(self.gpus, self.cpu_milli, self.memory_mib, product=self.product)

    @property
    def free_whole(self) -> int:
        return max(0, self.gpus - self.whole_used - len(self.shared))

    @property
    def free_milli(self) -> int:
        return self.free_whole * 1000 + sum(max(0, 1000 - u) for u in self.shared.values())

    @property
    def used_milli(self) -> int:
        return self.gpus * 1000 - self.free_milli


@dataclass(frozen=True)
class Shape:
    milli: int  # per pod: 1000 x whole GPUs, or the fraction's milli
    cpu_milli: int
    memory_mib: int
    models: frozenset[str] = frozenset()  # GPU models it accepts; empty: any


def unusable_milli(node: Node, shape: Shape) -> int:
    """Free milli-GPU on `node` that a task of `shape` cannot use."""
    free = node.free_milli
    if shape.milli == 0:
        return 0  # a CPU-only task uses no GPU: none of it is lost to it
    if shape.models and node.product not in shape.models:
        return free
    if node.cpu_milli - node.cpu_used < shape.cpu_milli or node.memory_mib - node.memory_used < shape.memory_mib:
        return free
    if shape.milli >= 1000:
        return free if node.free_whole < shape.milli // 1000 else sum(max(0, 1000 - u) for u in node.shared.values())
    # a fraction fits a free whole GPU or a shared device with enough left
    return sum(left for left in (1000 - u for u in node.shared.values()) if 0 < left < shape.milli)


def fragmented_milli(nodes: dict[str, Node], shapes: Counter) -> float:
    """Expected unusable free milli-GPU over the fleet for the next task drawn from `shapes`."""
    total = sum(n for s, n in shapes.items() if s.milli > 0)
    if not total:
        return 0.0
    gpu_shapes = [(s, n) for s, n in shapes.items() if s.milli > 0]
    # a node with no free GPU loses none: late in a fill most nodes (1,213 nodes x 151 task shapes
    # took 0.2 s of the harness's CPU a step)
    open_nodes = [node for node in nodes.values() if node.free_milli]
    return sum(n * sum(unusable_milli(node, s) for node in open_nodes) for s, n in gpu_shapes) / total
