"""Checking produced records before the append, on the event loop or beside it.

Every produced batch is checked in full (broker/log/validation.py `check_records`, Kafka's
LogValidator) against its partition's topic config before the partition appends it. A request's
batches are checked on the event loop while they are small: at most INLINE_RECORDS records per
request and INLINE_BYTES decompressed bytes per batch, about a millisecond of walking. Past
either, and for every legacy (magic 0/1) message set, which is up-converted first, the check
runs in one worker thread, so a compression bomb or a huge batch never stalls other clients; the
append itself (offsets, producer state) stays on the loop. One worker, so the memory the checks
take is bounded by one batch's decompression bound.

The worker shares the GIL with the loop: once it exists, the interpreter's switch interval drops
to GIL_SWITCH_INTERVAL, so the loop gets the GIL back within a millisecond of asking.
"""

from __future__ import annotations

import asyncio
import functools
import struct
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from broker import clock
from broker.config import LogConfig
from broker.log.validation import CheckedRecords, check_records, max_decompressed_bytes
from protocol.errors import ErrorCode, KafkaError
from protocol.record_check import OverBudget
from protocol.records import CURRENT_MAGIC
from protocol.topic_partition import TopicPartition

INLINE_RECORDS = 1000
"""Records a request may have checked on the event loop (about a millisecond of walking, see
docs/architecture.md "Record validation"); batches past it go to the worker thread."""
INLINE_BYTES = 1 << 20
"""Records bytes (decompressed) one batch may take on the loop before it goes to the worker."""
GIL_SWITCH_INTERVAL = 0.001
"""Seconds a thread may keep the GIL while another waits for it, once the worker exists
(CPython's default is 0.005). A request takes the GIL back several times (every socket call
releases it), each time waiting up to this long while the worker walks records: an echo round
trip on the loop next to a walking thread took up to 22 ms at 5 ms and 7 ms at 1 ms here."""

_RECORDS_COUNT = struct.Struct(">i")
_MAGIC = 16
_COUNT = 57


def _check(
    records: bytes | memoryview, config: LogConfig, tp: TopicPartition, budget: int | None
) -> CheckedRecords:
    """The check itself (inline with a budget, or in the worker without): up-conversion of a
    legacy message set first, then every batch and record."""
    if records[_MAGIC] < CURRENT_MAGIC:
        from protocol import legacy  # noqa: PLC0415 - only Produce v0-2 sends these: not at start-up

        records = legacy.upconvert(records, strict=True, max_decompressed=max_decompressed_bytes(config))
        if not records:
            raise KafkaError(ErrorCode.invalid_record, "Produce request contains no message")
    return check_records(records, config, clock.now_ms(), partition=str(tp), budget=budget)


class RecordChecker:
    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_INTERVAL))
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="samsa-record-check")
        return self._executor

    async def check(
        self, entries: Sequence[tuple[TopicPartition, LogConfig, bytes | memoryview]]
    ) -> list[CheckedRecords | KafkaError]:
        """Each entry's records checked against its topic config, in order: the records ready
        for the append, or the error to answer (with KIP-467 record errors where they apply)."""
        out: list[CheckedRecords | KafkaError] = []
        inline_records = INLINE_RECORDS
        loop = asyncio.get_running_loop()
        for tp, config, records in entries:
            try:
                result = None
                (count,) = _RECORDS_COUNT.unpack_from(records, _COUNT) if len(records) >= 61 else (0,)
                if records[_MAGIC] == CURRENT_MAGIC and 0 <= count <= inline_records:
                    try:
                        result = _check(records, config, tp, INLINE_BYTES)
                        inline_records -= count
                    except OverBudget:
                        pass
                if result is None:
                    result = await loop.run_in_executor(
                        self._worker(), functools.partial(_check, records, config, tp, None)
                    )
                out.append(result)
            except KafkaError as e:
                out.append(e)
        return out

    def shutdown(self) -> None:
        """Let the worker go (a check in progress finishes; none is waited for)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
