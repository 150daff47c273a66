"""The pure controller: requests + image + now_ms -> metadata records and results."""

from broker.controller.controller import (
    PRODUCER_ID_BLOCK_SIZE,
    Controller,
    ControllerSettings,
    random_topic_id,
)
from broker.controller.placement import PlacementError, place_replicas
from broker.controller.requests import (
    AllocateProducerIdsReply,
    AlterConfigOp,
    AlterConfigsResource,
    AlterConfigsResult,
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
    ConfigResource,
    ControllerResult,
    CreatableTopic,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
    IncrementalAlterConfigsResource,
)
from broker.controller.validation import topic_name_error

__all__ = [
    "PRODUCER_ID_BLOCK_SIZE",
    "AllocateProducerIdsReply",
    "AlterConfigOp",
    "AlterConfigsResource",
    "AlterConfigsResult",
    "BrokerHeartbeatReply",
    "BrokerHeartbeatRequest",
    "BrokerRegistrationReply",
    "BrokerRegistrationRequest",
    "ConfigResource",
    "Controller",
    "ControllerResult",
    "ControllerSettings",
    "CreatableTopic",
    "CreatePartitionsResult",
    "CreatePartitionsTopic",
    "CreateTopicResult",
    "DeleteTopicResult",
    "IncrementalAlterConfigsResource",
    "PlacementError",
    "place_replicas",
    "random_topic_id",
    "topic_name_error",
]
