"""The self-signed certificate `relay serve` creates when none is configured."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from relay.private_files import private_dir, write_private


@dataclass(frozen=True)
class CertificatePaths:
    cert: Path
    key: Path

    def fingerprint(self) -> str:
        cert = x509.load_pem_x509_certificate(self.cert.read_bytes())
        return cert.fingerprint(hashes.SHA256()).hex(":").upper()


def ensure_self_signed(
    directory: Path, *, hosts: tuple[str, ...] = ("localhost",)
) -> CertificatePaths:
    paths = CertificatePaths(directory / "cert.pem", directory / "key.pem")
    if paths.cert.exists() and paths.key.exists():
        return paths
    private_dir(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Relay development server")])
    now = datetime.now(UTC)
    alt_names: list[x509.GeneralName] = [x509.DNSName(h) for h in hosts]
    alt_names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1")]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=825))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        # A server's certificate, not an authority's: strict TLS stacks (rustls, under
        # Deno and others) refuse a CA certificate presented as the server's own, while
        # every client still trusts this one when given it as its CA file.
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    write_private(
        paths.key,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    # Written whole under another name, then renamed: the certificate's presence
    # is what others wait for, and they must never read half of it.
    partial = paths.cert.with_name(paths.cert.name + ".partial")
    write_private(partial, cert.public_bytes(serialization.Encoding.PEM))
    os.replace(partial, paths.cert)
    return paths
