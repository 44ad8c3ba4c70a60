"""The cost of checking every record of a produced batch (broker/log/validation.check_records).

    .venv/bin/python -m compat.bench.record_check [--repeat 20]

For 1 MiB of records with 10 B, 100 B and 1 KiB values (null keys, no headers, timestamps a few
milliseconds apart, as a producer's batch), uncompressed and in each codec, prints the time per
record and per MiB of records (decompression included for the compressed ones): the median of
`--repeat` runs of check_records on one batch, in this process, on one core. The Produce path
pays it on the event loop for small batches and in the record-check worker for larger ones.
"""

from __future__ import annotations

import argparse
import statistics
import time

from broker.config import LogConfig
from broker.log.validation import check_records
from protocol.compression import CompressionType
from protocol.records import NewRecord, build_batch

VALUE_SIZES = (10, 100, 1024)
MIB = 1 << 20


def measure(value_size: int, codec: CompressionType, repeat: int) -> tuple[int, float]:
    """(records in the batch, median seconds to check it)."""
    now = int(time.time() * 1000)
    count = MIB // (value_size + 8)  # about 1 MiB of records section
    batch = build_batch(
        [NewRecord(None, bytes([i % 251]) * value_size, (), now + i % 50) for i in range(count)],
        compression=codec,
    )
    config = LogConfig(max_message_bytes=4 * MIB)  # a MiB of records plus their framing
    check_records(batch, config, now)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        check_records(batch, config, now)
        times.append(time.perf_counter() - started)
    return count, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print("| codec | value | records/MiB | ns/record | ms/MiB |")
    print("|---|---|---|---|---|")
    for codec in CompressionType:
        for size in VALUE_SIZES:
            count, seconds = measure(size, codec, args.repeat)
            print(f"| {codec.name.lower()} | {size} B | {count:,} | {seconds / count * 1e9:,.0f} | {seconds * 1e3:.2f} |")


if __name__ == "__main__":
    main()
