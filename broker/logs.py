"""The broker's log output: one line per event, whatever a client sent.

Client-supplied strings (client ids, topic and group names, anything that came off the wire) reach
log messages as `%s` arguments. They are escaped here, in the formatter `configure_logging`
installs, and nowhere else: every control character (C0, DEL, C1), and the Unicode line and
paragraph separators, in a message becomes a visible escape (`\\n`, `\\x1b`, `\\u2028`), so a
newline cannot forge a log line and an escape sequence cannot reach a terminal. Tracebacks keep
their lines, each indented, so that no line after the first of a record can pass for a record of
its own, and their control characters are escaped the same way. Backslashes are left as they are:
`\\n` in a client id is shown as sent, which is ambiguous to a reader but cannot break a line.
"""

from __future__ import annotations

import logging
import re
import sys
import time

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    code = ord(c)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape(text: str) -> str:
    """`text` with every control character and line separator written as an escape."""
    if _UNSAFE.search(text) is None:  # the usual case: no copy
        return text
    return _UNSAFE.sub(_escape_char, text)


_UNSAFE_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _indent_block(text: str) -> str:
    """A traceback or stack: control characters escaped, every line indented."""
    text = _UNSAFE_BUT_NEWLINE.sub(_escape_char, text)
    return "\n".join("  " + line for line in text.split("\n"))


class SafeFormatter(logging.Formatter):
    """Formats each record as one line (its message escaped), plus its traceback, indented."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: logging._SysExcInfoType) -> str:
        return _indent_block(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _indent_block(super().formatStack(stack_info))


def configure_logging(level: str) -> None:
    """The broker process's logging: records at `level` and above to stderr, one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter(FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))


class Throttle:
    """One log line per `interval_s` for an event that can repeat many times a second (an
    accept error, a rejected connection): `due()` is True for the first event of each interval
    and counts the others, which the next line reports through `take_suppressed()`."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._next = 0.0
        self._suppressed = 0

    def due(self) -> bool:
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.interval_s
            return True
        self._suppressed += 1
        return False

    def take_suppressed(self) -> int:
        """Events not logged since the last line; resets the count."""
        count, self._suppressed = self._suppressed, 0
        return count
