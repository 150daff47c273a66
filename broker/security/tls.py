"""TLS for listeners and outgoing connections, from Kafka's `ssl.*` settings.

`settings_for(cfg, listener)` resolves a listener's settings (`listener.name.<l>.ssl.X`
over `ssl.X`), `server_context`/`client_context` build Python `ssl.SSLContext`s from them.
Key and trust stores are JKS (Kafka's default `ssl.keystore.type`/`ssl.truststore.type`),
PKCS12 or PEM. JKS and PKCS12 files (`ssl.keystore.location` with `ssl.keystore.password`,
`ssl.key.password` when the key's password differs; `ssl.truststore.location`, with
`ssl.truststore.password` for the integrity check) are read by broker.security.keystores
and handed to Python's ssl as PEM: trusted certificates in memory, the key through a 0600
temporary file that holds it encrypted with a one-time password and is removed at once.
PEM stores are inline (`ssl.keystore.certificate.chain` + `ssl.keystore.key`,
`ssl.truststore.certificates`) or files (`ssl.keystore.location`, a PEM file holding the
key and its chain, with `ssl.key.password` for an encrypted key; `ssl.truststore.location`).
As in Kafka, a PEM store must say `ssl.keystore.type=PEM` (resp. truststore).

Reload without restart (`ServerTls`): before each handshake on a listener, at most once a
second, the keystore and truststore files are stat'ed; when one changed, a new context is
built and the handshake continues on it (the SNI callback, which OpenSSL runs for every
ClientHello, swaps the connection's context). Connections already open keep their session.
A file that fails to load keeps the previous context and is logged.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import structlog

from broker.config import ConfigError, NodeConfig
from broker.security.principal import MappingRuleError, PrincipalMapper

log = structlog.get_logger("skiff.security.tls")

TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_TLS13_SUITES = frozenset({"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                           "TLS_AES_128_GCM_SHA256", "TLS_AES_128_CCM_SHA256",
                           "TLS_AES_128_CCM_8_SHA256"})
RELOAD_CHECK_S = 1.0


@dataclass(frozen=True, slots=True)
class SslSettings:
    """One listener's effective ssl.* settings (names as Kafka's, dots as underscores)."""

    listener: str
    keystore_type: str = "JKS"
    keystore_location: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    truststore_type: str = "JKS"
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    protocol: str = "TLSv1.3"
    cipher_suites: tuple[str, ...] = ()
    endpoint_identification_algorithm: str = "https"
    principal_mapping_rules: str = "DEFAULT"

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_certificate_chain
                    or self.keystore_key)

    @property
    def has_truststore(self) -> bool:
        return bool(self.truststore_location or self.truststore_certificates)

    def key(self, attr: str) -> str:
        """The Kafka key of a field, as the user would have to write it for this listener."""
        return "ssl." + attr.replace("_", ".")

    def watched_files(self) -> tuple[str, ...]:
        return tuple(p for p in (self.keystore_location, self.truststore_location) if p)


def _field_key(attr: str) -> str:
    return "ssl." + attr.replace("_", ".")


def listener_prefix(listener: str) -> str:
    return f"listener.name.{listener.lower()}."


def settings_for(cfg: NodeConfig, listener: str,
                 parse: Callable[[str, str], Any] | None = None) -> SslSettings:
    """`listener.name.<listener>.ssl.X` over `ssl.X` over the default."""
    from broker.config import BROKER_CONFIGS

    prefix = listener_prefix(listener)
    lowered = {k.lower(): v for k, v in cfg.originals.items() if k.lower().startswith(prefix)}
    values: dict[str, Any] = {"listener": listener}
    for f in fields(SslSettings):
        if f.name == "listener":
            continue
        key = _field_key(f.name)
        if prefix + key in lowered:
            value = BROKER_CONFIGS[key].parse(lowered[prefix + key])
        else:
            value = cfg.values.get(key)
        if value is None and f.name in ("keystore_type", "truststore_type", "client_auth",
                                        "protocol", "endpoint_identification_algorithm",
                                        "principal_mapping_rules"):
            value = f.default
        if isinstance(value, list):
            value = tuple(value)
        values[f.name] = value
    return SslSettings(**values)


def _refuse(s: SslSettings, attr: str, value: object, expected: str) -> ConfigError:
    return ConfigError(f"{listener_prefix(s.listener)}{_field_key(attr)} (or {_field_key(attr)})",
                       value, f"{expected} [listener {s.listener}]")


def _versions(s: SslSettings, ctx: ssl.SSLContext) -> None:
    wanted = []
    for p in s.enabled_protocols:
        if p not in _VERSIONS:
            raise _refuse(s, "enabled_protocols", ",".join(s.enabled_protocols),
                          "TLSv1.2 and/or TLSv1.3 (older protocols are not offered)")
        wanted.append(_VERSIONS[p])
    if not wanted:
        raise _refuse(s, "enabled_protocols", "", "at least one of TLSv1.2, TLSv1.3")
    if s.protocol not in ("TLS", "TLSv1.2", "TLSv1.3"):
        raise _refuse(s, "protocol", s.protocol, "TLS, TLSv1.2 or TLSv1.3")
    ctx.minimum_version = min(wanted)
    ctx.maximum_version = max(wanted)
    if s.protocol == "TLSv1.2":
        # Kafka: with ssl.protocol=TLSv1.2 the context offers nothing newer.
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        if ctx.minimum_version > ctx.maximum_version:
            raise _refuse(s, "protocol", s.protocol, "a protocol among ssl.enabled.protocols")


def _ciphers(s: SslSettings, ctx: ssl.SSLContext) -> None:
    if not s.cipher_suites:
        return
    tls12 = [c for c in s.cipher_suites if c not in _TLS13_SUITES]
    tls13 = [c for c in s.cipher_suites if c in _TLS13_SUITES]
    if tls13 and ctx.maximum_version >= ssl.TLSVersion.TLSv1_3:
        available13 = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.3"}
        if set(tls13) != available13:
            raise _refuse(s, "cipher_suites", ",".join(s.cipher_suites),
                          "all or none of the TLSv1.3 suites "
                          f"({','.join(sorted(available13))}): Python's ssl cannot narrow them")
    for name in tls12:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).set_ciphers(name)
        except ssl.SSLError:
            raise _refuse(s, "cipher_suites", name,
                          "OpenSSL cipher names (e.g. ECDHE-RSA-AES128-GCM-SHA256; "
                          "`openssl ciphers -stdname` lists Kafka's IANA names beside them)"
                          ) from None
    if tls12:
        ctx.set_ciphers(":".join(tls12))
    elif ctx.minimum_version < ssl.TLSVersion.TLSv1_3:
        raise _refuse(s, "cipher_suites", ",".join(s.cipher_suites),
                      "some TLSv1.2 suites while TLSv1.2 is enabled")


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalize_pem(text: str) -> str:
    """PEM blocks with their base64 wrapped at 64 columns: Kafka accepts inline PEM with
    the line breaks lost (a one-line properties value); OpenSSL does not."""
    out = []
    for m in _PEM_BLOCK.finditer(text):
        label, body = m.group(1), "".join(m.group(2).split())
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        out.append(f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n")
    return "".join(out)


_STORE_TYPES = ("JKS", "PKCS12")


def _store_type(s: SslSettings, attr: str, value: str) -> str:
    """PEM, JKS or PKCS12 (Java's KeyStore types are case-insensitive)."""
    upper = value.upper()
    if upper not in ("PEM", *_STORE_TYPES):
        raise _refuse(s, attr, value,
                      f"Failed to load SSL keystore of type {value}: {value} not found "
                      "(Skiff reads JKS, PKCS12 and PEM stores)")
    return upper


def _read_store(s: SslSettings, attr: str, path: str, store_type: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise _refuse(s, attr, path, f"Failed to load SSL keystore {path} of type "
                      f"{store_type}: {e.strerror or e}") from None


def _load_pem_key_file(ctx: ssl.SSLContext, pem: str, password: str | None) -> None:
    """Python's ssl reads certificates and keys from files only: a private (0600) file that
    lives for the duration of the call."""
    fd, path = tempfile.mkstemp(prefix="skiff-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _load_binary_keystore(s: SslSettings, ctx: ssl.SSLContext) -> None:
    """A JKS or PKCS12 key store (Kafka's FileBasedStore), handed to ssl as PEM."""
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
        load_der_private_key,
    )
    from cryptography.x509 import load_der_x509_certificate

    from broker.security.keystores import KeyStoreError, load_key_material

    if s.keystore_key is not None:
        raise _refuse(s, "keystore_key", "[hidden]",
                      "SSL private key can be specified only for PEM, but key store type is "
                      f"{s.keystore_type}.")
    if s.keystore_certificate_chain is not None:
        raise _refuse(s, "keystore_certificate_chain", "[hidden]",
                      "SSL certificate chain is specified, but private key is not specified")
    if s.keystore_location is None:
        raise _refuse(s, "keystore_password", "[hidden]",
                      "SSL key store is not specified, but key store password is specified.")
    if s.keystore_password is None:
        raise _refuse(s, "keystore_password", None,
                      "SSL key store is specified, but key store password is not specified.")
    path = s.keystore_location
    data = _read_store(s, "keystore_location", path, s.keystore_type)
    try:
        material = load_key_material(data, path, s.keystore_type, s.keystore_password,
                                     s.key_password)
    except KeyStoreError as e:
        raise _refuse(s, "keystore_location", path, str(e)) from None
    # the key goes to the temporary file encrypted with a one-time password
    once = secrets.token_urlsafe(24)
    key = load_der_private_key(material.key_der, None)
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                            BestAvailableEncryption(once.encode())).decode()
    pem += "".join(load_der_x509_certificate(c).public_bytes(Encoding.PEM).decode()
                   for c in material.chain_der)
    try:
        _load_pem_key_file(ctx, pem, once)
    except (ssl.SSLError, OSError) as e:
        raise _refuse(s, "keystore_location", path,
                      f"a usable private key and certificate chain ({e})") from None


def _load_keystore(s: SslSettings, ctx: ssl.SSLContext) -> None:
    if _store_type(s, "keystore_type", s.keystore_type) != "PEM":
        _load_binary_keystore(s, ctx)
        return
    if s.keystore_password is not None:
        raise _refuse(s, "keystore_password", "[hidden]",
                      "no key store password with PEM key stores (Kafka refuses it too): "
                      "an encrypted key takes ssl.key.password")
    inline = s.keystore_certificate_chain is not None or s.keystore_key is not None
    if inline and s.keystore_location:
        raise _refuse(s, "keystore_location", s.keystore_location,
                      "either a location or ssl.keystore.certificate.chain/key, not both")
    password = s.key_password
    try:
        if inline:
            if not s.keystore_certificate_chain or not s.keystore_key:
                raise _refuse(s, "keystore_key", "[hidden]",
                              "both ssl.keystore.certificate.chain and ssl.keystore.key")
            _load_pem_key_file(ctx, normalize_pem(s.keystore_key) +
                               normalize_pem(s.keystore_certificate_chain), password)
        else:
            assert s.keystore_location is not None
            ctx.load_cert_chain(s.keystore_location, password=password)
    except (ssl.SSLError, OSError) as e:
        what = s.keystore_location or "ssl.keystore.certificate.chain/key"
        raise _refuse(s, "keystore_location" if not inline else "keystore_key",
                      what, f"a readable PEM private key and certificate chain ({e})") from None


def _load_binary_truststore(s: SslSettings, ctx: ssl.SSLContext) -> None:
    from broker.security.keystores import KeyStoreError, load_trusted_certs

    if s.truststore_certificates is not None:
        raise _refuse(s, "truststore_certificates", "[hidden]",
                      "SSL trust store certs can be specified only for PEM, but trust store "
                      f"type is {s.truststore_type}.")
    if s.truststore_location is None:
        raise _refuse(s, "truststore_password", "[hidden]",
                      "SSL trust store is not specified, but trust store password is "
                      "specified.")
    path = s.truststore_location
    data = _read_store(s, "truststore_location", path, s.truststore_type)
    try:
        certs = load_trusted_certs(data, path, s.truststore_type, s.truststore_password)
        ctx.load_verify_locations(cadata=b"".join(certs))
    except KeyStoreError as e:
        raise _refuse(s, "truststore_location", path, str(e)) from None
    except (ssl.SSLError, ValueError) as e:
        raise _refuse(s, "truststore_location", path, f"usable certificates ({e})") from None


def _load_truststore(s: SslSettings, ctx: ssl.SSLContext) -> None:
    if _store_type(s, "truststore_type", s.truststore_type) != "PEM":
        _load_binary_truststore(s, ctx)
        return
    if s.truststore_password is not None:
        raise _refuse(s, "truststore_password", "[hidden]",
                      "no trust store password with PEM trust stores (Kafka refuses it too)")
    if s.truststore_location and s.truststore_certificates:
        raise _refuse(s, "truststore_location", s.truststore_location,
                      "either a location or ssl.truststore.certificates, not both")
    try:
        if s.truststore_certificates:
            ctx.load_verify_locations(cadata=normalize_pem(s.truststore_certificates))
        else:
            ctx.load_verify_locations(cafile=s.truststore_location)
    except (ssl.SSLError, OSError, ValueError) as e:
        raise _refuse(s, "truststore_location",
                      s.truststore_location or "ssl.truststore.certificates",
                      f"readable PEM certificates ({e})") from None


def _mapper(s: SslSettings) -> PrincipalMapper:
    try:
        return PrincipalMapper(s.principal_mapping_rules)
    except MappingRuleError as e:
        raise _refuse(s, "principal_mapping_rules", s.principal_mapping_rules, str(e)) from None


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


def server_context(s: SslSettings) -> ssl.SSLContext:
    """The context a listener serves TLS with (raises ConfigError naming the setting)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(s, ctx)
    _ciphers(s, ctx)
    if not s.has_keystore:
        raise _refuse(s, "keystore_location", None,
                      "a key store: a TLS listener needs ssl.keystore.location or "
                      "ssl.keystore.certificate.chain and ssl.keystore.key")
    _load_keystore(s, ctx)
    mode = _CLIENT_AUTH.get(s.client_auth.lower())
    if mode is None:
        raise _refuse(s, "client_auth", s.client_auth, "none, requested or required")
    if mode != ssl.CERT_NONE:
        if not s.has_truststore:
            raise _refuse(s, "truststore_location", None,
                          f"a trust store to verify client certificates "
                          f"(ssl.client.auth={s.client_auth})")
        _load_truststore(s, ctx)
    ctx.verify_mode = mode
    _mapper(s)
    return ctx


def client_context(s: SslSettings) -> ssl.SSLContext:
    """The context this node connects to a TLS listener with (inter-broker, controller)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(s, ctx)
    _ciphers(s, ctx)
    eia = (s.endpoint_identification_algorithm or "").lower()
    if eia not in ("https", ""):
        raise _refuse(s, "endpoint_identification_algorithm", eia, "https or empty")
    ctx.check_hostname = eia == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    if s.has_truststore:
        _load_truststore(s, ctx)
    else:
        ctx.load_default_certs()  # as Kafka falls back to the JVM's default trust store
    if s.has_keystore:
        _load_keystore(s, ctx)
    return ctx


def _stamp(paths: tuple[str, ...]) -> tuple[tuple[int, int, int], ...]:
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((0, 0, 0))
    return tuple(out)


class ServerTls:
    """A listener's TLS: the context asyncio serves with, reloaded when its files change."""

    def __init__(self, settings: SslSettings,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.mapper = _mapper(settings)
        self._clock = clock
        self._files = settings.watched_files()
        self._stamp = _stamp(self._files)
        self._checked = clock()
        self.current = server_context(settings)
        self.reloads = 0
        # asyncio serves every handshake with this first context; the callback moves each
        # connection to the newest one.
        self.context = self.current
        self.context.sni_callback = self._on_hello

    def _on_hello(self, sock: ssl.SSLObject | ssl.SSLSocket, _name: str | None,
                  _ctx: ssl.SSLContext) -> None:
        self.maybe_reload()
        if sock.context is not self.current:
            sock.context = self.current
        return None

    def maybe_reload(self) -> bool:
        now = self._clock()
        if not self._files or now - self._checked < RELOAD_CHECK_S:
            return False
        self._checked = now
        stamp = _stamp(self._files)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            fresh = server_context(self.settings)
        except ConfigError as e:
            log.error("tls reload failed, keeping the previous certificates",
                      listener=self.settings.listener, error=str(e))
            return False
        fresh.sni_callback = self._on_hello
        self.current = fresh
        self.reloads += 1
        log.info("tls certificates reloaded", listener=self.settings.listener,
                 files=list(self._files))
        return True

    def principal(self, peercert: Mapping[str, Any] | None) -> str:
        subject = (peercert or {}).get("subject")
        return self.mapper.principal(subject)


_ULP_FILE = "/proc/sys/net/ipv4/tcp_available_ulp"
_fetch_path_logged = False


def kernel_tls_ulp(path: str = _ULP_FILE) -> bool:
    """Whether this kernel offers the `tls` upper-layer protocol (kernel TLS)."""
    try:
        with open(path) as f:
            return "tls" in f.read().split()
    except OSError:
        return False


def log_fetch_path_once() -> None:
    """Say once per process how Fetch sends records under TLS. Always by copying through
    asyncio's TLS transport: kernel TLS (which would keep sendfile) needs OpenSSL to own the
    socket (SSL_set_fd), and asyncio's TLS runs OpenSSL over memory BIOs, so even a kernel
    with the `tls` ULP cannot take the session over from this path."""
    global _fetch_path_logged
    if _fetch_path_logged:
        return
    _fetch_path_logged = True
    log.info("fetch under TLS copies through the TLS transport (no sendfile)",
             kernel_tls_ulp=kernel_tls_ulp(),
             kernel_tls_used=False,
             reason="asyncio TLS runs OpenSSL over memory BIOs; kTLS needs a socket BIO")


def listener_protocol(cfg: NodeConfig, listener: str) -> str:
    return cfg.security_protocol_map.get(listener.upper(), "PLAINTEXT")


def server_tls_for(cfg: NodeConfig, listener: str) -> ServerTls | None:
    if listener_protocol(cfg, listener) not in TLS_PROTOCOLS:
        return None
    return ServerTls(settings_for(cfg, listener))


def client_context_for(cfg: NodeConfig, listener: str) -> ssl.SSLContext | None:
    """How this node connects to `listener` on other nodes: None for a plaintext one."""
    if listener_protocol(cfg, listener) not in TLS_PROTOCOLS:
        return None
    return client_context(settings_for(cfg, listener))


def check_tls(cfg: NodeConfig) -> None:
    """Build every TLS context this node will use, so a bad setting stops startup."""
    names = {lst.name for lst in cfg.listeners}
    names.update(cfg.controller_listener_names)
    if cfg.is_broker:
        names.add(cfg.inter_broker_listener_name)
    for name in sorted(names):
        if listener_protocol(cfg, name) in TLS_PROTOCOLS:
            s = settings_for(cfg, name)
            if cfg.listener(name) is not None:
                server_context(s)
            client_context(s)
