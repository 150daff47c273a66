"""JKS and PKCS12 key and trust stores, read into what Python's ssl can load (PEM).

Kafka reads `ssl.keystore.type` / `ssl.truststore.type` JKS (its default) and PKCS12 stores
with Java's KeyStore. Java 17 runs with `keystore.type.compat=true`: a store of type JKS may
hold a PKCS12 file and the other way round, Java looks at the file's first bytes. So do we:
JKS (magic FEEDFEED) and JCEKS (CECECECE) files are read with pyjks, anything else as PKCS12
with `cryptography`.

A key store gives one private key and its certificate chain; a trust store gives its
trusted certificates (and, as Java's trust manager does, the first certificate of each key
entry). The key password is `ssl.key.password`, or the store password when unset (Kafka's
FileBasedStore.keyPassword()).

Errors carry Kafka's wording: "Failed to load SSL keystore <path> of type <type>" with
Java's reason ("keystore password was incorrect"), "Cannot recover key" for a wrong key
password.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_JKS_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")


class KeyStoreError(Exception):
    """A store that cannot be used; the message is Kafka's (with Java's reason appended)."""


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    key_der: bytes          # PKCS#8 DER, unencrypted (kept in memory only)
    chain_der: tuple[bytes, ...]  # leaf first


def is_jks(data: bytes) -> bool:
    return data[:4] in _JKS_MAGIC


def _load_failed(path: str, store_type: str, reason: str) -> KeyStoreError:
    return KeyStoreError(f"Failed to load SSL keystore {path} of type {store_type}: {reason}")


def _jks(data: bytes, path: str, store_type: str, password: str | None) -> Any:
    try:
        import jks  # pyjks
        from jks.util import BadKeystoreFormatException, KeystoreSignatureException
    except ImportError:
        raise _load_failed(path, store_type, "JKS stores need the pyjks package, which this "
                           "installation lacks (pip install 'skiff[jks]'; it builds a C "
                           "extension); PKCS12 and PEM stores need nothing more") from None

    try:
        # without a password Java (and pyjks) read the store and skip its integrity check
        return jks.KeyStore.loads(data, password, try_decrypt_keys=False)
    except KeystoreSignatureException:
        raise _load_failed(path, store_type, "keystore password was incorrect") from None
    except (BadKeystoreFormatException, ValueError, IndexError, KeyError) as e:
        raise _load_failed(path, store_type, f"Invalid keystore format ({e})") from None


def _pkcs12(data: bytes, path: str, store_type: str, password: str | None) -> Any:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except ValueError:
        reason = ("keystore password was incorrect" if password is not None else
                  "the store needs its password (ssl.keystore.password / "
                  "ssl.truststore.password) to be read")
        raise _load_failed(path, store_type, reason) from None


def _der(cert: Any) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    der: bytes = cert.public_bytes(Encoding.DER)
    return der


def load_key_material(data: bytes, path: str, store_type: str, password: str,
                      key_password: str | None) -> KeyMaterial:
    """The private key and chain of a JKS or PKCS12 key store (raises KeyStoreError)."""
    kp = key_password if key_password is not None else password
    if is_jks(data):
        store = _jks(data, path, store_type, password)
        keys = store.private_keys
        if len(keys) != 1:
            raise KeyStoreError(
                f"Key store {path} holds {len(keys)} private keys"
                f"{' (' + ', '.join(sorted(keys)) + ')' if keys else ''}: "
                "Skiff serves exactly one (keep one entry, or one store per listener)")
        (entry,) = keys.values()
        try:
            entry.decrypt(kp)
        except Exception:  # pyjks: DecryptionFailureException, or a padding error
            raise KeyStoreError(f"Failed to create SSLContext from key store {path}: "
                                "java.security.UnrecoverableKeyException: Cannot recover "
                                "key (check ssl.key.password)") from None
        return KeyMaterial(entry.pkey_pkcs8, tuple(c[1] for c in entry.cert_chain))
    p12 = _pkcs12(data, path, store_type, password)
    if p12.key is None or p12.cert is None:
        raise KeyStoreError(f"Key store {path} holds no private key with its certificate")
    if kp != password:
        # one password protects a PKCS12 file's MAC and its key here (keytool writes them
        # so: "Different store and key passwords not supported for PKCS12 KeyStores")
        raise KeyStoreError(f"Failed to create SSLContext from key store {path}: "
                            "java.security.UnrecoverableKeyException: Get Key failed: "
                            "ssl.key.password differs from the PKCS12 store's password")
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
    )

    key_der = p12.key.private_bytes(Encoding.DER, PrivateFormat.PKCS8, NoEncryption())
    chain = (_der(p12.cert.certificate), *(_der(c.certificate) for c in p12.additional_certs))
    return KeyMaterial(key_der, chain)


def load_trusted_certs(data: bytes, path: str, store_type: str,
                       password: str | None) -> tuple[bytes, ...]:
    """DER certificates a JKS or PKCS12 trust store trusts (raises KeyStoreError)."""
    if is_jks(data):
        store = _jks(data, path, store_type, password)
        out = [c.cert for c in store.certs.values()]
        out += [pk.cert_chain[0][1] for pk in store.private_keys.values()
                if pk.cert_chain]
    else:
        p12 = _pkcs12(data, path, store_type, password)
        out = [_der(c.certificate) for c in p12.additional_certs]
        if p12.cert is not None:
            out.append(_der(p12.cert.certificate))
    if not out:
        raise KeyStoreError(f"Trust store {path} holds no certificates")
    return tuple(out)
