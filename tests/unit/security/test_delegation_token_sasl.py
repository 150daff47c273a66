"""SCRAM with a delegation token (tokenauth=true) through the per-connection SASL session
and the node's token credentials: the principal is the token's owner, the session is marked
token-authenticated and ends at the token's expiry (reported as its lifetime), an expired,
unknown or wrong token is refused, and without the extension a token id is just a user."""

from __future__ import annotations

from broker.security.delegation_token import (
    DelegationTokenSettings,
    TokenCredentials,
    TokenInformation,
    hmac_base64,
)
from broker.security.sasl import SaslConfig, SaslSession, State
from broker.security.scram import ScramClient

KEY = "secret"
TOKEN = TokenInformation("tok1", "User:alice", "User:ops", ("User:bob",), 0, 100_000, 50_000)


def _session(now: list[int], reauth_ms: int = 0) -> SaslSession:
    creds = TokenCredentials(DelegationTokenSettings(secret_key=KEY), lambda: {"tok1": TOKEN})

    def tokens(mechanism: str, token_id: str) -> tuple[object, str, int] | None:
        found = creds.lookup(mechanism, token_id)
        return None if found is None else (found.credential, found.owner_name, found.expiry_ms)

    config = SaslConfig(("SCRAM-SHA-256", "SCRAM-SHA-512"), {}, lambda m, u: None, reauth_ms,
                        tokens=tokens)  # type: ignore[arg-type]
    return SaslSession(config, lambda: now[0])


def _login(session: SaslSession, user: str, password: str, token: bool = True,
           mechanism: str = "SCRAM-SHA-512") -> bool:
    assert not session.handshake(mechanism).closes
    client = ScramClient(mechanism, user, password, token=token)
    first = session.authenticate(client.first(), 2)
    if first.closes:
        return False
    final = session.authenticate(client.final(first.auth_bytes), 2)
    if final.closes:
        return False
    client.verify(final.auth_bytes)
    return True


def test_token_login_is_its_owner_until_it_expires() -> None:
    now = [10_000]
    s = _session(now)
    assert _login(s, "tok1", hmac_base64("tok1", KEY))
    assert s.principal == "User:alice" and s.token_authenticated
    assert s.expires_ms == 50_000
    assert s.admits(3) is None
    now[0] = 50_000
    assert s.admits(3) is not None and s.state is State.FAILED


def test_session_lifetime_is_the_sooner_of_reauth_and_expiry() -> None:
    s = _session([10_000], reauth_ms=5_000)
    assert _login(s, "tok1", hmac_base64("tok1", KEY), mechanism="SCRAM-SHA-256")
    assert s.expires_ms == 15_000


def test_refusals() -> None:
    good = hmac_base64("tok1", KEY)
    assert not _login(_session([60_000]), "tok1", good)  # expired at 50_000
    assert not _login(_session([0]), "tok1", hmac_base64("tok1", "other-key"))
    assert not _login(_session([0]), "nope", good)
    # without tokenauth the token id is looked up as a SCRAM user (none here)
    s = _session([0])
    assert not _login(s, "tok1", good, token=False)
    assert not s.token_authenticated
