"""The hub's files are its owner's alone, and a PostgreSQL connection string is never printed.

The database (and SQLite's -wal and -shm files), the key files and the export are read as another
Unix user (``nobody``, via runuser; needs root) while the hub runs: every one is refused, and a
file of the same directory made world-readable is read (the positive control).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import pathlib
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator

import pytest
from hub_support import HubProcess, call, cli

SECRET = "s3cr3t-pw"


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _as_nobody(path: pathlib.Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["runuser", "-u", "nobody", "--", "cat", str(path)], capture_output=True, timeout=60,
                          check=False)


@pytest.fixture
def shared_dir() -> Iterator[pathlib.Path]:
    """A directory every user may enter and list (0755), so only the files' own modes protect them."""
    if os.geteuid() != 0:
        pytest.skip("reading as another user needs root (make test runs as root in CI)")
    if shutil.which("runuser") is None:
        pytest.fail("runuser (util-linux) is missing")
    root = pathlib.Path(tempfile.mkdtemp(prefix="evalstop-hubfiles-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_another_user_reads_none_of_the_hubs_files(shared_dir: pathlib.Path) -> None:
    db = shared_dir / "hub.sqlite"
    with _umask(0o022):  # the usual umask: files would be world-readable unless made private
        for args in (("add-policy", "--db", str(db), "alpha", "tcp://10.9.8.7:8000"),
                     ("add-policy", "--db", str(db), "beta", "tcp://10.9.8.6:8000"),
                     ("add-station", "--db", str(db), "s1", "--key-file", str(shared_dir / "s1.key")),
                     ("add-station", "--db", str(db), "board", "--viewer", "--key-file", str(shared_dir / "board.key"))):
            done = cli("hub", *args)
            assert done.returncode == 0, done.stderr
        hub = HubProcess(str(db), (shared_dir / "board.key").read_text().strip(), shared_dir)
        hub.start()
        try:
            key = (shared_dir / "s1.key").read_text().strip()
            status, work = call(hub.url + "/v1/work", "POST", key=key)
            assert status == 200
            assert call(hub.url + f"/v1/assignments/{work['assignment_id']}/result", "POST", key=key,
                        body={"upload_id": "upload-0001", "score_a": 1.0, "score_b": 0.0})[0] == 200
            done = cli("hub", "export", "--db", str(db), "-o", str(shared_dir / "journal.jsonl"))
            assert done.returncode == 0, done.stderr
            files = [db, db.with_name("hub.sqlite-wal"), db.with_name("hub.sqlite-shm"), shared_dir / "s1.key",
                     shared_dir / "board.key", shared_dir / "journal.jsonl"]
            assert all(f.exists() for f in files), sorted(p.name for p in shared_dir.iterdir())
            for file in files:
                assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
                refused = _as_nobody(file)
                assert refused.returncode != 0 and b"Permission denied" in refused.stderr, file
                assert not refused.stdout, file
            control = shared_dir / "control.txt"
            control.write_text("readable by all")
            assert _as_nobody(control).stdout == b"readable by all"  # the test can see a leak
        finally:
            hub.stop()


def test_a_new_database_directory_is_the_owners_and_a_shared_one_is_refused(tmp_path: pathlib.Path) -> None:
    with _umask(0o022):
        done = cli("hub", "add-policy", "--db", str(tmp_path / "new" / "hub.sqlite"), "alpha", "sim://success=0.5")
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    done = cli("hub", "add-policy", "--db", str(shared / "hub.sqlite"), "alpha", "sim://success=0.5")
    assert done.returncode == 2 and "writable by other users" in done.stderr
    assert not (shared / "hub.sqlite").exists()
    existing = tmp_path / "old.key"
    existing.write_text("old")
    existing.chmod(0o644)
    done = cli("hub", "add-station", "--db", str(tmp_path / "new" / "hub.sqlite"), "s1", "--key-file", str(existing))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(existing.stat().st_mode) == 0o600  # an existing key file is tightened


@pytest.mark.parametrize("url", [f"postgresql://hub:{SECRET}@127.0.0.1:9/hub",  # nothing listens
                                 f"postgresql://hub:{SECRET}@127.0.0.1:9/hub?not_an_option=1",  # refused by libpq
                                 f"postgresql://hub:{SECRET}@[::1/hub"])  # unparsable
def test_a_connection_string_is_never_printed(url: str) -> None:
    env = {**os.environ, "EVALSTOP_HUB_DB": url}
    from_env = (("hub", "export"), ("hub", "serve", "--help"), ("hub", "--help"))
    # all at once: those that connect wait for the database the pool's 15 s (nothing listens) side by side
    with concurrent.futures.ThreadPoolExecutor(1 + len(from_env)) as pool:
        served = pool.submit(cli, "hub", "serve", "--db", url, "--port", "0")
        runs = {args: pool.submit(cli, *args, env=env) for args in from_env}
    done = served.result()
    assert done.returncode == 2, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert "holds a password" in done.stderr  # and the warning says where a password belongs
    for args, run in runs.items():
        done = run.result()
        assert SECRET not in done.stdout + done.stderr, args
        assert "holds a password" not in done.stderr  # from the environment: no other user reads it
