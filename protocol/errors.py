"""Kafka error codes and the exception that carries one through the broker.

The codes are kio's `ErrorCode` (generated from Kafka's own error table); Samsa raises
`KafkaError` wherever a request cannot be served and the handler turns it into that code
in the response for the partition, topic or request it concerns.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = [
    "ErrorCode",
    "KafkaError",
    "CorruptRecordError",
]


class KafkaError(Exception):
    """An error with a Kafka error code and a human-readable message."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message or code.name

    def __repr__(self) -> str:
        return f"KafkaError({self.code.name}, {self.message!r})"


class CorruptRecordError(KafkaError):
    """A record batch failed its CRC, is truncated or is otherwise malformed."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.corrupt_message, message)
