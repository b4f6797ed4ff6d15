"""The kind runtime: KAI from its own chart on a kind cluster, as users install it, its fleet as KWOK
nodes. `runtime` is the Runtime; `plan` the steps an `up` takes (shown by --dry-run); `host` the tools
and host facts it needs; `images` the images it builds here (no registry); `workers` real worker
nodes beside the control plane; `metrics` Prometheus and kube-state-metrics in the cluster; `pins`
the versions it installs."""

from .runtime import KindRuntime

__all__ = ["KindRuntime"]
