"""Reading a stopped or running broker's partition directories directly (tests own the broker)."""

from __future__ import annotations

from pathlib import Path

from protocol.records import BatchHeader, iter_batch_headers

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def segment_files(data_dir: Path, topic: str, partition: int = 0) -> list[Path]:
    return sorted((data_dir / f"{topic}-{partition}").glob("*.log"))


def stored_batches(data_dir: Path, topic: str, partition: int = 0) -> list[BatchHeader]:
    """Every batch header in the partition's segments, in offset order."""
    headers: list[BatchHeader] = []
    for path in segment_files(data_dir, topic, partition):
        buf = path.read_bytes()
        headers += [h for _, h in iter_batch_headers(buf, check_crc=True)]
    return headers


def stored_codecs(data_dir: Path, topic: str, partition: int = 0) -> set[str]:
    return {CODEC_NAMES[int(h.compression)] for h in stored_batches(data_dir, topic, partition)}


def codec_at(data_dir: Path, topic: str, offset: int, partition: int = 0) -> str:
    """The codec of the stored batch that holds `offset`."""
    for h in stored_batches(data_dir, topic, partition):
        if h.base_offset <= offset <= h.last_offset:
            return CODEC_NAMES[int(h.compression)]
    raise AssertionError(f"no stored batch of {topic}-{partition} holds offset {offset}")
