"""The certificate `relay serve` makes for itself is a server's, so strict TLS stacks
(rustls under Deno, for one) accept it once trusted, as OpenSSL's clients do."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from relay.tls import ensure_self_signed


def test_the_made_certificate_is_no_authority_and_serves_tls_servers(tmp_path: Path) -> None:
    paths = ensure_self_signed(tmp_path / "tls")
    cert = x509.load_pem_x509_certificate(paths.cert.read_bytes())
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature
    assert not usage.key_cert_sign
    purposes = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(purposes) == [ExtendedKeyUsageOID.SERVER_AUTH]
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert cert.issuer == cert.subject
