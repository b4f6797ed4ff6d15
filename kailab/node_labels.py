"""The labels and annotations a fleet's nodes carry, apart from the fleet's model: runtimes select
their nodes by them without loading pydantic (`down` and `status` need no fleet file)."""

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
# how a node's GPUs are published, as fake-gpu-operator labels its nodes (KAI's e2e reads them)
DRA_PLUGIN_LABEL, DEVICE_PLUGIN_LABEL = "nvidia.com/gpu.deploy.dra-plugin-gpu", "nvidia.com/gpu.deploy.device-plugin"
FLEET_LABEL = "kailab.io/fleet"
POOL_LABEL = "kailab.io/pool"
# fake-gpu-operator labels its simulated nodes with their pool
SIMULATED_POOL_LABEL = "run.ai/simulated-gpu-node-pool"
