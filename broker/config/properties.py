"""Java `.properties` files (Kafka's server.properties), read by the javaproperties library.

Comments (`#`, `!`), `key=value`, `key: value` and `key value`, line continuations and the escapes
(`\\t`, `\\uXXXX`, ...) follow java.util.Properties. The file is decoded as UTF-8 (Java's own loader
uses ISO-8859-1; a file that is not valid UTF-8 is read that way instead). Later duplicates of a
key win, as in Java.
"""

from __future__ import annotations

from pathlib import Path

from broker.config.values import ConfigError


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a `.properties` file; ConfigError (naming the file) if it is malformed."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    try:
        return parse_properties(text)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}", e.key) from None


def parse_properties(text: str) -> dict[str, str]:
    """Parse `.properties` text; ConfigError on a malformed `\\uXXXX` escape."""
    # imported here: the library's XML support pulls in urllib and xml.etree (9 ms, 2 MiB of a
    # broker started without a properties file)
    import javaproperties  # noqa: PLC0415

    try:
        return dict(javaproperties.loads(text))
    except javaproperties.InvalidUEscapeError as e:
        lineno = next((n for n, line in enumerate(text.splitlines(), 1) if e.escape in line), 0)
        raise ConfigError(f"line {lineno}: malformed \\uxxxx escape {e.escape}") from None
