"""A slow disk for one broker process: the LD_PRELOAD library built from slowdisk.c, and the
environment and control file that switch it on and off while the broker runs.

    disk = SlowDisk(control_file, data_dir)
    env = disk.environment()            # give this to the broker process at start
    disk.set(write_ms=50)               # every write to a file under data_dir now takes 50 ms more
    disk.set(fail_errno=errno.EIO)      # every such write and fsync fails with EIO
    disk.set()                          # healthy again (read by the broker within 100 ms)

It works on any dynamically linked process, so the fault benchmark slows Samsa's Python and
Kafka's JVM the same way.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("slowdisk.c")
BUILD_DIR = Path(__file__).resolve().parents[2] / "compat" / "target" / "slowdisk"


def library() -> Path:
    """The shared library, compiled on first use (and again when slowdisk.c changes)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    lib = BUILD_DIR / f"slowdisk-{digest}.so"
    if not lib.exists():
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            raise RuntimeError("a C compiler is needed for the slow-disk fault: apt-get install gcc")
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_suffix(".tmp")
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(SOURCE), "-ldl"], check=True)
        tmp.replace(lib)
    return lib


class SlowDisk:
    def __init__(self, control_file: Path, data_dir: Path) -> None:
        self.control_file = control_file
        self.data_dir = data_dir

    def environment(self) -> dict[str, str]:
        self.set()
        return {
            "LD_PRELOAD": str(library()),
            "SAMSA_SLOWDISK_CONTROL": str(self.control_file),
            # the files inside the directory, not its neighbours (`broker-1.broker.log`)
            "SAMSA_SLOWDISK_PREFIX": str(self.data_dir.resolve()) + "/",
        }

    def set(self, write_ms: int = 0, fsync_ms: int = 0, fail_errno: int = 0) -> None:
        """Delay every write (and fsync) to a file under the data directory by this much; with
        `fail_errno`, make them fail with that error instead (errno.EIO: a failed disk)."""
        self.control_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.control_file.with_suffix(".tmp")
        tmp.write_text(f"{write_ms} {fsync_ms} {fail_errno}\n")
        tmp.replace(self.control_file)
