"""A lab's metrics processes: Prometheus and kube-state-metrics, supervised like every other.

Prometheus scrapes the scheduler's processes (each on its own metrics port: the lab's Addon says
which), kube-state-metrics
(which serves `kube_node_status_capacity{resource="nvidia_com_gpu"}`, KAI's default GPU capacity
query for time-based fair share) and the API server, every SCRAPE_INTERVAL: a lab's runs last
minutes, so figures need seconds of resolution. Everything listens on 127.0.0.1, ports per lab.
"""

from __future__ import annotations

from pathlib import Path

import yaml
import json
import re
import time
import urllib.request
from datetime import datetime
from ..errors import LabError
from .waits import wait_until


PROMETHEUS, KSM = "prometheus", "kube-state-metrics"
COMPONENTS = (PROMETHEUS, KSM)
SCRAPE_INTERVAL_S = 2
SCRAPE_INTERVAL = f"{SCRAPE_INTERVAL_S}s"
PORTS = {PROMETHEUS: ["web"], KSM: ["metrics", "telemetry"]}
# A process whose series no figure reads (only Go's and controller-runtime's: KAI's binder, pod grouper,
# pod group controller, admission) is scraped every 10 s: two idle small labs side by side, 10.4 % of a
# core with every scrape at 2 s, 9.1 % so (measured here); kept for `status` and for users' queries
SLOW_SCRAPE_INTERVAL = "10s"


def scrape_job(name: str, port: int, figures: bool = True) -> dict:
    """A scrape job for one loopback process; `figures=False` for one whose series no figure reads."""
    job: dict = {"job_name": name, "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
    if not figures:
        job.update({"scrape_interval": SLOW_SCRAPE_INTERVAL, "scrape_timeout": SLOW_SCRAPE_INTERVAL})
    return job


def port_names() -> list[str]:
    return [f"{c}.{p}" for c, ps in PORTS.items() for p in ps]


def own_ports(name: str, ports: dict[str, int]) -> dict[str, int]:
    return {k.split(".", 1)[1]: v for k, v in ports.items() if k.startswith(name + ".")}


def url(ports: dict[str, int]) -> str:
    """The lab's Prometheus (its HTTP API; `kailab env` prints it)."""
    return f"http://127.0.0.1:{ports[PROMETHEUS + '.web']}"


def scrape_config(ports: dict[str, int], pki_dir: Path, scrape_jobs: list[dict]) -> dict:
    """Prometheus' configuration: one job per scraped process, static loopback targets; the
    scheduler's processes' jobs come from the lab's Addon."""
    jobs = list(scrape_jobs)
    jobs.append(scrape_job(KSM, ports[KSM + '.metrics']))
    # the API server's /metrics is large: every 5 s it cost an idle lab 2.4 % of a core (the API
    # server rendering it, Prometheus parsing it), measured here; no figure of a run reads it at
    # seconds' resolution (a run's CPU comes from /proc, its requests from the server's own counter)
    jobs.append({"job_name": "kube-apiserver", "scheme": "https", "scrape_interval": "20s", "scrape_timeout": "10s",
                 "tls_config": {"ca_file": str(pki_dir / "ca.crt"), "cert_file": str(pki_dir / "admin.crt"),
                                "key_file": str(pki_dir / "admin.key")},
                 "static_configs": [{"targets": [f"127.0.0.1:{ports['kube-apiserver']}"]}]})
    return {"global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL,
                       "scrape_timeout": SCRAPE_INTERVAL},
            "scrape_configs": jobs}


def argv(name: str, binary: Path, lab: Path, ports: dict[str, int], pki_dir: Path,
         scrape_jobs: list[dict] = ()) -> list[str]:
    if name == PROMETHEUS:
        config = lab / "prometheus.yaml"
        config.write_text(yaml.safe_dump(scrape_config(ports, pki_dir, scrape_jobs), sort_keys=False))
        return [str(binary), f"--config.file={config}", f"--storage.tsdb.path={lab / 'prometheus'}",
                f"--web.listen-address=127.0.0.1:{ports[PROMETHEUS + '.web']}",
                "--storage.tsdb.retention.time=1d", "--log.level=warn"]
    if name == KSM:
        return [str(binary), f"--kubeconfig={lab / 'kubeconfig'}",
                "--host=127.0.0.1", f"--port={ports[KSM + '.metrics']}",
                "--telemetry-host=127.0.0.1", f"--telemetry-port={ports[KSM + '.telemetry']}",
                # what a lab's figures use: nodes' GPU capacity, pods' GPU requests
                "--resources=nodes,pods,namespaces"]
    raise ValueError(name)


