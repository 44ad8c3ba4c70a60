"""NewTypes for the identifiers and positions that Kafka's protocol passes around.

They cost nothing at run time and keep an offset from being passed where an epoch is meant.
"""

from __future__ import annotations

import datetime
from typing import NewType

from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.static.primitive import i32Timedelta

__all__ = ["BrokerId", "ProducerId", "TopicName"]  # kio's, re-exported (see below)

Offset = NewType("Offset", int)
"""A position in a partition's log (base offset, log end offset, high watermark, ...)."""

LeaderEpoch = NewType("LeaderEpoch", int)
"""The epoch of a partition's leadership; bumped on every leader change."""

# BrokerId (a broker's `broker.id` / node id), ProducerId and TopicName are kio's own distinct
# types, so a value built here goes into a kio entity without conversion.

ControllerEpoch = NewType("ControllerEpoch", int)
"""The epoch of the active controller; bumped on every controller election."""

ProducerEpoch = NewType("ProducerEpoch", int)
Sequence = NewType("Sequence", int)
CorrelationId = NewType("CorrelationId", int)

NO_OFFSET = Offset(-1)
NO_LEADER_EPOCH = LeaderEpoch(-1)
NO_PRODUCER_ID = ProducerId(-1)
NO_PRODUCER_EPOCH = ProducerEpoch(-1)
NO_SEQUENCE = Sequence(-1)
NO_BROKER = BrokerId(-1)

NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
"""throttle_time of a response a handler writes (the network layer sets client quotas' throttle)."""

EARLIEST_TIMESTAMP = -2
"""ListOffsets sentinel: the log start offset."""
LATEST_TIMESTAMP = -1
"""ListOffsets sentinel: the high watermark (or last stable offset)."""
MAX_TIMESTAMP = -3
"""ListOffsets sentinel (KIP-734): the offset of the record with the largest timestamp."""
