"""Readiness of a node, as a Kubernetes readiness probe (or an operator rolling the
brokers one at a time) needs it: the `skiff.readiness` service of the admin plane's
grpc.health.v1, apart from the overall ("") status that liveness and startup probes ask.

A broker is ready when:

1. it is registered and unfenced: its own last heartbeat said so, and the metadata image
   it serves from agrees (a fenced broker leads nothing and is no ISR candidate);
2. it is not in a controlled shutdown;
3. its replicas are in sync: every partition that lists it as a replica has it in the ISR,
   except where it has nothing to catch up from or is not meant to be there yet:
   - the partition has no leader, or its leader is a fenced broker (no leader to fetch
     from; the partition waits on that other broker, not on this one);
   - this broker leads it (a leader is always in its ISR; an unclean election's leader is
     the ISR);
   - this broker is an adding replica of a reassignment (it copies the whole log: that
     is a reassignment's progress, not a restart's);
   - its replica lives in a log dir this broker reports offline (KIP-858: it cannot catch
     up until the disk is replaced and the broker restarted).

This is what Strimzi waits for between two broker restarts ("the broker is ready when its
replicas are in sync"): once a restarted broker is ready, each of its partitions has its
full ISR again, so restarting the next broker leaves every partition at least one replica
above what it had before the roll began. A controller-only node is ready once started.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from broker.metadata.image import MetadataImage, dir_online
from broker.metadata.records import NO_LEADER

# the grpc.health.v1 service name a readiness probe asks for (`grpc: {service: ...}`)
READINESS_SERVICE = "skiff.readiness"
# at most this many partitions are named in a reason (the count is always given)
REASON_PARTITIONS = 5


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reason: str  # why not ready; "" when ready


READY = Readiness(True, "")


def replicas_out_of_sync(image: MetadataImage, broker_id: int) -> Iterator[str]:
    """`topic-partition` of each replica of `broker_id` that should be catching up into the
    ISR and is not in it yet (rule 3 above)."""
    reg = image.broker(broker_id)
    online = reg.log_dirs if reg is not None else ()
    for topic, index, part in image.iter_partitions():
        if broker_id not in part.replicas or broker_id in part.isr:
            continue
        if broker_id in part.adding_replicas:
            continue
        if part.leader in (NO_LEADER, broker_id) or not image.is_alive(part.leader):
            continue
        if not dir_online(part.directory_of(broker_id), online):
            continue
        yield f"{topic.name}-{index}"


def broker_readiness(image: MetadataImage, broker_id: int, fenced: bool) -> Readiness:
    """Whether broker `broker_id`, whose own heartbeat last found it `fenced` or not, is
    ready (rules 1-3 above)."""
    reg = image.broker(broker_id)
    if fenced or reg is None or reg.fenced:
        why = "not registered" if reg is None else "fenced"
        return Readiness(False, f"broker {broker_id} is {why}")
    if reg.in_controlled_shutdown:
        return Readiness(False, f"broker {broker_id} is in a controlled shutdown")
    behind = list(replicas_out_of_sync(image, broker_id))
    if behind:
        shown = ", ".join(sorted(behind)[:REASON_PARTITIONS])
        more = f" and {len(behind) - REASON_PARTITIONS} more" if \
            len(behind) > REASON_PARTITIONS else ""
        return Readiness(False, f"{len(behind)} replica(s) of broker {broker_id} not yet in "
                                f"the ISR: {shown}{more}")
    return READY
