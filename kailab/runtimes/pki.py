"""The lab's certificates: a CA, the apiserver's serving cert, an admin client cert, SA keys.

Generated per lab, so two labs never trust each other. Private keys are written 0600 and
never leave the lab directory (evidence collection skips this directory).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
import yaml

VALID_FOR = dt.timedelta(days=365)


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _write_key(path: Path, key) -> None:
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(subject: x509.Name, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + VALID_FOR))


def generate(pki_dir: Path) -> dict[str, Path]:
    """Write every certificate and key the lab needs; returns their paths by role."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(pki_dir, 0o700)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("kailab-ca")
    ca = (_builder(ca_name, ca_name, ca_key.public_key())
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def leaf(stem: str, cn: str, org: str | None, server: bool) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        b = _builder(_name(cn, org), ca_name, key.public_key())
        usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server else [ExtendedKeyUsageOID.CLIENT_AUTH]
        b = b.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        if server:
            b = b.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.DNSName("kubernetes"),
                x509.DNSName("kubernetes.default"), x509.DNSName("kubernetes.default.svc"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(ipaddress.ip_address("10.0.0.1"))]), critical=False)
        _write_cert(pki_dir / f"{stem}.crt", b.sign(ca_key, hashes.SHA256()))
        _write_key(pki_dir / f"{stem}.key", key)

    _write_cert(pki_dir / "ca.crt", ca)
    _write_key(pki_dir / "ca.key", ca_key)
    leaf("apiserver", "kube-apiserver", None, server=True)
    # KAI's webhook servers (admission, the podgroupcontroller's PodGroup validation), reached by
    # the API server on 127.0.0.1
    leaf("kai-webhooks", "kai-webhooks", None, server=True)
    # every lab component authenticates as a cluster admin: the lab is single-tenant
    leaf("admin", "kailab-admin", "system:masters", server=False)
    # service-account tokens are signed ES256: an RSA key took 0.06-0.5 s to generate, on every `up`
    sa = ec.generate_private_key(ec.SECP256R1())
    _write_key(pki_dir / "sa.key", sa)
    (pki_dir / "sa.pub").write_bytes(sa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return {p.stem + p.suffix.replace(".", "_"): p for p in pki_dir.iterdir()}


def kubeconfig(path: Path, pki_dir: Path, server: str, name: str) -> None:
    """A kubeconfig pointing at the lab's apiserver with the admin client cert (by file path)."""
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": name, "cluster": {"server": server,
                                                 "certificate-authority": str(pki_dir / "ca.crt")}}],
        "users": [{"name": f"{name}-admin", "user": {
            "client-certificate": str(pki_dir / "admin.crt"),
            "client-key": str(pki_dir / "admin.key")}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    os.chmod(path, 0o600)
