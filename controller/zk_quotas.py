"""Client quotas in ZooKeeper, where Kafka kept them: /config/clients/<client-id>,
/config/users/<user> and /config/users/<user>/clients/<client-id> (`<default>` for a default,
names URL-encoded), each `{"version": 1, "config": {"producer_byte_rate": "1024"}}`.

Mixed into `ZooKeeperController` (controller/zookeeper.py): any broker writes them (as Kafka's
AdminZkClient did), every broker watches them into its image. Watched kinds: `quota_roots`
(children of /config/clients or /config/users), `quota_user_clients` (children of
/config/users/<user>/clients) and `quota` (one entity's data).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from controller import zk_layout as L
from controller.model import ClusterImage
from controller.quotas import QuotaEntity, alter
from controller.zk_async import AsyncZk
from protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("samsa.controller")

QUOTA_CHILDREN = ("quota_roots", "quota_user_clients")


class ZkQuotas:
    if TYPE_CHECKING:
        _zk: AsyncZk
        _image: ClusterImage
        _quotas: dict[str, dict[str, float]]

        async def _read(self, kind: str, path: str) -> None: ...

        async def _wait_image(self, pred: Callable[[ClusterImage], bool], timeout_s: float) -> bool: ...

    def _quota_reads(self) -> list[Awaitable[None]]:
        """Every quota read `_load_all` makes."""
        return [
            self._read("quota_roots", L.CLIENT_QUOTAS),
            self._read("quota_roots", L.USER_QUOTAS),
            *(self._read("quota", path) for path in list(self._quotas)),
        ]

    def _apply_quota(self, kind: str, path: str, value: Any) -> list[Awaitable[None]]:
        if kind == "quota":
            if value is None:
                self._quotas.pop(path, None)
            else:
                self._quotas[path] = L.decode_quotas(value)
            return []
        children = {f"{path}/{c}" for c in value or ()}
        for known in [p for p in self._quotas if p.rsplit("/", 1)[0] == path and p not in children]:
            del self._quotas[known]
        reads: list[Awaitable[None]] = [self._read("quota", c) for c in children if c not in self._quotas]
        if path == L.USER_QUOTAS:
            reads += [self._read("quota_user_clients", f"{c}/clients") for c in children]
        return reads

    def _client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        return {L.quota_entity(p): dict(q) for p, q in sorted(self._quotas.items()) if q}

    async def alter_client_quotas(
        self, alterations: Sequence[tuple[QuotaEntity, Sequence[tuple[str, float | None]]]], *, validate_only: bool = False
    ) -> list[KafkaError | None]:
        results: list[KafkaError | None] = []
        wanted: dict[QuotaEntity, dict[str, float]] = {}
        for entity, ops in alterations:
            try:
                wanted[entity] = alter(entity, ops, wanted.get(entity, self._image.client_quotas.get(entity, {})))
                results.append(None)
            except KafkaError as e:
                results.append(e)
        if validate_only:
            return results
        for entity, quotas in wanted.items():
            path, data = L.quota_path(entity), L.encode_quotas(quotas)
            try:
                try:
                    await self._zk.set(path, data)
                except NoNodeError:
                    try:
                        await self._zk.create(path, data, makepath=True)
                    except NodeExistsError:
                        await self._zk.set(path, data)
            except KazooException as e:  # ZooKeeper unreachable: this entity and the rest fail
                log.warning("client quotas write failed entity=%s error=%r", entity, e)
                failed = KafkaError(ErrorCode.unknown_server_error, f"metadata write failed: {e!r}")
                done = list(wanted)[: list(wanted).index(entity)]
                return [
                    failed if r is None and entity_ not in done else r
                    for (entity_, _), r in zip(alterations, results, strict=True)
                ]
            log.info("client quotas altered entity=%s quotas=%s", entity, quotas)
        await self._wait_image(
            lambda image: all(dict(image.client_quotas.get(e, {})) == q for e, q in wanted.items()), 10
        )
        return results
