"""Where Skiff's answer to a Java AdminClient call differs from Kafka 4.4's, on purpose or for now.

tests/compat/kafka/test_java_admin.py runs skiff.compat.admin.AdminParity (one JSON line per
Admin call) against a Skiff node and a Kafka 4.4 node and fails on any difference that is not
listed here, and on any entry here that no longer differs (so this list stays true). Each
entry is the call's name as the program prints it, and why Skiff answers otherwise; the
reasons appear in docs/compatibility.md's "Apache Kafka 4.4 AdminClient" table.
"""

from __future__ import annotations

NOT_SERVED = "Skiff does not serve the API ({api}): the client gets UnsupportedVersionException"
# the session's skiff_node runs a static quorum (kraft.version 0), the reference a dynamic one
_STATIC_QUORUM = ("Skiff serves {api}, but the node these calls run against has a static quorum "
                  "(kraft.version 0), which refuses voter changes with UNSUPPORTED_VERSION as a "
                  "static Kafka quorum does; the reference's quorum is dynamic. "
                  "test_tools_quorum_voters.py compares the voter changes on dynamic quorums")

DIFFERENCES: dict[str, str] = {
    # Configs
    "describeConfigs(topic)": (
        "topic config names: Kafka 4.4 lists the tiered-storage configs (remote.*, "
        "local.retention.*) and "
        "max.decompressed.message.bytes, which Skiff does not implement; Skiff lists "
        "drop.behind.bytes (its own) and message.downconversion.enable (removed in Kafka 4.0). "
        "Skiff sends no documentation (includeDocumentation). min.insync.replicas is "
        "DYNAMIC_DEFAULT_BROKER_CONFIG on Kafka: its storage format writes the cluster-level "
        "value that eligible leader replicas (KIP-966) need, a feature Skiff does not have"),
    "describeConfigs(broker)": (
        "sasl.jaas.config is not listed by Skiff; min.insync.replicas is a cluster-level "
        "dynamic config on Kafka (written by its storage format for KIP-966)"),
    "describeConfigs(brokerLogger)": (
        "Skiff has no log4j loggers: BROKER_LOGGER describes as empty (no `root`)"),
    "incrementalAlterConfigs(brokerDefault,log.cleaner.backoff.ms)": (
        "Skiff's dynamic broker configs are the topic-config fallbacks and a few thread and "
        "connection settings; the log cleaner's tuning other than log.cleaner.threads is "
        "static there, refused as Kafka refuses a config that is not dynamic rather than "
        "accepted and ignored"),
    # Features and the quorum
    "describeFeatures": (
        "Skiff, formatted at 4.4 as Kafka 4.4, finalizes the same levels except "
        "eligible.leader.replicas.version (KIP-966, not implemented) and supports "
        "metadata.version from 3.9-IV0 (Kafka from 3.3-IV3); "
        "kraft.version is 0 (a static voter set) where Kafka's `format --standalone` makes 1"),
    "describeMetadataQuorum": (
        "Skiff's quorum is a static voter set (kraft.version 0): no voter directory ids and "
        "no node endpoints, as Kafka answers for a static quorum"),
    # Client telemetry
    "clientInstanceId": (
        "Skiff serves client telemetry (KIP-714) out of the box, so the client gets an "
        "instance id; Kafka advertises GetTelemetrySubscriptions only when a ClientTelemetry "
        "metrics reporter is configured, and the client's instance id is null without one"),
    # Not served
    "addRaftVoter": _STATIC_QUORUM.format(api="AddRaftVoter"),
    "removeRaftVoter(unknownVoter)": _STATIC_QUORUM.format(api="RemoveRaftVoter"),
    "unregisterController(unknownId)": NOT_SERVED.format(api="UnregisterController"),
}

# tests/compat/kafka/test_java_acls.py: the calls of skiff.compat.admin.AclParity (a non-super
# user on a node with the StandardAuthorizer) whose status or result differs, and why.
ACL_DIFFERENCES: dict[str, str] = {}
