"""A real, small filesystem for storage-fault tests: a tmpfs of a few MiB mounted for one test.

`fill()` takes every free byte with a filler file (so the broker's next write fails with ENOSPC,
or is cut short), `free()` gives the space back. Mounting needs CAP_SYS_ADMIN: as root the test
mounts directly, otherwise through passwordless sudo; `mount_command()` says which, or why neither
is possible.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path


def mount_command() -> list[str] | str:
    """The command prefix that may mount (`[]` as root, `["sudo", "-n"]`), or why none."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    return "mounting a tmpfs needs root or passwordless sudo"


class SmallFilesystem:
    """A tmpfs of `size_bytes` at `path` (created), owned by the test's user."""

    def __init__(self, path: Path, size_bytes: int) -> None:
        prefix = mount_command()
        if isinstance(prefix, str):
            raise RuntimeError(prefix)
        self._prefix = prefix
        self.path = path
        self.size_bytes = size_bytes
        path.mkdir(parents=True, exist_ok=True)
        options = f"size={size_bytes},mode=0755,uid={os.getuid()},gid={os.getgid()}"
        subprocess.run([*prefix, "mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True)
        self._filler = path / "filler"

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self) -> int:
        """Write a filler file until the filesystem refuses more; returns its size."""
        chunk = b"\0" * (64 << 10)
        written = 0
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (len(chunk), 4096, 512, 1):
                while True:
                    try:
                        n = os.write(fd, chunk[:size])
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
                    if n == 0:
                        break
                    written += n
        finally:
            os.close(fd)
        return written

    def free(self) -> None:
        """Remove the filler file."""
        try:
            os.unlink(self._filler)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        subprocess.run([*self._prefix, "umount", "-l", str(self.path)], check=False)
