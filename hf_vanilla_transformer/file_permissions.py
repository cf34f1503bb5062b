"""The permissions of the files a model is saved in."""

import contextlib
import os
from pathlib import Path


def readable_weights(folder: str | Path) -> None:
    """Give the .safetensors files in `folder` the permissions the user's umask gives new files (-rw-r--r-- under
    022): safetensors 0.8 writes through a temporary file, which leaves them -rw------- (safetensors issue #782),
    so another user, or a container running as one, could not load the model that every other file of the run is
    readable beside."""
    mask = _umask()
    for path in Path(folder).glob("*.safetensors"):
        with contextlib.suppress(OSError):  # not the user's file (a shared folder): left as it is
            os.chmod(path, 0o666 & ~mask)


def _umask() -> int:
    """The process's umask: Linux's /proc says it; elsewhere it is set and put back (for an instant, in every
    thread)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0)
    os.umask(mask)
    return mask
