"""Where Kafka 4.4's admin tools print something else against Skiff than against Kafka 4.4,
and why that is accepted. Keyed by the step name the tests give `BrokerPair.same`; each
entry's rewrites are applied to both outputs before they are compared, and a step whose
outputs agree without them fails (tests/support/kafka_tools.py), so this list is exactly
the differences that exist today.
"""

from __future__ import annotations

from tests.support.kafka_tools import Difference

ELR = ("Kafka 4.4 enables eligible leader replicas (KIP-966, eligible.leader.replicas.version=1), "
       "and its controller then stores a cluster-wide min.insync.replicas=1 "
       "(DYNAMIC_DEFAULT_BROKER_CONFIG); Skiff does not implement ELR, so it has no such record")
_MIN_ISR_DEFAULT = (r"^min\.insync\.replicas=1 sensitive=false "
                    r"synonyms=\{DYNAMIC_DEFAULT_BROKER_CONFIG:min\.insync\.replicas=1\}\n?", "")

ADMIN: dict[str, Difference] = {
    "topics.describe": Difference(ELR, ((r"Configs: min\.insync\.replicas=1,?", "Configs: "),)),
    "topics.describe.altered": Difference(
        ELR, ((r"Configs: min\.insync\.replicas=1,?", "Configs: "),)),
    "configs.broker_default.describe": Difference(ELR, (_MIN_ISR_DEFAULT,)),
    "configs.broker.unknown_key": Difference(
        "Kafka stores a dynamic broker config it does not know (a plugin may read it); Skiff "
        "refuses it with INVALID_REQUEST 'Unknown broker config name: ...' rather than keep a "
        "setting nothing reads",
        ((r"^Error while executing config command.*\n?", ""),
         (r"^java\.util\.concurrent\.ExecutionException: .*\n?", ""),
         (r"^Caused by: .*\n?", ""),
         (r"^Completed updating config for broker 1\.$", "")),
        same_exit_code=False),
    "features.describe": Difference(
        "Skiff supports metadata.version from 3.9-IV0 (Kafka from 3.3-IV3) and has no "
        "eligible.leader.replicas.version (KIP-966); `skiff dev` runs a static quorum "
        "(kraft.version 0) where Kafka's standalone format finalizes 1. Both are formatted at "
        "4.4-IV2, so the share.version and streams.version lines are the same",
        ((r"^Feature: eligible\.leader\.replicas\.version .*\n?", ""),
         (r"^(Feature: (kraft|metadata)\.version) .*$", r"\1 <levels>"),
         (r"Epoch: \d+", "Epoch: <n>"))),
    "features.downgrade.metadata": Difference(
        "the same downgrade (4.4-IV2 -> 3.9-IV0) is refused for different reasons: Kafka "
        "because it drops metadata, Skiff because a finalized feature (group.version 1, ...) "
        "needs a higher metadata.version",
        ((r"The update failed for all features since the following feature had an error: "
          r".*$", "<refused>"),
         (r"Could not downgrade metadata\.version to 21\. .*$",
          "Could not downgrade metadata.version to 21. <refused>"))),
}

ACLS: dict[str, Difference] = {}

VOTERS: dict[str, Difference] = {}

GATES: dict[str, Difference] = {}

SHARE: dict[str, Difference] = {}

_ELR_TOPIC_CONFIGS = (r"Configs: min\.insync\.replicas=1,?", "Configs:")
CLUSTER: dict[str, Difference] = {
    "cluster.describe": Difference(ELR, (_ELR_TOPIC_CONFIGS,)),
    "reassign.describe.after": Difference(ELR, (_ELR_TOPIC_CONFIGS,)),
    "reassign.describe.reordered": Difference(ELR, (_ELR_TOPIC_CONFIGS,)),
    "election.describe.after": Difference(ELR, (_ELR_TOPIC_CONFIGS,)),
    "reassign.execute.throttle": Difference(
        "Skiff does not throttle replication: it refuses the broker configs "
        "leader.replication.throttled.rate and follower.replication.throttled.rate "
        "(INVALID_REQUEST 'Unknown broker config name') rather than store a limit nothing "
        "applies, so --execute --throttle stops before it starts the move; without "
        "--throttle the move is the same, and --verify's clearing of the throttles (deletes) "
        "works on both",
        ((r"^The inter-broker throttle limit was set to \d+ B/s\n?", ""),
         (r"^Successfully started partition reassignments? for .*\n?", ""),
         (r"^Error: .*Unknown broker config name: leader\.replication\.throttled\.rate\n?",
          ""),
         (r"^java\.util\.concurrent\.ExecutionException: .*\n?", ""),
         (r"^Caused by: .*\n?", "")),
        same_exit_code=False),
}

RESOURCE_CONFIGS: dict[str, Difference] = {}
