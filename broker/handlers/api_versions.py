"""ApiVersions (key 18, v0-v5): the API version ranges this listener advertises.

A request at a version above what we support never reaches `handle`: the server answers it
with `unsupported_version_response` at v0 (UNSUPPORTED_VERSION plus our ranges, so the client
retries with a version we know), as Kafka does.

From v3 the answer carries the node's supported feature ranges (broker/metadata/features.py)
and the cluster's finalized levels with their epoch (the image's offset; kraft.version is the
Raft's own, listed when above 0), as Kafka's ApiVersionsResponse does; before v4 a supported
range starting at 0 is reported from 1 and a 0-0 range left out (KIP-1022: older clients took
a minimum of 0 for "no feature"). A caller without an image (a test's `None`) gets the tagged
fields at their defaults, which kio does not write (kcat's librdkafka 2.0.2 failed on
default-valued tagged fields; the values a node sends are not defaults).

v5 (KIP-1242, Kafka 4.4; its class is generated into broker/protocol/_kio_next): the client
names the cluster and node it means to reach. As Kafka's KafkaApis does, a request naming a
ClusterId is answered REBOOTSTRAP_REQUIRED (no API keys) unless both the ClusterId and the
NodeId are this node's; a NodeId without a ClusterId is INVALID_REQUEST (Kafka's
ApiVersionsRequest.isValid). The controller listener stays at v4.
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32Timedelta, i64

from broker.metadata.features import KRAFT_VERSION, supported_features
from broker.protocol.api import API_VERSIONS, ApiTable, response_schema
from broker.protocol.durations import NO_THROTTLE
from broker.server.context import RequestContext

if TYPE_CHECKING:
    from broker.metadata.image import MetadataImage
    from broker.metrics.telemetry import TelemetryStore


class FeatureSource(Protocol):
    """What ApiVersions reads of its node: its ids, the image, the Raft's kraft.version and
    the client-telemetry store (which notes the clients' software)."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...

    @property
    def metadata(self) -> MetadataImage: ...

    @property
    def kraft_version(self) -> int: ...

    @property
    def telemetry(self) -> TelemetryStore | None: ...

API_KEY = API_VERSIONS

# Kafka's ApiVersionsRequest.isValid for client_software_name/version (v3+).
_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


Finalized = tuple[tuple[str, int], ...]


@functools.lru_cache(maxsize=64)
def build_response(version: int, apis: ApiTable, error_code: ErrorCode,
                   finalized: Finalized | None = None, epoch: int = -1) -> Any:
    """Cached: kio entities are immutable, and a listener's table does not change.
    `finalized`: the finalized (name, level) pairs; None leaves the feature fields out."""
    schema = response_schema(API_VERSIONS, version)
    module = importlib.import_module(schema.__module__)
    api_version_cls = module.ApiVersion
    keys = tuple(
        api_version_cls(
            api_key=i16(r.api_key), min_version=i16(r.min_version), max_version=i16(r.max_version)
        )
        for r in apis
    )
    if version == 0:
        return schema(error_code=error_code, api_keys=keys)  # type: ignore[call-arg]
    if version < 3 or finalized is None:
        return schema(  # type: ignore[call-arg]
            error_code=error_code, api_keys=keys, throttle_time=i32Timedelta.parse(NO_THROTTLE)
        )
    supported = []
    for name, lo, hi in supported_features():
        if version < 4 and lo == 0:
            # before v4 a range from 0 cannot be read by older clients (KIP-1022): Kafka 4.4
            # leaves such features out of a v3 answer (Kafka 3.9 reported them from 1)
            continue
        supported.append(module.SupportedFeatureKey(name=name, min_version=i16(lo),
                                                    max_version=i16(hi)))
    return schema(  # type: ignore[call-arg]
        error_code=error_code, api_keys=keys, throttle_time=i32Timedelta.parse(NO_THROTTLE),
        supported_features=tuple(supported),
        finalized_features_epoch=i64(epoch),
        finalized_features=tuple(
            module.FinalizedFeatureKey(name=n, max_version_level=i16(v),
                                       min_version_level=i16(v))
            for n, v in finalized),
    )


def finalized_of(node: FeatureSource | None) -> tuple[Finalized | None, int]:
    """(finalized levels, epoch) of the node's image; (None, -1) for a node without one."""
    if node is None:
        return None, -1
    image = node.metadata
    levels = dict(image.features)
    kraft = node.kraft_version
    if kraft > 0:
        levels[KRAFT_VERSION] = kraft
    return tuple(sorted(levels.items())), image.finalized_features_epoch


def unsupported_version_response(apis: ApiTable) -> Any:
    """The v0 answer to an ApiVersions request of a version we do not support."""
    return build_response(0, apis, ErrorCode.unsupported_version)


def is_valid_request(request: Any) -> bool:
    version = int(request.__version__)
    if version < 3:
        return True
    if version >= 5 and request.cluster_id is None and int(request.node_id) != -1:
        return False  # a node named without its cluster (Kafka's isValid)
    return bool(
        _SOFTWARE_RE.fullmatch(request.client_software_name)
        and _SOFTWARE_RE.fullmatch(request.client_software_version)
    )


def is_misrouted(node: FeatureSource | None, request: Any) -> bool:
    """KIP-1242: the request names a cluster, and this node is not that cluster's NodeId.
    v5 is advertised on the client listener only (the controller listener stays at v4)."""
    if int(request.__version__) < 5 or request.cluster_id is None or node is None:
        return False
    # the cluster id Metadata and DescribeCluster report (metadata.py: the node's, else the
    # image's), so a client that read it there is never refused by a spelling of it
    cluster_id = node.cluster_id or node.metadata.cluster_id
    return bool(request.cluster_id != cluster_id or int(request.node_id) != node.node_id)


async def handle(node: FeatureSource | None, ctx: RequestContext, request: Any) -> Any:
    if not is_valid_request(request):
        return build_response(ctx.api_version, ApiTable([]), ErrorCode.invalid_request)
    if is_misrouted(node, request):
        return build_response(ctx.api_version, ApiTable([]), ErrorCode.rebootstrap_required)
    finalized, epoch = finalized_of(node) if ctx.api_version >= 3 else (None, -1)
    telemetry = None if node is None else node.telemetry
    if telemetry is not None and ctx.api_version >= 3:  # what client-metrics `match` reads
        telemetry.note_software(ctx.connection_id, request.client_software_name,
                                request.client_software_version)
    return build_response(ctx.api_version, ctx.apis, ErrorCode.none, finalized, epoch)


def error_response(ctx: RequestContext, request: Any, error_code: ErrorCode) -> Any:
    return build_response(ctx.api_version, ApiTable([]), error_code)
