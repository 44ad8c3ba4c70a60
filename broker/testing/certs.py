"""Test certificates made at test time with the cryptography package: a CA, and certificates it
signs for brokers (subject alternative names localhost and 127.0.0.1) and clients, written as PEM
(key and chain in one file, Kafka's PEM key store), PKCS12 and a PEM CA file. Nothing is committed.

    ca = CertificateAuthority(tmp_path / "tls")
    broker = ca.issue("broker")                 # Issued: .pem, .key_pem, .chain_pem, .p12
    client = ca.issue("client", client=True)
    ca.pem                                      # the CA certificate file
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "test-password"
"""The password of every PKCS12 store made here."""


@dataclass(frozen=True)
class Issued:
    name: str
    pem: Path
    """private key (unencrypted PKCS#8) followed by the certificate chain"""
    key_pem: Path
    chain_pem: Path
    p12: Path
    """the key and chain, PKCS12, protected by PASSWORD"""
    dn: str
    """the subject name as Kafka renders it (CN=..., O=...)"""


class CertificateAuthority:
    def __init__(self, directory: Path, name: str = "samsa-test-ca") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256()))
        self.pem = directory / "ca.pem"
        self.pem.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))
        self.p12 = directory / "ca.p12"
        from cryptography.hazmat.primitives.serialization import pkcs12

        self.p12.write_bytes(pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self.certificate, name.encode())],
            serialization.BestAvailableEncryption(PASSWORD.encode())))

    def issue(self, name: str, *, client: bool = False, organization: str = "samsa",
              hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Issued:
        """A certificate for `name` (CN=name,O=organization) signed by this CA."""
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import pkcs12
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                             x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(self.certificate.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.CLIENT_AUTH] if client
                else [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        chain_pem = cert.public_bytes(serialization.Encoding.PEM) + \
            self.certificate.public_bytes(serialization.Encoding.PEM)
        paths = Issued(name, self.directory / f"{name}.pem", self.directory / f"{name}.key.pem",
                       self.directory / f"{name}.chain.pem", self.directory / f"{name}.p12",
                       subject.rfc4514_string())
        paths.pem.write_bytes(key_pem + chain_pem)
        paths.key_pem.write_bytes(key_pem)
        paths.chain_pem.write_bytes(chain_pem)
        paths.p12.write_bytes(pkcs12.serialize_key_and_certificates(
            name.encode(), key, cert, [self.certificate],
            serialization.BestAvailableEncryption(PASSWORD.encode())))
        return paths
