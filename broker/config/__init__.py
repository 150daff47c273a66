"""The node configuration: Kafka's property names, types, defaults and checks.

Sources, lowest to highest precedence:
  1. a Kafka `.properties` file (java.util.Properties syntax),
  2. `--override key=value` arguments,
  3. environment variables `SKIFF_<KEY>`: the key upper-cased with dots as
     underscores (SKIFF_NODE_ID, SKIFF_LOG_DIRS). As in Kafka's container image, a
     double underscore stands for '_' and a triple one for '-'.
A value that does not parse or validate raises ConfigError naming the key, the
value and what was expected, and so does a key Skiff does not know (only a warning when
it comes from a SKIFF_* variable); cross-field rules follow KafkaConfig's KRaft checks.

Also here: the topic-level config definitions (each with the broker key it falls
back to) for CreateTopics/AlterConfigs validation and DescribeConfigs sources and
synonyms, and `log_config()` turning a topic's effective configs into the log
engine's dict.
"""

from __future__ import annotations

from broker.config.definitions import (
    BROKER_CONFIGS as BROKER_CONFIGS,
)
from broker.config.definitions import (
    COMPRESSION_TYPES as COMPRESSION_TYPES,
)
from broker.config.definitions import (
    READ_ONLY_BROKER_KEYS as READ_ONLY_BROKER_KEYS,
)
from broker.config.definitions import (
    SECURITY_PROTOCOLS as SECURITY_PROTOCOLS,
)
from broker.config.definitions import (
    TOPIC_CONFIGS as TOPIC_CONFIGS,
)
from broker.config.definitions import (
    TopicConfigDef as TopicConfigDef,
)
from broker.config.definitions import (
    validate_topic_configs as validate_topic_configs,
)
from broker.config.describe import (
    ConfigEntry as ConfigEntry,
)
from broker.config.describe import (
    ConfigSynonym as ConfigSynonym,
)
from broker.config.describe import (
    describe_broker_configs as describe_broker_configs,
)
from broker.config.describe import (
    describe_topic_configs as describe_topic_configs,
)
from broker.config.describe import (
    effective_topic_configs as effective_topic_configs,
)
from broker.config.describe import (
    log_config as log_config,
)
from broker.config.describe import (
    topic_log_config as topic_log_config,
)
from broker.config.listeners import (
    Listener as Listener,
)
from broker.config.listeners import (
    Voter as Voter,
)
from broker.config.listeners import (
    parse_listeners as parse_listeners,
)
from broker.config.listeners import (
    parse_voters as parse_voters,
)
from broker.config.loading import (
    build_config as build_config,
)
from broker.config.loading import (
    load_config as load_config,
)
from broker.config.node_config import (
    NodeConfig as NodeConfig,
)
from broker.config.properties import (
    env_key as env_key,
)
from broker.config.properties import (
    parse_overrides as parse_overrides,
)
from broker.config.properties import (
    parse_properties as parse_properties,
)
from broker.config.types import (
    INT_MAX as INT_MAX,
)
from broker.config.types import (
    LONG_MAX as LONG_MAX,
)
from broker.config.types import (
    ConfigDef as ConfigDef,
)
from broker.config.types import (
    ConfigError as ConfigError,
)
from broker.config.types import (
    ConfigSource as ConfigSource,
)
from broker.config.types import (
    ConfigType as ConfigType,
)
from broker.config.types import (
    Validator as Validator,
)
from broker.config.types import (
    at_least as at_least,
)
from broker.config.types import (
    between as between,
)
from broker.config.types import (
    format_value as format_value,
)
from broker.config.types import (
    list_of as list_of,
)
from broker.config.types import (
    one_of as one_of,
)
from broker.config.types import (
    one_of_ints as one_of_ints,
)
from broker.config.types import (
    parse_value as parse_value,
)