def health_url(name: str, ports: dict[str, int]) -> str:
    if name == PROMETHEUS:
        return url(ports) + "/-/ready"
    return f"http://127.0.0.1:{ports[KSM + '.metrics']}/healthz"


def _active_targets(ports: dict[str, int]) -> list[dict]:
    with urllib.request.urlopen(url(ports) + "/api/v1/targets?state=active", timeout=5) as resp:  # noqa: S310
        return json.load(resp)["data"]["activeTargets"]


def targets_down(ports: dict[str, int]) -> list[str]:
    """Scrape targets whose last scrape failed and whose next one failed too (job: error), [] when none
    did: on a loaded machine one scrape of a healthy target times out now and then, and `status` called
    such a lab broken until the next scrape (a make test run on three workers met it)."""
    down = {t["labels"].get("job") for t in _active_targets(ports) if t["health"] == "down"}  # 'unknown': not scraped yet
    if not down:
        return []
    scrapes = wait_for_scrape(ports, after=time.time(), jobs=down)
    return [f"{job}: {said}" for job, (_, said) in sorted(scrapes.items()) if job in down and said != "up"]


def last_scrapes(ports: dict[str, int]) -> dict[str, tuple[float, str]]:
    """Each active target's last scrape: job -> (unix time, 'up' or its error)."""
    out = {}
    for t in _active_targets(ports):
        when = t.get("lastScrape") or ""
        at = datetime.fromisoformat(when).timestamp() if when and not when.startswith("0001") else 0.0
        job = t["labels"].get("job", "?")
        if job not in out or at < out[job][0]:  # a job of several targets: its least recent scrape
            out[job] = (at, "up" if t["health"] == "up" else t.get("lastError") or t["health"])
    return out


def _seconds(duration: str) -> float:
    """Prometheus' '2s', '1m', '1m30s' in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration))


def scrape_intervals(ports: dict[str, int]) -> dict[str, float]:
    """Each scrape job's interval in seconds, as Prometheus runs it."""
    return {t["labels"].get("job", "?"): _seconds(t.get("scrapeInterval") or SCRAPE_INTERVAL)
            for t in _active_targets(ports)}


def figure_jobs(ports: dict[str, int]) -> set[str]:
    """The jobs scraped at seconds' resolution: those whose series a run's figures read."""
    return {job for job, every in scrape_intervals(ports).items() if every <= SCRAPE_INTERVAL_S}


def wait_for_scrape(ports: dict[str, int], after: float, timeout: float | None = None,
                    jobs: set[str] | None = None) -> dict[str, tuple[float, str]]:
    """Until every target of `jobs` (default all) has been scraped since `after`, or `timeout` s pass
    (default: three of the longest interval among them): the targets' last scrapes. A run can end
    between two scrapes; what it left is in Prometheus only after the next."""
    if timeout is None:
        every = scrape_intervals(ports)
        timeout = 3 * max([every[j] for j in every if jobs is None or j in jobs] or [SCRAPE_INTERVAL_S])

    def fresh():
        scrapes = last_scrapes(ports)
        return scrapes if all(at >= after for job, (at, _) in scrapes.items() if jobs is None or job in jobs) else None

    try:
        return wait_until("every target's next scrape", fresh, timeout=timeout)
    except LabError:  # a target still not scraped (a stopped process): what the scrapes were is the answer
        return last_scrapes(ports)


def describe_scrapes(scrapes: dict[str, tuple[float, str]], since: float) -> str:
    """'job up at +1.2s, job failed: <error> at +3.0s, …', times from `since`."""
    return ", ".join(f"{job} {'up' if how == 'up' else 'failed: ' + how} "
                     + (f"at +{at - since:.1f}s" if at else "(never scraped)")
                     for job, (at, how) in sorted(scrapes.items())) or "no targets"
