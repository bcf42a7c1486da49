"""A journal only its owner can read (issue 19): directory 0700, files 0600 whatever the umask,
a directory other users can write refused, and nothing readable by another Unix user."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile

import pytest
import session_sim as sim

from evalstop_ros.session import EvaluationSession
from evalstop_ros.session.errors import JournalError
from evalstop_ros.session.journal_files import journal_directory

RATES = {"pi0": 0.3, "pi1": 0.7}


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def modes(directory: pathlib.Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir()}


@pytest.fixture
def open_parent():
    """A directory everybody may traverse (0755), so that only the journal directory's own mode
    keeps another user out (pytest's tmp_path lives under a 0700 directory)."""
    parent = pathlib.Path(tempfile.mkdtemp(prefix="evalstop-privacy-"))
    parent.chmod(0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


@pytest.mark.parametrize("mask", [0o000, 0o022])
def test_directory_0700_and_every_file_0600_whatever_the_umask(open_parent, mask):
    with umask(mask):
        directory = journal_directory(open_parent / "a" / "journals")
        with EvaluationSession.open(directory / "s1.db", sim.make_config(), "s1", durable=False) as session:
            session.start()
            for _ in range(4):
                sim.step(session, RATES)
            found = modes(directory)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert {"s1.db", "s1.db-wal", "s1.db-shm", "s1.db.head", "s1.db.lock"} <= set(found), found
    assert set(found.values()) == {0o600}, found


def test_an_existing_directory_of_ours_is_tightened_and_old_files_too(open_parent):
    directory = open_parent / "journals"
    with umask(0o022):
        directory.mkdir()
        with EvaluationSession.open(directory / "s1.db", sim.make_config(), "s1", durable=False) as session:
            session.start()
    for path in directory.iterdir():  # a journal of an earlier version: 0644 files
        path.chmod(0o644)
    assert journal_directory(directory) == directory and stat.S_IMODE(directory.stat().st_mode) == 0o700
    with EvaluationSession.open(directory / "s1.db", sim.make_config(), "s1", durable=False) as session:
        sim.step(session, RATES)
        assert set(modes(directory).values()) == {0o600}


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_a_directory_other_users_can_write_is_refused_before_anything_is_written(open_parent, mode):
    directory = open_parent / "shared"
    directory.mkdir()
    directory.chmod(mode)
    with pytest.raises(JournalError, match=r"is writable by other users \(mode [01]77[57]\)") as info:
        EvaluationSession.open(directory / "s1.db", sim.make_config(), "s1", durable=False)
    assert "\n" not in str(info.value)
    with pytest.raises(JournalError, match="writable by other users"):
        journal_directory(directory)  # not tightened: the directory is not ours to change
    assert list(directory.iterdir()) == []


READ_EVERYTHING = r"""
import os, sys
root = sys.argv[1]
outcomes = {}
for name in ("", "s1.db", "s1.db-wal", "s1.db-shm", "s1.db.head", "s1.db.lock"):
    path = os.path.join(root, name)
    try:
        if os.path.isdir(path):
            outcomes[name] = f"listed {sorted(os.listdir(path))}"
        else:
            with open(path, "rb") as f:
                outcomes[name] = f"read {len(f.read())} bytes"
    except PermissionError:
        outcomes[name] = "denied"
    except FileNotFoundError:
        outcomes[name] = "missing"
import json; print(json.dumps(outcomes))
"""


def as_nobody(directory: pathlib.Path) -> dict[str, str]:
    """What user nobody can list or read of the journal files in ``directory``."""
    command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c",
               READ_EVERYTHING, str(directory)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    return dict(json.loads(result.stdout))


def test_another_unix_user_reads_nothing_while_the_session_runs(open_parent):
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not os.access("/usr/bin/python3", os.X_OK):
        pytest.fail("this test switches to user nobody: it needs root, setpriv (util-linux) and /usr/bin/python3")
    directory = journal_directory(open_parent / "journals")
    with umask(0):
        session = EvaluationSession.open(directory / "s1.db", sim.make_config(), "s1", durable=False)
    with session:
        session.start()
        for _ in range(4):
            sim.step(session, RATES)
        assert (directory / "s1.db-wal").stat().st_size > 0  # the session is live: its WAL holds events
        assert set(as_nobody(directory).values()) == {"denied"}
        # the probe can see what is readable: the same files with the directory opened up
        directory.chmod(0o755)
        try:
            seen = as_nobody(directory)
        finally:
            directory.chmod(0o700)
        assert seen.pop("").startswith("listed ['s1.db'") and set(seen.values()) == {"denied"}, seen
