"""The table of every Kafka API in docs/compatibility.md, generated from the code so it cannot
drift: Kafka 4.x's range (kio's schemas), what Skiff's client listener advertises (the
ApiVersions table: BROKER_APIS restricted to the handlers, at the default and the `kafka4`
floors), what its controller listener serves, and the tests that send each API.

    python -m tests.support.api_table            # print the table
    python -m tests.support.api_table --write    # rewrite it in docs/compatibility.md

tests/unit/test_compatibility_doc.py fails when the document's table differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kio.schema.index import api_key_map

from broker.handlers import BROKER_HANDLERS
from broker.protocol.api import (
    BROKER_APIS,
    NEXT_API_NAMES,
    ApiTable,
    floors_table,
    has_current_kio_schema,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC = REPO_ROOT / "docs" / "compatibility.md"
START = "<!-- api-table:start (python -m tests.support.api_table --write) -->"
END = "<!-- api-table:end -->"

# Tests beyond tests/unit/handlers/test_<api>.py (which every client-listener handler has,
# unless named here), by API name.
EXTRA_TESTS: dict[str, tuple[str, ...]] = {
    # share groups (KIP-932): one in-process handler test for the four, and Kafka 4.4's
    # KafkaShareConsumer
    **{name: ("unit/handlers/test_share_fetch.py", "compat/kafka/test_java_share_groups.py")
       for name in ("share_group_heartbeat", "share_group_describe", "share_acknowledge")},
    "share_fetch": ("compat/kafka/test_java_share_groups.py",),
    "produce": ("integration/test_old_versions.py", "compat/test_confluent.py",
                "unit/replication/test_replica_txn_verification.py",
                "integration/test_txn_verification.py"),
    "init_producer_id": ("integration/test_txn_verification.py",),
    "add_partitions_to_txn": ("unit/txn/test_txn_v2.py",
                              "integration/test_txn_verification.py"),
    "end_txn": ("unit/txn/test_txn_v2.py", "integration/test_txn_verification.py"),
    "txn_offset_commit": ("integration/test_txn_verification.py",
                          "unit/protocol/test_kio_next.py",
                          "compat/kafka/test_java_new_versions.py"),
    # the Kafka 4.4 versions kio 0.6.5 lacks (broker/protocol/kio_next_gen.py)
    "api_versions": ("unit/protocol/test_kio_next.py", "compat/kafka/test_java_new_versions.py"),
    "delete_groups": ("unit/protocol/test_kio_next.py", "compat/kafka/test_java_new_versions.py"),
    # KIP-1331's v1 and API 93 (Kafka Streams 4.4 against Skiff and the reference Kafka)
    **{name: ("unit/protocol/test_kio_next.py",
              "compat/kafka/test_streams_group_topology_description.py")
       for name in ("streams_group_heartbeat", "streams_group_describe",
                    "streams_group_topology_description_update")},
    "fetch": ("unit/replication/test_fetch_session.py",
              "unit/replication/test_fetcher_sessions.py",
              "compat/test_fetch_sessions_kafka_python.py", "integration/test_old_versions.py"),
    "list_offsets": ("integration/test_old_versions.py", "compat/test_old_clients.py"),
    "offset_commit": ("compat/test_groups_confluent.py", "compat/test_old_sarama.py"),
    "offset_fetch": ("compat/test_groups_confluent.py", "compat/test_old_clients.py"),
    "join_group": ("compat/test_groups_confluent.py",),
    "sync_group": ("compat/test_groups_confluent.py",),
    "heartbeat": ("compat/test_groups_confluent.py",),
    "consumer_group_heartbeat": ("compat/test_groups_confluent_kip848.py",),
    "alter_partition_reassignments": ("unit/handlers/test_partition_reassignments.py",),
    "list_partition_reassignments": ("unit/handlers/test_partition_reassignments.py",),
    "describe_user_scram_credentials": ("unit/security/test_scram_records.py",
                                        "compat/test_security_scram.py"),
    "alter_user_scram_credentials": ("unit/security/test_scram_records.py",
                                     "compat/test_security_scram.py"),
    "get_telemetry_subscriptions": ("integration/test_client_telemetry.py",),
    "push_telemetry": ("integration/test_client_telemetry.py",),
    "unregister_broker": ("unit/controller/rpc/test_rpc_unregister_broker.py",),
    "describe_quorum": ("integration/test_describe_quorum_broker.py",),
    "sasl_handshake": ("unit/security/test_sasl.py", "compat/test_security_sasl.py"),
    "sasl_authenticate": ("unit/security/test_sasl.py", "compat/test_security_sasl.py",
                          "compat/test_security_scram.py"),
}
CONTROLLER_TESTS: dict[str, tuple[str, ...]] = {
    "fetch": ("unit/raft/test_raft_driver.py",),
    "vote": ("unit/raft/test_raft_driver.py",),
    "begin_quorum_epoch": ("unit/raft/test_raft_driver.py",),
    "end_quorum_epoch": ("unit/raft/test_raft_driver.py",),
    "describe_quorum": ("unit/admin/test_admin_quorum_remote.py",),
    "describe_cluster": ("unit/handlers/test_describe_cluster_controller.py",),
    # KIP-919: what an admin client bootstrapped from the controllers sends
    **{name: ("compat/kafka/test_tools_quorum.py",) for name in (
        "describe_configs", "describe_acls", "describe_user_scram_credentials",
        "incremental_alter_configs", "alter_configs")},
    "fetch_snapshot": ("unit/raft/test_raft_driver.py",),
    "add_raft_voter": ("unit/raft/test_raft_driver_voters.py",),
    "remove_raft_voter": ("unit/raft/test_raft_driver_voters.py",),
}


def _range(table: ApiTable, key: int, sasl: ApiTable | None = None) -> str:
    r = table.get(key)
    if r is None and sasl is not None and (r := sasl.get(key)) is not None:
        return f"{r.min_version}-{r.max_version} (SASL listeners)"
    return "—" if r is None else f"{r.min_version}-{r.max_version}"


def _kafka_range(key: int) -> str:
    from kio.schema.index import schema_name_map

    if key not in api_key_map:  # a Kafka 4.4 API kio 0.6.5 lacks (broker/protocol/_kio_next)
        return "0-0 (Kafka 4.4; kio lacks it)"

    versions = [v for v in schema_name_map.get(api_key_map[key], {})
                if has_current_kio_schema(key, v)]
    return f"{min(versions)}-{max(versions)}" if versions else "—"


def client_table() -> ApiTable:
    """What the client listener advertises in ApiVersions (the node's table)."""
    return BROKER_APIS.restricted_to(m.API_KEY for m in BROKER_HANDLERS)


def tests_of(name: str, served: bool, on_controller: bool) -> list[str]:
    out: list[str] = []
    if served:
        own = f"unit/handlers/test_{name}.py"
        if (REPO_ROOT / "tests" / own).exists():
            out.append(own)
        out.extend(EXTRA_TESTS.get(name, ()))
    if on_controller:
        rpc = f"unit/controller/rpc/test_rpc_{name}.py"
        if (REPO_ROOT / "tests" / rpc).exists() and rpc not in out:
            out.append(rpc)
        out.extend(t for t in CONTROLLER_TESTS.get(name, ()) if t not in out)
    return out


def render() -> str:
    from broker.node.quorum import controller_api_table
    from broker.server.server import with_sasl_apis

    client = client_table()
    kafka4 = floors_table(client, "kafka4")
    sasl = with_sasl_apis(client)
    controller = controller_api_table()
    rows = ["| API (key) | Kafka 4.x (kio 0.6.5) | Skiff client listener (default) | "
            "Skiff, `skiff.min.api.versions=kafka4` | Skiff controller listener | tests "
            "(under `tests/`) |",
            "|---|---|---|---|---|---|"]
    names = {**api_key_map, **NEXT_API_NAMES}
    for key in sorted(names):
        name = names[key]
        served, on_controller = key in client, key in controller
        tests = tests_of(name, served, on_controller)
        if key in sasl and not served:
            tests = list(EXTRA_TESTS.get(name, ()))
        rows.append(f"| {name} ({key}) | {_kafka_range(key)} | {_range(client, key, sasl)} | "
                    f"{_range(kafka4, key, floors_table(sasl, 'kafka4'))} | "
                    f"{_range(controller, key)} | "
                    f"{', '.join(tests) if tests else '—'} |")
    served = sum(1 for k in api_key_map if k in client)
    rows.append("")
    newer = sum(1 for k in NEXT_API_NAMES if k in client)
    rows.append(f"{served} of kio's {len(api_key_map)} API keys are served on the client "
                f"listener, and {newer} Kafka 4.4 API kio lacks; \"—\" is not served there "
                f"(Kafka answers those on its controller listener, or they belong to features "
                f"Skiff does not have yet).")
    return "\n".join(rows)


def document_table(text: str) -> str:
    start, end = text.index(START) + len(START), text.index(END)
    return text[start:end].strip("\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the table in the document")
    args = ap.parse_args()
    table = render()
    if not args.write:
        print(table)
        return 0
    text = DOC.read_text()
    start, end = text.index(START) + len(START), text.index(END)
    DOC.write_text(text[:start] + "\n" + table + "\n" + text[end:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
