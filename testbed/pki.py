"""Throwaway PKI for one testbed run, generated at start so no key material is ever committed.

EC P-256 keys keep start-up fast (an RSA key costs tens of milliseconds each) and are accepted
by kube-apiserver both for TLS and for signing service-account tokens (ES256).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=7)


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    ca: KeyPair
    serving: KeyPair
    admin: KeyPair
    controller_manager: KeyPair
    scheduler: KeyPair
    service_account_key: Path
    service_account_pub: Path
    #: The apiserver's identity towards aggregated APIs (metrics-server), which trust the
    #: user it names in request headers only from a certificate of this name.
    front_proxy: KeyPair


#: The common name of ``Pki.front_proxy``, the only one allowed to assert request headers.
FRONT_PROXY_NAME = "front-proxy-client"


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _issue(
    directory: Path,
    stem: str,
    subject: x509.Name,
    ca_key: ec.EllipticCurvePrivateKey | None,
    ca_name: x509.Name | None,
    *,
    server_names: tuple[str, ...] = (),
    server_ips: tuple[str, ...] = (),
    client: bool = False,
) -> tuple[KeyPair, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    is_ca = ca_key is None
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject if is_ca else ca_name or subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if is_ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        ).add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    else:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    signer = key if ca_key is None else ca_key
    cert = builder.sign(signer, hashes.SHA256())
    pair = KeyPair(cert=directory / f"{stem}.crt", key=directory / f"{stem}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pair.key, key)
    return pair, key


def issue_client(
    directory: Path, stem: str, common_name: str, organization: str | None = None
) -> KeyPair:
    """One more client certificate signed by a run's CA (read back from ``directory``), for an
    identity that joins after start-up, such as a real node's ``system:node:<name>``."""
    ca_cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"unexpected CA key type in {directory}")
    pair, _ = _issue(
        directory, stem, _name(common_name, organization), ca_key, ca_cert.subject, client=True
    )
    return pair


def issue_server(
    directory: Path, stem: str, common_name: str, names: tuple[str, ...], ips: tuple[str, ...]
) -> KeyPair:
    """A serving certificate signed by a run's CA (read back from ``directory``), for a server
    that joins after start-up and that the apiserver must trust, such as an aggregated API."""
    ca_cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"unexpected CA key type in {directory}")
    pair, _ = _issue(
        directory,
        stem,
        _name(common_name),
        ca_key,
        ca_cert.subject,
        server_names=names,
        server_ips=ips,
    )
    return pair


def generate(
    directory: Path, service_ip: str = "10.96.0.1", advertise_ip: str | None = None
) -> Pki:
    """Create the CA, the apiserver's serving cert, one client cert per component, SA keys.

    The serving cert names every way in: 127.0.0.1 (host-side kubeconfigs), the ``kubernetes``
    Service's ClusterIP and names (in-cluster clients), and the advertised address its
    endpoint points at (clients that resolve the Service to its endpoint)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_name = _name("runplane-testbed-ca")
    ca, ca_key = _issue(directory, "ca", ca_name, None, None)
    serving, _ = _issue(
        directory,
        "apiserver",
        _name("kube-apiserver"),
        ca_key,
        ca_name,
        server_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        server_ips=("127.0.0.1", service_ip, *([advertise_ip] if advertise_ip else [])),
    )
    # system:masters bypasses RBAC for the admin; components get their built-in RBAC identities.
    admin, _ = _issue(
        directory, "admin", _name("runplane-admin", "system:masters"), ca_key, ca_name, client=True
    )
    kcm, _ = _issue(
        directory,
        "controller-manager",
        _name("system:kube-controller-manager"),
        ca_key,
        ca_name,
        client=True,
    )
    sched, _ = _issue(
        directory, "scheduler", _name("system:kube-scheduler"), ca_key, ca_name, client=True
    )
    front_proxy, _ = _issue(
        directory, "front-proxy-client", _name(FRONT_PROXY_NAME), ca_key, ca_name, client=True
    )
    sa_key = ec.generate_private_key(ec.SECP256R1())
    sa_priv = directory / "sa.key"
    sa_pub = directory / "sa.pub"
    _write_key(sa_priv, sa_key)
    sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(ca, serving, admin, kcm, sched, sa_priv, sa_pub, front_proxy)
