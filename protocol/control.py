"""Control records: the transaction markers (COMMIT and ABORT) a coordinator writes into a log.

A marker is a control batch (attributes: transactional and control bits, no compression) of the
producer's id and epoch, with one record whose key is Kafka's ControlRecordType (int16 version 0,
int16 type) and whose value is Kafka's EndTxnMarker (int16 version 0, int32 coordinator epoch),
exactly as Kafka's MemoryRecords.withEndTransactionMarker writes it (baseSequence -1).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from protocol.errors import CorruptRecordError
from protocol.records import BatchHeader, NewRecord, build_batch, decode_records

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class ControlRecordType(enum.IntEnum):
    """Kafka's ControlRecordType (the types Samsa writes or reads)."""

    ABORT = 0
    COMMIT = 1
    UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """What a COMMIT or ABORT control record says."""

    control_type: ControlRecordType
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type is ControlRecordType.ABORT


def build_end_txn_marker(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    commit: bool,
    *,
    timestamp: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One control batch holding the COMMIT (or ABORT) marker of a producer's transaction."""
    control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    record = NewRecord(
        _KEY.pack(CONTROL_KEY_VERSION, control),
        _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch),
        timestamp=timestamp,
    )
    return build_batch(
        [record],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


def control_type_of(key: bytes | None) -> ControlRecordType:
    """Kafka's ControlRecordType.parse: the type in a control record's key (UNKNOWN otherwise)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key too short")
    _, code = _KEY.unpack_from(key)
    try:
        return ControlRecordType(code)
    except ValueError:
        return ControlRecordType.UNKNOWN


def read_end_txn_marker(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader
) -> EndTxnMarker | None:
    """The marker in the control batch at `pos`; None for an empty control batch (one the
    cleaner emptied) or a control record of another type. CorruptRecordError if unreadable."""
    records = decode_records(buf, pos, header)
    if not records:
        return None
    record = records[0]
    control = control_type_of(record.key)
    if control is ControlRecordType.UNKNOWN:
        return None
    if record.value is None or len(record.value) < _VALUE.size:
        raise CorruptRecordError("end transaction marker value too short")
    _, coordinator_epoch = _VALUE.unpack_from(record.value)
    return EndTxnMarker(control, coordinator_epoch)
