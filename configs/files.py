"""Writes that cannot half-happen, and reads that say what is wrong with a file.

write_atomic: the whole file or nothing (a temporary file beside it, synced, then os.replace), so
a crash or a full disk leaves the old file or the new one, never a torn one.
LineLog: an append-only file of whole lines (JSONL transcripts): a line that does not fit on the
disk is taken back, so the file ends with the last whole line.
Both raise OutputError (configs/errors.py) naming the path and saying "disk full" where it is.
Standard library only.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from configs.errors import InputFileError, input_error, output_error


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write `data` to `path` whole: readers see the old file or the new one, never part of one."""
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise output_error(e, path) from None


def make_dir(path: str | os.PathLike, what: str = "cannot create folder") -> Path:
    """mkdir -p, and check that the folder can be written; OutputError naming it if not."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".pkagent-probe-{uuid.uuid4().hex[:8]}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.unlink(probe)
    except OSError as e:
        raise output_error(e, path, what) from None
    return path


def read_text(path: str | os.PathLike) -> str:
    """A text file's contents (UTF-8); InputFileError naming the path if it cannot be read or decoded."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise input_error(e, path) from None
    except UnicodeDecodeError as e:
        raise InputFileError(f"{path}: not UTF-8 text (byte {e.start})") from None


class LineLog:
    """An append-only file of whole lines; `append` writes one line or, if the disk is full, none."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as e:
            raise output_error(e, self.path) from None

    def append(self, line: str) -> None:
        if self._fd is None:
            raise output_error(OSError(9, "closed"), self.path)
        raw = (line.rstrip("\n") + "\n").encode()
        start = os.fstat(self._fd).st_size
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as e:
            try:
                os.ftruncate(self._fd, start)  # take back the part of the line that got in
            except OSError:
                pass
            raise output_error(e, self.path) from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
