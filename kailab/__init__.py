"""kailab: a validation lab for the NVIDIA KAI Scheduler on fake-GPU Kubernetes fleets."""

__version__ = "0.1.0"
