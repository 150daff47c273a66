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


def _keytool(*args: str, cwd: Path) -> None:
    # a short-lived JVM: C1 only and the serial collector halve keytool's start-up CPU
    subprocess.run(["keytool", "-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", *args],
                   cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class JavaStores:
    """keytool-made stores of one PKI: `<name>.jks` / `<name>.p12` key stores (alias
    `<name>`), `truststore.jks` / `truststore.p12` trusting the CA."""

    dir: Path
    store_password: str = "store-secret"
    key_password: str = "key-secret"  # the JKS key entries' (PKCS12 keys use the store's)
    trust_password: str = "trust-secret"

    def keystore(self, name: str, store_type: str) -> str:
        return str(self.dir / f"{name}.{'jks' if store_type == 'JKS' else 'p12'}")

    def truststore(self, store_type: str) -> str:
        return str(self.dir / f"truststore.{'jks' if store_type == 'JKS' else 'p12'}")


def make_java_stores(pki: Pki, names: tuple[str, ...] = ("server", "alice")) -> JavaStores:
    """JKS and PKCS12 key stores for `names` and trust stores for the CA, as an operator
    makes them with keytool (Java 17): openssl bundles each PEM key and certificate once,
    keytool imports that into a fresh JKS store (key password distinct from the store's)
    and a fresh PKCS12 store (keytool's own encryption and MAC)."""
    stores = JavaStores(pki.dir / "java-stores")
    d = stores.dir
    d.mkdir(exist_ok=True)
    sp, kp = stores.store_password, stores.key_password
    for name in names:
        bundle = d / f"{name}-openssl.p12"
        _run("pkcs12", "-export", "-in", pki.path(f"{name}.pem"), "-inkey",
             pki.path(f"{name}.key"), "-certfile", pki.ca, "-name", name,
             "-passout", "pass:bundle", "-out", str(bundle), cwd=pki.dir)
        common = ["-importkeystore", "-noprompt", "-srckeystore", str(bundle),
                  "-srcstoretype", "PKCS12", "-srcstorepass", "bundle", "-srcalias", name,
                  "-deststorepass", sp]
        _keytool(*common, "-destkeystore", stores.keystore(name, "JKS"),
                 "-deststoretype", "JKS", "-destkeypass", kp, cwd=d)
        _keytool(*common, "-destkeystore", stores.keystore(name, "PKCS12"),
                 "-deststoretype", "PKCS12", cwd=d)
        bundle.unlink()
    for store_type in ("JKS", "PKCS12"):
        _keytool("-importcert", "-noprompt", "-alias", "ca", "-file", pki.ca, "-keystore",
                 stores.truststore(store_type), "-storetype", store_type,
                 "-storepass", stores.trust_password, cwd=d)
    return stores
