"""A throwaway PKI for TLS tests, made with the `openssl` command line.

`make_pki(dir)` writes a CA, a server certificate for 127.0.0.1/localhost (the brokers'),
client certificates signed by the CA, one already expired, and a second CA that nobody
trusts with a client certificate of its own. Keys are unencrypted PEM except
`server-enc.key` (password `serverpass`).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SERVER_SUBJECT = "/CN=localhost/OU=brokers/O=Skiff"


def have_openssl() -> bool:
    return shutil.which("openssl") is not None


def _run(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class Pki:
    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)

    @property
    def ca(self) -> str:
        return self.path("ca.pem")

    def keystore(self, name: str) -> str:
        """`<name>.key` and `<name>.pem` in one file: a PEM key store for ssl.keystore.location."""
        return self.path(f"{name}-keystore.pem")


def _ca(d: Path, name: str, subject: str) -> None:
    _run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
         "-out", f"{name}.pem", "-days", "30", "-subj", subject, cwd=d)


def _leaf(d: Path, name: str, subject: str, ca: str = "ca", san: str | None = None,
          days: str = "30") -> None:
    _run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
         f"{name}.csr", "-subj", subject, cwd=d)
    ext = d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
         "-CAcreateserial", "-out", f"{name}.pem", "-days", days, "-extfile", ext.name, cwd=d)
    (d / f"{name}-keystore.pem").write_text(
        (d / f"{name}.key").read_text() + (d / f"{name}.pem").read_text())


def _expired(d: Path, name: str, subject: str) -> None:
    """Signed by the CA, valid for one day in 2020 (`openssl ca` takes explicit dates)."""
    _run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
         f"{name}.csr", "-subj", subject, cwd=d)
    (d / "index.txt").write_text("")
    (d / "serial").write_text("1000\n")
    (d / "ca.cnf").write_text(
        "[ca]\ndefault_ca=CA_default\n[CA_default]\ndir=.\ndatabase=index.txt\n"
        "serial=serial\nnew_certs_dir=.\ndefault_md=sha256\npolicy=p\n"
        "[p]\ncommonName=supplied\norganizationalUnitName=optional\n"
        "organizationName=optional\n")
    _run("ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key",
         "-in", f"{name}.csr", "-out", f"{name}.pem", "-startdate", "20200101000000Z",
         "-enddate", "20200102000000Z", "-notext", cwd=d)
    (d / f"{name}-keystore.pem").write_text(
        (d / f"{name}.key").read_text() + (d / f"{name}.pem").read_text())


def make_pki(d: Path) -> Pki:
    d.mkdir(parents=True, exist_ok=True)
    _ca(d, "ca", "/CN=Skiff Test CA/O=Skiff")
    _leaf(d, "server", SERVER_SUBJECT, san="IP:127.0.0.1,DNS:localhost")
    _leaf(d, "alice", "/CN=alice/OU=eng/O=Skiff")
    _leaf(d, "bob", "/CN=bob/OU=ops/O=Skiff")
    _expired(d, "expired", "/CN=expired/O=Skiff")
    _ca(d, "rogue-ca", "/CN=Rogue CA")
    _leaf(d, "mallory", "/CN=mallory", ca="rogue-ca")
    _run("pkey", "-in", "server.key", "-aes256", "-passout", "pass:serverpass",
         "-out", "server-enc.key", cwd=d)
    (d / "server-enc-keystore.pem").write_text(
        (d / "server-enc.key").read_text() + (d / "server.pem").read_text())
    return Pki(d)


def add_server_certificate(pki: Pki, name: str, san: str) -> str:
    """One more server certificate signed by `pki`'s CA, for the names in `san` (e.g.
    "IP:10.213.0.11"); returns the path of its PEM (the key is `<name>.key` beside it)."""
    _leaf(pki.dir, name, SERVER_SUBJECT, san=san)
    return pki.path(f"{name}.pem")
