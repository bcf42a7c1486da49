"""Opening the hub's database: an SQLite file only its owner can read, a PostgreSQL pool whose
connection string is never printed (docs/hub_server.md).
"""

from __future__ import annotations

import logging
import os
import pathlib
import re
import sqlite3
import urllib.parse
from typing import Any

from ..session.errors import JournalError
from ..session.journal_files import DIRECTORY_MODE, check_directory, open_private, private_file
from .errors import HubError

__all__ = ["SQLITE_COMPANIONS", "describe", "is_postgres", "postgres_pool", "sqlite_connection", "scrub",
           "write_private"]

#: SQLite's files beside the database (write-ahead log and shared-memory index).
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def is_postgres(database: str) -> bool:
    return database.startswith(("postgresql://", "postgres://"))


def describe(database: str) -> str:
    """The database named without its password or options: ``postgresql://user@host:port/name``.

    >>> describe("postgresql://hub:s3cret@db.lab:5433/hub?sslmode=require")
    'postgresql://hub@db.lab:5433/hub'
    >>> describe("hub.sqlite")
    'hub.sqlite'
    """
    if not is_postgres(database):
        return database
    try:
        parts = urllib.parse.urlsplit(database)
        user = f"{parts.username}@" if parts.username else ""
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "postgresql://(unparsable connection string)"
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"


def scrub(text: str, database: str) -> str:
    """``text`` without the connection string ``database`` or its password (for an error message).

    >>> scrub('missing "=" after "postgresql://u:pw@h/db" in connection info', "postgresql://u:pw@h/db")
    'missing "=" after "postgresql://u@h/db" in connection info'
    """
    out = text.replace(database, describe(database))
    try:
        password = urllib.parse.urlsplit(database).password
    except ValueError:  # unparsable: whatever stands between "user:" and "@"
        found = re.search(r"://[^:/@]*:([^@]*)@", database)
        password = found.group(1) if found else None
    for secret in (password, urllib.parse.unquote(password) if password else None):
        if secret:
            out = out.replace(secret, "***")
    return out


_SCRUBBED: set[str] = set()


class _Scrubbed(logging.Filter):
    """Removes a connection string from the records of psycopg_pool's logger (it quotes libpq's errors)."""

    def __init__(self, database: str) -> None:
        super().__init__()
        self.database = database

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = scrub(record.getMessage(), self.database), None
        return True


def postgres_pool(database: str, size: int) -> Any:
    """An open psycopg_pool ``ConnectionPool`` of up to ``size`` connections to ``database``."""
    try:
        import psycopg
        from psycopg_pool import ConnectionPool, PoolTimeout
    except ImportError as err:  # pragma: no cover - the hub extra is installed by make venv
        raise HubError("PostgreSQL needs psycopg 3 and psycopg-pool: pip install 'evalstop[hub]'") from err
    try:  # a malformed connection string is refused here, before the pool's log could quote it
        psycopg.conninfo.conninfo_to_dict(database)
        pool = ConnectionPool(database, min_size=1, max_size=max(1, size), kwargs={"autocommit": True},
                              open=False, name="evalstop-hub")
    except psycopg.Error as err:
        raise HubError(f"cannot use the database {describe(database)}: {scrub(str(err), database)}") from None
    if database not in _SCRUBBED:  # once per connection string, however often a process opens it
        _SCRUBBED.add(database)
        logging.getLogger("psycopg.pool").addFilter(_Scrubbed(database))
    try:
        pool.open(wait=True, timeout=15.0)
    except (PoolTimeout, psycopg.Error) as err:
        pool.close()
        raise HubError(f"cannot connect to {describe(database)}: {scrub(str(err), database)}") from None
    return pool


def sqlite_connection(path: str) -> sqlite3.Connection:
    """The hub's SQLite database at ``path``, its files 0600 in a directory that is ours (see the
    module docstring), in WAL mode with ``synchronous=FULL``; ``:memory:`` is SQLite's in-memory
    database (benches and simulations), no file."""
    if path == ":memory:":
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA foreign_keys=ON")
        return conn
    file = pathlib.Path(path).expanduser()
    try:
        if not file.parent.exists():
            file.parent.mkdir(mode=DIRECTORY_MODE, parents=True)
        check_directory(file.parent)
        # created 0600 first: SQLite gives its -wal and -shm files the database's mode
        os.close(open_private(file, os.O_RDWR | os.O_CREAT))
        for companion in SQLITE_COMPANIONS:
            private_file(file.with_name(file.name + companion))
    except JournalError as err:
        raise HubError(f"hub database {str(file)!r}: {str(err).replace('journal ', '')}") from err
    except OSError as err:
        raise HubError(f"hub database {str(file)!r}: {err.strerror or err}") from err
    conn = sqlite3.connect(file, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def write_private(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only (0600 whatever the umask; an existing
    file is tightened), in a directory other users cannot write (an export, a key file)."""
    file = pathlib.Path(path).expanduser()
    try:
        check_directory(file.parent if str(file.parent) else pathlib.Path("."))
        fd = open_private(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    except JournalError as err:
        raise HubError(f"{str(file)!r}: {str(err).replace('journal ', '')}") from err
    except OSError as err:
        raise HubError(f"cannot write {str(file)!r}: {err.strerror or err}") from err
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
