"""The project's errors: what a user can cause, as opposed to a bug in pkagent.

Each carries one line for the user (str(err)) that says what went wrong and where; the command
line (pkagent/cli.py) prints it and exits with code 2. Anything else that escapes a command is
a bug in pkagent and is reported as one. Standard library only.
"""

from __future__ import annotations

import errno
import os


class PkagentError(Exception):
    """Base of every error a user can cause; str(err) is one line meant for the user."""


class UsageError(PkagentError):
    """Bad arguments on the command line."""


class ConfigError(UsageError):
    """A config (file, key=value override, bundled name) that cannot be used."""


class InputFileError(PkagentError):
    """A file pkagent reads that is missing, unreadable or damaged."""


class OutputError(PkagentError):
    """A file or folder pkagent cannot write: not writable, not a folder, disk full."""


def _reason(err: OSError) -> str:
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "disk full"
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if err.errno == errno.EROFS:
        return "read-only file system"
    return err.strerror or str(err)


def describe(err: OSError, path: str | os.PathLike | None = None) -> str:
    """`PATH: disk full`, `PATH: permission denied`, ... for an OSError."""
    where = path if path is not None else (err.filename or "")
    return f"{where}: {_reason(err)}" if where else _reason(err)


def output_error(err: OSError, path: str | os.PathLike | None = None, what: str = "cannot write") -> OutputError:
    """The OutputError to raise for an OSError met while writing `path`."""
    return OutputError(f"{what} {describe(err, path)}")


def input_error(err: OSError, path: str | os.PathLike | None = None, what: str = "cannot read") -> InputFileError:
    """The InputFileError to raise for an OSError met while reading `path`."""
    if isinstance(err, FileNotFoundError):
        return InputFileError(f"{path if path is not None else err.filename}: not found")
    return InputFileError(f"{what} {describe(err, path)}")
