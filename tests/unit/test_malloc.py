"""broker.malloc: with glibc's thresholds set, a request's two large buffers (the frame and the
records kio copies out of it) reuse heap pages instead of faulting in new ones. Each case runs in
its own interpreter, since the thresholds are process-wide."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = 100
PROGRAM = f"""
import logging, resource, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
if sys.argv[1] == "tuned":
    from broker.malloc import keep_large_buffers
    keep_large_buffers()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range({REQUESTS}):
    frame = bytearray(1 << 20)  # a produce request of about 1 MB
    records = bytes(frame)  # its records, copied out by the decoder
    del frame, records
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / {REQUESTS})
"""


def faults_per_request(how: str) -> tuple[float, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, how], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    return float(done.stdout), done.stderr


def test_large_buffers_stay_in_the_heap_between_requests() -> None:
    assert platform.libc_ver()[0] == "glibc"  # the machines Samsa is built and tested on
    untuned, _ = faults_per_request("default")
    tuned, log = faults_per_request("tuned")
    assert untuned > 200, untuned  # 2 MiB of new pages (512) per request with glibc's defaults
    assert tuned < 50, tuned
    assert "malloc thresholds set libc=glibc-" in log, log
