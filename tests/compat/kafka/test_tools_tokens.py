"""Delegation tokens end to end: Kafka 4.4's kafka-delegation-tokens tool (its
DelegationTokenCommand) creates, describes, renews and expires a token, and Kafka's Java
client logs in with it (SCRAM-SHA-256, tokenauth=true) and produces and consumes, against a
Skiff node and against Kafka 4.4, each with a SASL_PLAINTEXT SCRAM listener and
`delegation.token.secret.key`; the outputs must agree, token ids, HMACs and dates aside.

Both nodes keep their PLAINTEXT listener for the setup (SCRAM users alice, bob and carol,
made with Admin.alterUserScramCredentials) and for the tool's refusal there
(DELEGATION_TOKEN_REQUEST_NOT_ALLOWED). Steps: create (alice, bob as renewer), describe
(by owner, as alice and as carol), renew (bob may, carol may not: OWNER_MISMATCH),
the Skiff node killed and restarted (the token comes back from its metadata log), the Java
client with the token (token requests refused over it, produce 3, consume 3), expire at once,
the Java client refused at login.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.kafka_ref import KafkaNode, run_program, started_kafka, tool
from tests.support.kafka_tools import Output
from tests.support.node import SkiffNode, free_port, ready

pytestmark = [pytest.mark.timeout(600)]

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
SECRET = "token-secret-key"
SECURED = {
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "listener.name.sasl.scram-sha-256.sasl.jaas.config": f"{SCRAM} required;",
    "delegation.token.secret.key": SECRET,
}
B = "--bootstrap-server"
TOKENS = "kafka-delegation-tokens"


@dataclass
class Broker:
    name: str
    plain: str  # PLAINTEXT listener
    sasl: str   # SASL_PLAINTEXT listener, SCRAM-SHA-256
    node: SkiffNode | None = None  # Skiff's, to restart


def _env(props: dict[str, str]) -> dict[str, str]:
    return {"SKIFF_" + k.upper().replace("-", "___").replace(".", "_"): v
            for k, v in props.items()}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Broker, Broker]]:
    kport = free_port()
    kafka: KafkaNode = started_kafka(tmp_path_factory.mktemp("tokens-kafka"),
                                     listeners={"SASL": ("SASL_PLAINTEXT", kport)},
                                     overrides=SECURED)
    try:
        node = SkiffNode(tmp_path_factory.mktemp("tokens-skiff"))
        sport = free_port()
        node.config_env = _env({
            **SECURED,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                         f"CONTROLLER://127.0.0.1:{node.controller_port},"
                         f"SASL://127.0.0.1:{sport}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
                                    f"SASL://127.0.0.1:{sport}",
            "listener.security.protocol.map":
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL:SASL_PLAINTEXT",
        })
        skiff = ready(node)
        try:
            yield (Broker("kafka", kafka.bootstrap, f"127.0.0.1:{kport}"),
                   Broker("skiff", skiff.bootstrap, f"127.0.0.1:{sport}", skiff))
        finally:
            skiff.close()
    finally:
        kafka.close()


def both(brokers: tuple[Broker, Broker], step: Callable[[Broker], Output]) -> tuple[Output, Output]:
    with ThreadPoolExecutor(2) as pool:
        k, s = pool.map(step, brokers)
    return k, s


def _raw(script: str, *args: str) -> Output:
    proc = tool(script, *args, timeout=120)
    return Output(proc.returncode, proc.stdout, proc.stderr)


_HMAC = re.compile(r"[A-Za-z0-9+/]{86}==")
_DATE = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d\b")
_FRAME = re.compile(r"^\s+at [\w$.<>/]+\(.*\)\s*$|^\s+\.\.\. \d+ more\s*$")


def normal(out: Output, broker: Broker, token_id: str = "") -> Output:
    def text(s: str) -> str:
        for addr, name in ((broker.sasl, "<sasl>"), (broker.plain, "<plain>")):
            s = s.replace(addr, name)
        if token_id:
            s = s.replace(token_id, "<token>")
        s = _HMAC.sub("<hmac>", s)
        s = _DATE.sub("<date>", s)
        lines = [re.sub(r"[ \t]+", " ", line).strip() for line in s.splitlines()
                 if not _FRAME.match(line)]
        return "\n".join(lines).strip()
    return Output(out.returncode, text(out.stdout), text(out.stderr))


def assert_same(step: str, k: Output, s: Output) -> None:
    assert s == k, (f"step {step!r}: Skiff's output differs from Kafka 4.4's\n"
                    f"=== Kafka 4.4 ===\n{k.text()}\n=== Skiff ===\n{s.text()}")


def _client_config(dir_: Path, user: str) -> str:
    path = dir_ / f"{user}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    f'sasl.jaas.config={SCRAM} required username="{user}" '
                    f'password="{user}-secret";\n')
    return str(path)


def test_tokens_with_the_tool_and_the_java_client(
        brokers: tuple[Broker, Broker], tmp_path: Path) -> None:
    # SCRAM users alice, bob and carol, over PLAINTEXT (Admin.alterUserScramCredentials)
    k, s = both(brokers, lambda b: Output(0, run_program(
        "skiff.compat.tokens.TokenClient", "users", b.plain, "alice", "bob", "carol",
        timeout=120).stdout.strip(), ""))
    assert_same("users", k, s)
    assert k.stdout == "users alice,bob,carol", k.text()
    alice, bob, carol = (_client_config(tmp_path, u) for u in ("alice", "bob", "carol"))
    plain_config = tmp_path / "plain.properties"
    plain_config.write_text("security.protocol=PLAINTEXT\n")

    # PLAINTEXT: token requests are not allowed
    k, s = both(brokers, lambda b: normal(_raw(TOKENS, B, b.plain, "--command-config",
                                               str(plain_config), "--create",
                                               "--max-life-time-period", "-1"), b))
    assert_same("create.plaintext", k, s)
    assert k.returncode != 0 and "not allowed" in (k.stderr + k.stdout).lower(), k.text()

    # create, as alice with bob as renewer
    raw: dict[str, Output] = {}

    def create(b: Broker) -> Output:
        out = _raw(TOKENS, B, b.sasl, "--command-config", alice, "--create",
                   "--max-life-time-period", "-1", "--renewer-principal", "User:bob")
        raw[b.name] = out
        m = re.search(r"tokenId : (\S+)", out.stdout)
        return normal(out, b, m.group(1) if m else "")

    k, s = both(brokers, create)
    assert_same("create", k, s)
    assert k.returncode == 0 and "<token> <hmac> User:alice User:alice [User:bob]" in k.stdout, \
        k.text()
    tokens: dict[str, tuple[str, str]] = {}
    for b in brokers:
        out = raw[b.name].stdout
        token_id = re.search(r"tokenId : (\S+)", out)
        hmac = _HMAC.search(out)
        assert token_id and hmac, out
        tokens[b.name] = (token_id.group(1), hmac.group(0))
    assert len(tokens["skiff"][0]) == 22  # a Kafka Uuid, as Kafka's token ids are

    def on_token(args: Callable[[Broker, str, str], list[str]], step: str,
                 script: str = TOKENS) -> tuple[Output, Output]:
        def one(b: Broker) -> Output:
            token_id, hmac = tokens[b.name]
            return normal(_raw(script, *args(b, token_id, hmac)), b, token_id)
        k, s = both(brokers, one)
        assert_same(step, k, s)
        return k, s

    # A broker learns of a new token from the metadata log, after CreateDelegationToken has
    # answered: Kafka 4.4 describes no token for a moment (a forked tool's JVM start used to
    # hide that). Wait until each broker lists it before the steps that compare.
    def until_listed(b: Broker) -> Output:
        deadline = time.monotonic() + 30
        while True:
            out = _raw(TOKENS, B, b.sasl, "--command-config", alice, "--describe",
                       "--owner-principal", "User:alice")
            if "Total number of tokens : 1" in out.stdout or time.monotonic() > deadline:
                return out
            time.sleep(0.2)

    both(brokers, until_listed)

    # describe alice's tokens, as alice and as carol: with no authorizer every DESCRIBE check
    # passes, so carol (neither owner, requester nor renewer) sees it too, on both. Without
    # --owner-principal the tool sends an empty owner list: no tokens at all, on both.
    for who, config, count in (("alice", alice, 1), ("carol", carol, 1)):
        k, _ = on_token(lambda b, t, h, c=config: [  # type: ignore[misc]
            B, b.sasl, "--command-config", c, "--describe", "--owner-principal", "User:alice"],
            f"describe.{who}")
        assert k.returncode == 0 and f"Total number of tokens : {count}" in k.stdout, k.text()

    # renew: the renewer may, someone else may not
    k, _ = on_token(lambda b, t, h: [B, b.sasl, "--command-config", bob, "--renew",
                                     "--renew-time-period", "3600000", "--hmac", h], "renew.bob")
    assert k.returncode == 0 and "Completed renew operation" in k.stdout, k.text()
    k, _ = on_token(lambda b, t, h: [B, b.sasl, "--command-config", carol, "--renew",
                                     "--renew-time-period", "-1", "--hmac", h], "renew.carol")
    assert k.returncode != 0 and "DelegationTokenOwnerMismatchException" in k.stderr, k.text()

    # the tokens are in the metadata log: Skiff's node, killed (SIGKILL) and started again,
    # describes the renewed token as Kafka's does and the client still logs in with it
    node = brokers[1].node
    assert node is not None
    node.kill()
    node.start()
    node.wait_ready()
    both(brokers, until_listed)
    k, _ = on_token(lambda b, t, h: [B, b.sasl, "--command-config", alice, "--describe",
                                     "--owner-principal", "User:alice"], "describe.restarted")
    assert k.returncode == 0 and "Total number of tokens : 1" in k.stdout, k.text()

    # the Java client logs in with the token, is refused token requests, produces, consumes
    def java(mode: str) -> Callable[[Broker], Output]:
        def one(b: Broker) -> Output:
            token_id, hmac = tokens[b.name]
            proc = run_program("skiff.compat.tokens.TokenClient", b.sasl, token_id, hmac,
                               "token-topic", mode, timeout=180)
            return Output(proc.returncode, proc.stdout.strip(), "")
        return one

    k, s = both(brokers, java("use"))
    assert_same("java.use", k, s)
    assert k.returncode == 0 and "consumed [k0=v0, k1=v1, k2=v2]" in k.stdout, k.text()

    # expire at once; the token no longer logs in
    k, _ = on_token(lambda b, t, h: [B, b.sasl, "--command-config", alice, "--expire",
                                     "--expiry-time-period", "-1", "--hmac", h], "expire")
    assert k.returncode == 0, k.text()
    k, s = both(brokers, java("refused"))
    assert_same("java.refused", k, s)
    assert "SaslAuthenticationException" in k.stdout, k.text()

