"""Kubeflow's training-operator (PyTorchJob, TFJob, MPIJob v1, JAXJob, XGBoostJob, PaddleJob).

It manages its own webhook certificate (open-policy-agent's cert-controller, cmd/training-operator.v1
and pkg/cert): a Secret it reads and writes, files at the fixed path /tmp/k8s-webhook-server/
serving-certs, and the caBundle it injects into the ValidatingWebhookConfiguration it knows by name.
Its controllers start only once all three are in place. A lab gives it that Secret made here — a CA
of the name it checks and a serving certificate for its Service's name *and* 127.0.0.1 — so it keeps
them instead of making its own, and the API server reaches its webhook on loopback. The files go into
a /tmp of the process's own (a private mount namespace; the host's /tmp never changes), and its
webhook server, which listens on every interface, runs in a network namespace of its own.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import shlex
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..runtimes.addon import ProcessHost
from .base import MANAGED, Operator

# cmd/training-operator.v1/main.go and pkg/cert/cert.go at v1.9.3
SECRET = "training-operator-webhook-cert"
SERVICE = "training-operator"
CA_NAME = "training-operator-ca"
CONFIGURATION = "validator.training-operator.kubeflow.org"
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
# cert-controller renews what expires within 90 days: ours outlive that
VALID_FOR = dt.timedelta(days=3650)


class Kubeflow(Operator):
    def __init__(self, version: str | None = None) -> None:
        super().__init__("kubeflow", version)

    def webhook_configuration_name(self, doc: dict) -> str:
        return CONFIGURATION  # cert-controller injects its CA into this one, by name, before it is ready

    def webhook_ca(self, host: ProcessHost) -> bytes:
        return (self._certs(host) / "ca.crt").read_bytes()

    def prepare(self, host: ProcessHost) -> None:
        certs = self._certs(host)
        if not (certs / "tls.crt").is_file():
            _write_certs(certs, f"{SERVICE}.{self.pin.namespace}.svc")
        data = {k: base64.b64encode((certs / k).read_bytes()).decode() for k in ("ca.crt", "ca.key", "tls.crt", "tls.key")}
        host.kube.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data,
                         "metadata": {"name": SECRET, "namespace": self.pin.namespace, "labels": dict(MANAGED)}})

    def argv(self, host: ProcessHost) -> list[str]:
        p, ports = self.pin.process, host.ports
        metrics, probe, hook = (ports[f"{p}.{k}"] for k in ("metrics", "probe", "webhook"))
        certs = self._certs(host)
        # a /tmp of its own holding the certificate where cert-controller and the webhook server look; a lab
        # whose state is under /tmp (KAILAB_STATE=/tmp/...) is bound back into it from the working folder
        # (what the new /tmp covers stays reachable through it), or its kubeconfig and keys would be hidden
        lab = shlex.quote(str(host.lab))
        keep = (f"mkdir -p {lab} && mount --no-canonicalize --bind . {lab} && " if _under_tmp(host.lab) else "")
        # and a binary under /tmp (kailab's cache there: KAILAB_CACHE=/tmp/..., a CI whose HOME is a temporary
        # folder) runs from a descriptor opened before the new /tmp hides it
        binary, run = ('exec 3< "$1" && shift && ', "/proc/self/fd/3 ") if _under_tmp(host.bins[p]) else ("", "")
        mount = (f"{binary}cd {lab} && mount -t tmpfs tmpfs /tmp && {keep}mkdir -p {CERT_DIR} && "
                 f"cp {shlex.quote(str(certs / 'tls.crt'))} {shlex.quote(str(certs / 'tls.key'))} {CERT_DIR}/"
                 f' && cd / && exec {run}"$@"')
        shim = [sys.executable, "-m", "kailab.runtimes.netns", f"--connect={ports['kube-apiserver']}",
                f"--expose={metrics}={metrics}", f"--expose={probe}={probe}", f"--expose={hook}={hook}", "--"]
        return shim + ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, p,
                       str(host.bins[p]), f"--metrics-bind-address=127.0.0.1:{metrics}",
                       f"--health-probe-bind-address=127.0.0.1:{probe}", f"--webhook-server-port={hook}",
                       f"--webhook-service-name={SERVICE}", f"--webhook-secret-name={SECRET}",
                       "--kube-api-qps=100", "--kube-api-burst=200", "--zap-log-level=info"]

    def env(self, host: ProcessHost) -> dict[str, str]:
        return {**super().env(host), "MY_POD_NAMESPACE": self.pin.namespace, "TMPDIR": "/tmp"}

    @staticmethod
    def _certs(host: ProcessHost) -> Path:
        certs = host.lab / "webhooks" / "kubeflow"
        certs.mkdir(parents=True, exist_ok=True)
        return certs


def _write_certs(folder: Path, dns_name: str) -> None:
    """cert-controller's own layout: an RSA CA (PKCS#1, as it parses it) whose name it checks, and a
    serving certificate for `dns_name` (which it checks) and 127.0.0.1 (which the API server dials)."""
    now = dt.datetime.now(dt.timezone.utc)

    def builder(subject: str, issuer: str, key):
        return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + VALID_FOR))

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (builder(CA_NAME, CA_NAME, ca_key)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=True, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectAlternativeName([x509.DNSName(CA_NAME)]), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    leaf = (builder(dns_name, CA_NAME, key)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    pkcs1 = lambda k: k.private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL,  # noqa: E731
                                      serialization.NoEncryption())
    (folder / "ca.crt").write_bytes(ca.public_bytes(pem))
    (folder / "ca.key").write_bytes(pkcs1(ca_key))
    (folder / "tls.crt").write_bytes(leaf.public_bytes(pem))
    (folder / "tls.key").write_bytes(pkcs1(key))
    for f in ("ca.key", "tls.key"):
        (folder / f).chmod(0o600)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _under_tmp(path: Path) -> bool:
    """Whether the process's own /tmp would hide `path`: it, or what it links to, is under /tmp."""
    return any(Path("/tmp") in q.parents for q in (Path(path).absolute(), Path(path).resolve()))
