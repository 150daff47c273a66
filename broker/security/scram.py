"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses it, on hashlib/hmac.

`credential(mechanism, password)` derives what a server stores (salt, StoredKey,
ServerKey, iterations: Kafka's UserScramCredentialRecord), `ScramServer` checks a client
in two steps (client-first -> server-first, client-final -> server-final), `ScramClient`
is the other side (inter-broker SASL, tests). Channel binding is not offered (gs2 header
`n,,`), as in Kafka. The `tokenauth=true` extension (delegation tokens, KIP-48) makes the
user name a token id, checked against the token's credential (`token_lookup`): the
authenticated user is then the token's owner (broker/security/delegation_token.py); other
extensions are ignored, as Kafka's ScramSaslServer does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's limits on iterations (ScramMechanism.minIterations / maxIterations).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramError(Exception):
    """The exchange fails; `str(e)` is for the log, clients get Kafka's generic message."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


# A delegation token's (credential, owner name, expiry timestamp ms).
TokenLookup = tuple[ScramCredential, str, int]


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ScramError(f"unknown SCRAM mechanism {mechanism!r}") from None


def _hmac(name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, name).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    name = _hash(mechanism)
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(mechanism, salt, hashlib.new(name, client_key).digest(),
                           _hmac(name, salted, b"Server Key"), iterations)


def credential(mechanism: str, password: str, salt: bytes | None = None,
               iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(f"iterations {iterations} outside {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(
        mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def _attrs(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"malformed SCRAM attribute {part[:20]!r}")
        out.setdefault(part[0], part[2:])
    return out


def _client_first_bare(bare: str) -> tuple[dict[str, str], dict[str, str]]:
    """(attributes, extensions) of client-first-message-bare: one-letter attributes
    (`n=`, `r=`, `m=`) and `name=value` extensions (RFC 5802's, Kafka's ScramExtensions)."""
    attrs: dict[str, str] = {}
    extensions: dict[str, str] = {}
    for part in bare.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ScramError(f"malformed SCRAM attribute {part[:20]!r}")
        (attrs if len(key) == 1 else extensions).setdefault(key, value)
    return attrs, extensions


def decode_saslname(name: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(name):
        if name[i] == "=":
            code = name[i + 1:i + 3]
            if code not in ("2C", "3D"):
                raise ScramError("malformed saslname")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _nonce() -> str:
    # Letters and digits, as Kafka's ScramFormatter makes them.
    return secrets.token_hex(16)


class ScramServer:
    """One exchange. `step(client_message)` returns the server's answer; the first call
    takes client-first, the second client-final (then `complete` and `username` are set).
    Any ScramError ends the exchange as failed."""

    def __init__(self, mechanism: str,
                 lookup: Callable[[str], ScramCredential | None],
                 nonce: Callable[[], str] = _nonce,
                 token_lookup: Callable[[str], TokenLookup | None] | None = None) -> None:
        """`token_lookup(token_id)`: the (credential, owner name, expiry ms) of a live
        delegation token; None when tokens are disabled (tokenauth is then refused)."""
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self._lookup = lookup
        self._token_lookup = token_lookup
        self.token_authenticated = False
        self.token_expiry_ms: int | None = None
        self._nonce = nonce
        self._step = 0
        self._cred: ScramCredential | None = None
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._full_nonce = ""
        self.username: str | None = None
        self.complete = False

    def step(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        if self._step == 0:
            self._step = 1
            return self._client_first(text).encode()
        if self._step == 1:
            self._step = 2
            return self._client_final(text).encode()
        raise ScramError("SCRAM exchange already finished")

    def _client_first(self, text: str) -> str:
        parts = text.split(",", 2)
        if len(parts) != 3:
            raise ScramError("malformed client-first message")
        cb, authzid, bare = parts
        if cb not in ("n", "y"):
            raise ScramError("channel binding is not supported")
        attrs, extensions = _client_first_bare(bare)
        if "m" in attrs:
            raise ScramError("mandatory extension not supported")
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("client-first message without user name or nonce")
        user = decode_saslname(attrs["n"])
        if authzid and authzid != f"a={encode_saslname(user)}":
            raise ScramError("authorization id differs from the user name")
        if extensions.get("tokenauth", "").lower() == "true":  # Boolean.parseBoolean
            if self._token_lookup is None:
                raise ScramError("delegation token authentication is not enabled "
                                 "(delegation.token.secret.key is not set)")
            token = self._token_lookup(user)
            if token is None:
                raise ScramError(f"Token Authentication failed: Invalid tokenId : {user}")
            cred, owner, self.token_expiry_ms = token
            self.token_authenticated = True
            self.username = owner
        else:
            found = self._lookup(user)
            if found is None:
                raise ScramError(f"unknown user {user!r}")
            cred = found
            self.username = user
        self._cred = cred
        self._gs2 = f"{cb},{authzid},"
        self._client_first_bare = bare
        self._full_nonce = attrs["r"] + self._nonce()
        self._server_first = (f"r={self._full_nonce},"
                              f"s={base64.b64encode(cred.salt).decode()},i={cred.iterations}")
        return self._server_first

    def _client_final(self, text: str) -> str:
        assert self._cred is not None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final message without proof")
        attrs = _attrs(without_proof)
        if attrs.get("c") != base64.b64encode(self._gs2.encode()).decode():
            raise ScramError("channel binding data differs from the gs2 header")
        # Kafka's ScramSaslServer only checks that the client's nonce ends with the one it
        # sent: librdkafka 2.0.x (kcat) sends its own nonce once more in front of it.
        if not attrs.get("r", "").endswith(self._full_nonce):
            raise ScramError("nonce mismatch")
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise ScramError("malformed proof") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}"
        signature = _hmac(self._hash, self._cred.stored_key, auth_message.encode())
        if len(proof) != len(signature):
            raise ScramError("proof of the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(),
                                   self._cred.stored_key):
            raise ScramError("invalid proof (wrong password)")
        server_sig = _hmac(self._hash, self._cred.server_key, auth_message.encode())
        self.complete = True
        return "v=" + base64.b64encode(server_sig).decode()


class ScramClient:
    """The client side: `first()`, then `final(server_first)`, then `verify(server_final)`."""

    def __init__(self, mechanism: str, username: str, password: str,
                 nonce: Callable[[], str] = _nonce, token: bool = False) -> None:
        """`token`: authenticate with a delegation token (user name = token id, password =
        its HMAC in base64), sending the tokenauth=true extension."""
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self.username = username
        self.password = password
        self._nonce = nonce()
        self._bare = f"n={encode_saslname(username)},r={self._nonce}" + (
            ",tokenauth=true" if token else "")
        self._server_sig = b""

    def first(self) -> bytes:
        return ("n,," + self._bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attrs(text)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise ScramError("malformed server-first message")
        if not MIN_ITERATIONS <= int(iterations) <= MAX_ITERATIONS:
            raise ScramError(f"server asks for {iterations} iterations")
        salted = salted_password(self.mechanism, self.password, base64.b64decode(salt),
                                 int(iterations))
        cred = credential_from_salted(self.mechanism, salted, b"", int(iterations))
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = _hmac(self._hash, salted, b"Client Key")
        signature = _hmac(self._hash, cred.stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_sig = _hmac(self._hash, cred.server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attrs(server_final.decode())
        if "e" in attrs:
            raise ScramError(f"server refused: {attrs['e']}")
        if base64.b64decode(attrs.get("v", "")) != self._server_sig:
            raise ScramError("server signature mismatch")


def verify_password(cred: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `cred` was made from (its stored key matches), in
    constant time: for callers that receive the password itself over TLS (the admin plane)
    rather than running the SCRAM exchange."""
    mine = credential(cred.mechanism, password, cred.salt, cred.iterations)
    return hmac.compare_digest(mine.stored_key, cred.stored_key)
