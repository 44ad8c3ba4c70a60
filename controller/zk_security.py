"""ACLs and SCRAM credentials in ZooKeeper, in ZooKeeper-mode Kafka's layout (a `SecurityStore`).

    /kafka-acl/<ResourceType>/<name>                    LITERAL patterns: {"version":1,"acls":[...]}
    /kafka-acl-extended/prefixed/<ResourceType>/<name>  PREFIXED patterns, the same JSON
    /kafka-acl-changes/acl_changes_<seq>                a change notification per write (as Kafka)
    /config/users/<sanitized user>                      {"version":1,"config":{"SCRAM-SHA-256":"salt=..."}}
    /config/changes/config_change_<seq>                 {"version":2,"entity_path":"users/<user>"}

Every broker reads the whole tree at start (`start` returns once it has) and keeps it current with
watches: each resource-type directory's children, each ACL znode, /config/users' children and each
user's znode; a watch firing re-reads its znode (with a new watch) and publishes a new
`SecurityImage` (coalesced, on the event loop). A lost session re-reads everything on reconnection.
Writes are read-modify-write with the znode's version (retried when another broker won), then the
change notification Kafka's own brokers would read.

The store has its own ZooKeeper session (kazoo, through controller/zk_async.py), so the cluster
controller's code stays as it is.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from controller.security_model import (
    ACL_CHANGES,
    ACL_EXTENDED_CHANGES,
    ACL_EXTENDED_ROOT,
    ACL_RESOURCE_TYPES,
    ACL_ROOT,
    CONFIG_CHANGES,
    USERS_PATH,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
    SecurityImage,
    acl_change_notification,
    acl_path,
    camel,
    decode_acls,
    decode_user_config,
    desanitize_user,
    encode_acls,
    encode_user_config,
    sanitize_user,
)
from controller.security_store import ScramChange, SecurityListener, apply_scram
from controller.zk_async import AsyncZk
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("samsa.security")
_WRITE_ATTEMPTS = 20


class ZkSecurityStore:
    def __init__(self, connect: str, session_timeout_ms: int, connection_timeout_ms: int,
                 tls: Mapping[str, Any] | None = None) -> None:
        self._connect = connect
        self._session_timeout_ms = session_timeout_ms
        self._connection_timeout_ms = connection_timeout_ms
        self._tls = dict(tls or {})
        self._zk: AsyncZk | None = None
        self._listeners: list[SecurityListener] = []
        self._acls: dict[ResourcePattern, tuple[AccessControlEntry, ...]] = {}
        self._scram: dict[str, dict[str, Any]] = {}
        self._image = SecurityImage(frozenset(), MappingProxyType({}))
        self._publish_scheduled = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._lost = False

    # -- reading ---------------------------------------------------------------------------------

    @property
    def image(self) -> SecurityImage:
        return self._image

    def subscribe(self, listener: SecurityListener) -> None:
        self._listeners.append(listener)
        listener(self._image)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        client = KazooClient(hosts=self._connect, timeout=self._session_timeout_ms / 1000,
                             connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
                             command_retry=None, **self._tls)
        self._zk = AsyncZk(client, loop)
        client.add_listener(self._zk.bridge(self._on_state))
        try:
            await self._zk.start(self._connection_timeout_ms / 1000)
        except Exception as e:  # noqa: BLE001 - one clear start-up error
            raise RuntimeError(f"cannot connect to ZooKeeper at {self._connect}: {e!r}") from None
        for root in (ACL_ROOT, ACL_EXTENDED_ROOT):
            for kind in ACL_RESOURCE_TYPES:
                await self._zk.ensure_path(f"{root}/{camel(kind.name)}")
        for path in (ACL_CHANGES, ACL_EXTENDED_CHANGES, USERS_PATH, CONFIG_CHANGES.rsplit("/", 1)[0]):
            await self._zk.ensure_path(path)
        await self._read_all()
        self._publish()

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._zk is not None:
            await self._zk.close()
            self._zk = None

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            self._spawn(self._read_all())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("security metadata read failed error=%r", task.exception())

    async def _read_all(self) -> None:
        for root, pattern_type in ((ACL_ROOT, PatternType.LITERAL), (ACL_EXTENDED_ROOT, PatternType.PREFIXED)):
            for kind in ACL_RESOURCE_TYPES:
                await self._read_acl_dir(f"{root}/{camel(kind.name)}", kind, pattern_type)
        await self._read_users()

    async def _read_acl_dir(self, path: str, kind: Any, pattern_type: PatternType) -> None:
        assert self._zk is not None
        watch = self._zk.bridge(lambda _e: self._spawn(self._read_acl_dir(path, kind, pattern_type)))
        try:
            names = await self._zk.children(path, watch=watch)
        except NoNodeError:
            names = []
        known = {p for p in self._acls if p.resource_type == kind and p.pattern_type == pattern_type}
        for name in names:
            pattern = ResourcePattern(kind, name, pattern_type)
            if pattern not in known:
                await self._read_acl(pattern)
        for pattern in known - {ResourcePattern(kind, n, pattern_type) for n in names}:
            self._acls.pop(pattern, None)
        self._schedule_publish()

    async def _read_acl(self, pattern: ResourcePattern) -> None:
        assert self._zk is not None
        watch = self._zk.bridge(lambda _e: self._spawn(self._read_acl(pattern)))
        try:
            data, _ = await self._zk.get(acl_path(pattern), watch=watch)
            self._acls[pattern] = decode_acls(data)
        except NoNodeError:
            self._acls.pop(pattern, None)
        self._schedule_publish()

    async def _read_users(self) -> None:
        assert self._zk is not None
        watch = self._zk.bridge(lambda _e: self._spawn(self._read_users()))
        names = await self._zk.children(USERS_PATH, watch=watch)
        users = {desanitize_user(n) for n in names}
        for user in users - set(self._scram):
            await self._read_user(user)
        for user in set(self._scram) - users:
            del self._scram[user]
        self._schedule_publish()

    async def _read_user(self, user: str) -> None:
        assert self._zk is not None
        watch = self._zk.bridge(lambda _e: self._spawn(self._read_user(user)))
        try:
            data, _ = await self._zk.get(f"{USERS_PATH}/{sanitize_user(user)}", watch=watch)
            self._scram[user] = decode_user_config(data)
        except NoNodeError:
            self._scram.pop(user, None)
        self._schedule_publish()

    def _schedule_publish(self) -> None:
        if not self._publish_scheduled:
            self._publish_scheduled = True
            asyncio.get_running_loop().call_soon(self._publish)

    def _publish(self) -> None:
        self._publish_scheduled = False
        acls = frozenset(AclBinding(p, e) for p, entries in self._acls.items() for e in entries)
        scram = MappingProxyType({u: MappingProxyType(dict(c)) for u, c in self._scram.items() if c})
        if acls == self._image.acls and scram == self._image.scram:
            return
        self._image = SecurityImage(acls, scram)
        for listener in self._listeners:
            listener(self._image)

    # -- writing ---------------------------------------------------------------------------------

    async def _update(self, path: str, change: Callable[[bytes | None], bytes | None]) -> bool:
        """Read-modify-write `path` with its version; `change` returns the new data, None to
        delete. Returns whether anything was written."""
        assert self._zk is not None
        for _ in range(_WRITE_ATTEMPTS):
            try:
                data, stat = await self._zk.get(path)
            except NoNodeError:
                data, stat = None, None
            new = change(data)
            if new == data:
                return False
            try:
                if stat is None:
                    assert new is not None
                    await self._zk.create(path, new, makepath=True)
                elif new is None:
                    await self._zk.delete(path, stat.version)
                else:
                    await self._zk.set(path, new, stat.version)
                return True
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
        raise KafkaError(ErrorCode.unknown_server_error, f"{path} kept changing; try again")

    async def _notify(self, prefix: str, data: bytes) -> None:
        assert self._zk is not None
        await self._zk.create(prefix, data, sequence=True)

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, []).append(b.entry)
        errors: dict[ResourcePattern, KafkaError | None] = {}
        for pattern, entries in by_pattern.items():
            def add(data: bytes | None, entries: list[AccessControlEntry] = entries) -> bytes | None:
                current = set(decode_acls(data))
                merged = current | set(entries)
                return data if merged == current else encode_acls(merged)
            try:
                if await self._update(acl_path(pattern), add):
                    await self._notify(*acl_change_notification(pattern))
                errors[pattern] = None
            except KafkaError as e:
                errors[pattern] = e
        return [errors[b.pattern] for b in bindings]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        matched = [sorted(b for b in self._image.acls if f.matches(b)) for f in filters]
        gone: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for found in matched:
            for b in found:
                gone.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in gone.items():
            def remove(data: bytes | None, entries: set[AccessControlEntry] = entries) -> bytes | None:
                left = set(decode_acls(data)) - entries
                return encode_acls(left) if left else None
            if await self._update(acl_path(pattern), remove):
                await self._notify(*acl_change_notification(pattern))
        return matched

    async def alter_scram(self, changes: Sequence[ScramChange]) -> list[KafkaError | None]:
        results: list[KafkaError | None] = []
        for change in changes:
            def apply(data: bytes | None, change: ScramChange = change) -> bytes | None:
                creds = apply_scram({change.user: decode_user_config(data)}, change)
                return encode_user_config(creds.get(change.user, {}), data)
            try:
                path = f"{USERS_PATH}/{sanitize_user(change.user)}"
                if await self._update(path, apply):
                    notice = {"version": 2, "entity_path": f"users/{sanitize_user(change.user)}"}
                    await self._notify(CONFIG_CHANGES, json.dumps(notice).encode())
                results.append(None)
            except KafkaError as e:
                results.append(e)
        return results
