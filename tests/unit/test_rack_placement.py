"""Rack-aware replica placement (controller/placement.py): brokers sharing a host share a rack, and
no partition gets two replicas on one rack while there are as many racks as replicas."""

from __future__ import annotations

from controller.placement import assign_replicas
from protocol.types import BrokerId


def test_replicas_never_share_a_rack_when_racks_suffice() -> None:
    brokers = [BrokerId(b) for b in range(1, 7)]  # three hosts, two brokers each
    racks = {b: f"host-{(b - 1) // 2}" for b in brokers}
    for rf in (2, 3):
        plan = assign_replicas(brokers, racks, 24, rf)
        for partition, replicas in plan.items():
            assert len(set(replicas)) == rf
            assert len({racks[b] for b in replicas}) == rf, (partition, replicas)
        leaders = [replicas[0] for replicas in plan.values()]
        assert {leaders.count(b) for b in brokers} == {4}  # leadership spread evenly


def test_more_replicas_than_racks_still_places_every_replica() -> None:
    brokers = [BrokerId(b) for b in range(1, 5)]  # two hosts, two brokers each
    racks = {b: f"host-{(b - 1) // 2}" for b in brokers}
    for replicas in assign_replicas(brokers, racks, 8, 3).values():
        assert len(set(replicas)) == 3 and len({racks[b] for b in replicas}) == 2
