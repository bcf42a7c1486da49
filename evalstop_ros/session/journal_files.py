"""Journal files only their owner can read: modes 0600 / 0700 whatever the umask, and no journal in a
directory other users can write (the journal holds the session's randomization key).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import stat

from .errors import JournalError

__all__ = ["COMPANIONS", "DIRECTORY_MODE", "FILE_MODE", "check_directory", "discard", "journal_directory",
           "open_private", "private_file"]

#: Mode of every journal file, and of a journal directory this module creates.
FILE_MODE = 0o600
DIRECTORY_MODE = 0o700
#: Suffixes of the files beside the database (SQLite's, the head file, the lock file).
COMPANIONS = ("-wal", "-shm", ".head", ".lock")


def check_directory(directory: str | os.PathLike[str]) -> None:
    """Refuse a journal directory other users can write (they could replace or remove its files).

    >>> import tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp()); d.chmod(0o777)
    >>> check_directory(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    evalstop_ros.session.errors.JournalError: journal directory '...' is writable by other users (mode 0777)...
    """
    path = pathlib.Path(directory)
    try:
        info = path.stat()
    except OSError as err:
        raise JournalError(f"journal directory {str(path)!r}: {err.strerror or err}") from err
    if not stat.S_ISDIR(info.st_mode):
        raise JournalError(f"journal directory {str(path)!r} is not a directory")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022:
        raise JournalError(f"journal directory {str(path)!r} is writable by other users (mode {mode:04o}): they could "
                           f"replace or remove the journal; use a directory of your own (chmod 700 {str(path)!r})")
    if info.st_uid != os.geteuid():
        raise JournalError(f"journal directory {str(path)!r} belongs to user id {info.st_uid}, not to this "
                           f"process's user ({os.geteuid()}); use a directory of your own")


def journal_directory(directory: str | os.PathLike[str]) -> pathlib.Path:
    """The directory of a node's journals, created 0700 (parents too), an existing one of ours
    that others may read tightened to 0700 (the file names are session ids), and checked
    (:func:`check_directory`: one others may write is refused, not changed)."""
    path = pathlib.Path(directory).expanduser()
    try:
        path.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        info = path.stat()
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and mode & 0o077 and not mode & 0o022:
            path.chmod(DIRECTORY_MODE)  # readable by others: tightened; writable by others: refused below
    except OSError as err:
        raise JournalError(f"journal directory {str(path)!r}: {err.strerror or err}") from err
    check_directory(path)
    return path


def discard(file: pathlib.Path) -> None:
    """Delete the files of a journal (database, -wal, -shm, head), wherever they exist."""
    for suffix in ("", "-wal", "-shm", ".head"):
        with contextlib.suppress(FileNotFoundError):
            file.with_name(file.name + suffix).unlink()


def private_file(path: pathlib.Path) -> None:
    """Make an existing journal file readable by its owner only (mode 0600)."""
    try:
        if stat.S_IMODE(path.stat().st_mode) != FILE_MODE:
            path.chmod(FILE_MODE)
    except FileNotFoundError:
        pass
    except OSError as err:
        raise JournalError(f"journal file {str(path)!r}: cannot make it private: {err.strerror or err}") from err


def open_private(path: pathlib.Path, flags: int) -> int:
    """``os.open`` of a journal file, created (or tightened to) mode 0600 whatever the umask."""
    fd = os.open(path, flags, FILE_MODE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd

