"""Operators read from a controller-runtime Configuration file (JobSet, LeaderWorkerSet), and KubeRay.

JobSet and LWS take their webhook server's host, port and certificate folder from it, so a lab runs
them as Kueue runs: internal certificate management off, the lab CA's 127.0.0.1 certificate, every
listener on loopback, leader election off (one replica). KubeRay serves no webhook unless asked
(`ENABLE_WEBHOOKS`, off in its chart) and takes its listeners as flags.
"""

from __future__ import annotations

import yaml

from ..runtimes.addon import ProcessHost
from .base import Operator


class ConfiguredOperator(Operator):
    """An operator whose Configuration (`config.<group>/v1alpha1`) holds its listeners."""

    config_group = ""

    def configuration(self, host: ProcessHost) -> dict:
        p, ports = self.pin.process, host.ports
        return {"apiVersion": f"{self.config_group}/v1alpha1", "kind": "Configuration",
                "health": {"healthProbeBindAddress": f"127.0.0.1:{ports[f'{p}.probe']}"},
                "metrics": {"bindAddress": f"127.0.0.1:{ports[f'{p}.metrics']}"},
                "webhook": {"port": ports[f"{p}.webhook"], "host": "127.0.0.1",
                            "certDir": str(self.webhook_cert_dir(host))},
                "leaderElection": {"leaderElect": False},
                "internalCertManagement": {"enable": False},
                "clientConnection": {"qps": 100, "burst": 200}}

    def prepare(self, host: ProcessHost) -> None:
        (host.lab / f"{self.name}-config.yaml").write_text(yaml.safe_dump(self.configuration(host), sort_keys=False))

    def argv(self, host: ProcessHost) -> list[str]:
        return [str(host.bins[self.pin.process]), f"--config={host.lab / f'{self.name}-config.yaml'}",
                "--zap-log-level=info"]


class JobSet(ConfiguredOperator):
    config_group = "config.jobset.x-k8s.io"

    def __init__(self, version: str | None = None) -> None:
        super().__init__("jobset", version)


class LeaderWorkerSet(ConfiguredOperator):
    config_group = "config.lws.x-k8s.io"

    def __init__(self, version: str | None = None) -> None:
        super().__init__("lws", version)

    def argv(self, host: ProcessHost) -> list[str]:
        return super().argv(host) + ["--leader-elect=false"]  # its flag's default (true) wins over the file


class KubeRay(Operator):
    def __init__(self, version: str | None = None) -> None:
        super().__init__("ray", version)

    def argv(self, host: ProcessHost) -> list[str]:
        p, ports = self.pin.process, host.ports
        return [str(host.bins[p]), f"--metrics-addr=127.0.0.1:{ports[f'{p}.metrics']}",
                f"--health-probe-bind-address=127.0.0.1:{ports[f'{p}.probe']}",
                "--enable-leader-election=false", "--qps=100", "--burst=200",
                "--log-stdout-encoder=console"]
