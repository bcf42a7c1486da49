"""Which server serves which policy, sealed goals opened, and idempotent runs keyed by (session, trial, attempt).

The servers file's format is in docs/policy_runner.md.
"""

from __future__ import annotations

import collections
import os
import pathlib
import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import yaml

from ..session.goal_sealing import SealError, open_goal, read_runner_key, result_proof
from .errors import Category, RunnerError

if TYPE_CHECKING:
    from .client import ServerAddress

__all__ = ["GoalOpener", "RunLedger", "load_servers"]

T = TypeVar("T")


def load_servers(path: str | pathlib.Path) -> dict[str, ServerAddress]:
    """Read a servers file (see the module docstring); :class:`RunnerError` on any problem.

    >>> import tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "s.yaml"
    >>> _ = p.write_text("policy_servers: {good: {host: 127.0.0.1, port: 8001, api_key: k}}")
    >>> load_servers(p)["good"].uri
    'ws://127.0.0.1:8001'
    """
    from .client import ServerAddress, ServerBook  # the websocket client: not loaded by sim_robot's GoalOpener

    try:
        data = yaml.safe_load(pathlib.Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise RunnerError(f"cannot read servers file {path}: {err}") from err
    relays = data.get("hub_relays", []) if isinstance(data, dict) else []
    if not isinstance(relays, list) or not all(isinstance(r, str) and r.startswith(("ws://", "wss://")) for r in relays):
        raise RunnerError(f"{path}: `hub_relays` must be a list of hub URLs (ws://HOST:PORT or wss://...)")
    servers = data.get("policy_servers", {} if relays else None) if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not (servers or relays):
        raise RunnerError(f"{path}: expected a non-empty map `policy_servers: {{policy_id: {{host, port}}}}`")
    out = ServerBook(relays)  # also the relay locators of the hubs named there
    for policy, entry in servers.items():
        if not isinstance(entry, dict) or "host" not in entry or "port" not in entry:
            raise RunnerError(f"{path}: policy_servers.{policy} needs `host` and `port`")
        unknown = set(entry) - {"host", "port", "api_key", "api_key_env"}
        if unknown:
            raise RunnerError(f"{path}: policy_servers.{policy}: unknown keys {sorted(unknown)}")
        key = str(entry.get("api_key", ""))
        if "api_key_env" in entry:
            key = os.environ.get(str(entry["api_key_env"]), "")
            if not key:
                raise RunnerError(f"{path}: policy_servers.{policy}: environment variable "
                                  f"{entry['api_key_env']} is not set")
        port = entry["port"]
        if not isinstance(port, int) or not 0 < port < 65536:
            raise RunnerError(f"{path}: policy_servers.{policy}.port must be 1-65535; found {port!r}")
        out[str(policy)] = ServerAddress(str(entry["host"]), port, key)
    return out


class GoalOpener:
    """A runner's side of sealed goals: the policy a goal names, and the proof of its result.

    ``key_file``: the runner key file (``goal_key_file``; empty: no key, a sealed goal is refused).
    :class:`RunnerError` when the file cannot be used.
    """

    def __init__(self, key_file: str = "") -> None:
        try:
            self.key = read_runner_key(key_file) if key_file else None
        except SealError as err:
            raise RunnerError(str(err)) from err

    def identity(self, goal: Any) -> str:
        """The policy of ``goal`` (a ``RunTrial`` goal); :class:`RunnerError` (category ``sealed goal``, its detail
        the runner's own words) when it is sealed and does not open with this runner's key."""
        try:
            return open_goal(self.key, goal).identity
        except SealError as err:
            detail = "no runner key" if self.key is None else "it does not open with this runner's key"
            raise RunnerError(str(err), category=Category.SEALED, detail=detail) from err

    def prove(self, goal: Any, result: Any) -> Any:
        """``result`` with its ``proof`` for ``goal`` (unchanged for an unsealed goal, or one that does not open)."""
        try:
            opened = open_goal(self.key, goal)
        except SealError:
            return result
        if opened.seal_key:
            result.proof = list(result_proof(opened.seal_key, goal, result))
        return result


class _Entry(Generic[T]):
    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: T | None = None


class RunLedger(Generic[T]):
    """Results of recent runs by key; a key seen again waits for (or returns) the first run's result."""

    def __init__(self, capacity: int = 256) -> None:
        self._entries: collections.OrderedDict[Any, _Entry[T]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._capacity = capacity

    def claim(self, key: Any) -> tuple[bool, _Entry[T]]:
        """(True, entry) for a new key (the caller runs it and calls :meth:`finish`), else (False, entry)."""
        with self._lock:
            if key in self._entries:
                return False, self._entries[key]
            entry: _Entry[T] = _Entry()
            self._entries[key] = entry
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
            return True, entry

    @staticmethod
    def finish(entry: _Entry[T], result: T) -> None:
        entry.result = result
        entry.done.set()

    def wait(self, entry: _Entry[T], timeout: float | None = None) -> T | None:
        """The first run's result, or None if it is not done within ``timeout``."""
        return entry.result if entry.done.wait(timeout) else None
