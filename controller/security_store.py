"""Where ACLs and SCRAM credentials are kept: the `SecurityStore` every broker reads and writes.

On a single node it is `EmbeddedSecurityStore`, one JSON document in the data directory
(`<log.dir>/security-metadata.json`, replaced atomically like cluster-metadata.json); in a cluster
it is `ZkSecurityStore` (controller/zk_security.py), Kafka's ZooKeeper layout, which every broker
watches so that a change made through any broker is seen by all of them at once. Readers use
`image` (a frozen `SecurityImage`) and `subscribe`; writes return per-item errors as Kafka's
CreateAcls, DeleteAcls and AlterUserScramCredentials answer them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from controller.embedded import _atomic_write
from controller.security_model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
    ResourceType,
    ScramCredential,
    SecurityImage,
)
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("samsa.security")

SECURITY_FILE = "security-metadata.json"
SecurityListener = Callable[[SecurityImage], None]


@dataclass(frozen=True, slots=True)
class ScramChange:
    """One AlterUserScramCredentials item: an upsertion (credential set) or a deletion (None)."""

    user: str
    mechanism: str
    credential: ScramCredential | None


class SecurityStore(Protocol):
    @property
    def image(self) -> SecurityImage: ...

    def subscribe(self, listener: SecurityListener) -> None:
        """Call `listener` with the image now and after every change (on the loop)."""

    async def start(self) -> None:
        """Return once the whole store has been read (the authorizer is ready)."""

    async def stop(self) -> None: ...

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]: ...

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter deleted."""

    async def alter_scram(self, changes: Sequence[ScramChange]) -> list[KafkaError | None]: ...


def apply_scram(scram: Mapping[str, Mapping[str, ScramCredential]], change: ScramChange,
                ) -> dict[str, dict[str, ScramCredential]]:
    """`scram` with one change applied; KafkaError(RESOURCE_NOT_FOUND) deleting what is not there."""
    out = {u: dict(m) for u, m in scram.items()}
    if change.credential is not None:
        out.setdefault(change.user, {})[change.mechanism] = change.credential
    else:
        if change.mechanism not in out.get(change.user, {}):
            raise KafkaError(ErrorCode.resource_not_found,
                             "Attempt to delete a user credential that does not exist")
        del out[change.user][change.mechanism]
        if not out[change.user]:
            del out[change.user]
    return out


class EmbeddedSecurityStore:
    """A single node's ACLs and SCRAM credentials, in `<data dir>/security-metadata.json`."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / SECURITY_FILE
        self._listeners: list[SecurityListener] = []
        self._image = self._load()

    def _load(self) -> SecurityImage:
        if not self._path.exists():
            return SecurityImage(frozenset(), MappingProxyType({}))
        doc = json.loads(self._path.read_text())
        acls = frozenset(
            AclBinding(ResourcePattern(ResourceType[a["resource_type"]], a["name"],
                                       PatternType[a["pattern_type"]]),
                       AccessControlEntry.from_json(a))
            for a in doc.get("acls", ()))
        scram = {user: {m: ScramCredential.parse(c) for m, c in creds.items()}
                 for user, creds in doc.get("scram", {}).items()}
        return SecurityImage(acls, MappingProxyType(scram))

    def _publish(self, image: SecurityImage) -> None:
        doc = {
            "acls": [{"resource_type": b.pattern.resource_type.name, "name": b.pattern.name,
                      "pattern_type": b.pattern.pattern_type.name, **b.entry.to_json()}
                     for b in sorted(image.acls)],
            "scram": {u: {m: c.to_string() for m, c in creds.items()} for u, creds in image.scram.items()},
        }
        try:
            _atomic_write(self._path, json.dumps(doc, sort_keys=True).encode())
        except OSError as exc:
            log.warning("security metadata write failed path=%s error=%s", self._path, exc)
            raise KafkaError(ErrorCode.kafka_storage_error,
                             f"security metadata could not be written: {exc.strerror or exc}") from None
        self._image = image
        for listener in self._listeners:
            listener(image)

    @property
    def image(self) -> SecurityImage:
        return self._image

    def subscribe(self, listener: SecurityListener) -> None:
        self._listeners.append(listener)
        listener(self._image)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        try:
            self._publish(SecurityImage(self._image.acls | frozenset(bindings), self._image.scram))
        except KafkaError as e:
            return [e for _ in bindings]
        return [None for _ in bindings]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        deleted = [sorted(b for b in self._image.acls if f.matches(b)) for f in filters]
        gone = frozenset(b for found in deleted for b in found)
        if gone:
            self._publish(SecurityImage(self._image.acls - gone, self._image.scram))
        return deleted

    async def alter_scram(self, changes: Sequence[ScramChange]) -> list[KafkaError | None]:
        results: list[KafkaError | None] = []
        scram: Mapping[str, Mapping[str, ScramCredential]] = self._image.scram
        for change in changes:
            try:
                scram = apply_scram(scram, change)
                results.append(None)
            except KafkaError as e:
                results.append(e)
        if any(r is None for r in results):
            try:
                self._publish(SecurityImage(self._image.acls, MappingProxyType(dict(scram))))
            except KafkaError as e:
                return [r or e for r in results]
        return results
