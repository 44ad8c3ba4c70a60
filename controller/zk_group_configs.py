"""Group configs (KIP-848) in ZooKeeper: /config/groups/<group> (the name URL-encoded), each
`{"version": 1, "config": {"consumer.heartbeat.interval.ms": "6000"}}`, next to the topic and
broker configs.

Mixed into `ZooKeeperController` (controller/zookeeper.py): any broker writes them (as Kafka's
AdminZkClient wrote configs), every broker watches them into its image. Watched kinds:
`group_config_entities` (children of /config/groups) and `group_config` (one group's data).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NoNodeError

from controller import zk_layout as L
from controller.model import ClusterImage
from controller.zk_async import AsyncZk

log = logging.getLogger("samsa.controller")

GROUP_CONFIG_CHILDREN = ("group_config_entities",)


class ZkGroupConfigs:
    if TYPE_CHECKING:
        _zk: AsyncZk
        _group_configs: dict[str, dict[str, str]]

        async def _read(self, kind: str, path: str) -> None: ...

        async def _wait_image(self, pred: Callable[[ClusterImage], bool], timeout_s: float) -> bool: ...

    def _group_config_reads(self) -> list[Awaitable[None]]:
        """Every group config read `_load_all` makes."""
        return [
            self._read("group_config_entities", L.GROUP_CONFIGS),
            *(self._read("group_config", L.group_config_path(g)) for g in list(self._group_configs)),
        ]

    def _apply_group_config(self, kind: str, path: str, value: Any) -> list[Awaitable[None]]:
        if kind == "group_config":
            group = L.group_config_entity(path.rsplit("/", 1)[-1])
            if value is None:
                self._group_configs.pop(group, None)
            else:
                self._group_configs[group] = L.decode_config(value)
            return []
        groups = {L.group_config_entity(c) for c in value or ()}
        for gone in [g for g in self._group_configs if g not in groups]:
            del self._group_configs[gone]
        return [self._read("group_config", L.group_config_path(g)) for g in groups - set(self._group_configs)]

    def _group_config_image(self) -> dict[str, dict[str, str]]:
        return {g: dict(c) for g, c in sorted(self._group_configs.items()) if c}

    async def alter_group_configs(
        self, group: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        if validate_only:
            return
        path = L.group_config_path(group)
        if configs:
            data = L.encode_config(configs)
            try:
                await self._zk.set(path, data)
            except NoNodeError:
                await self._zk.create(path, data, makepath=True)
        else:
            try:
                await self._zk.delete(path)
            except NoNodeError:
                pass
        log.info("group configs altered group=%s configs=%s", group, dict(configs))
        want = dict(configs)
        await self._wait_image(lambda im: dict(im.group_configs.get(group, {})) == want, 10)
