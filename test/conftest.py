"""ROS fixtures of the test suite: DDS isolation, the colcon build, node processes, a probe node.

The ROS tests (``test/nodes``, ``test/launch``) run real node executables from the colcon
install tree (``build/ros/install``) as processes, and talk to them over DDS from an
in-process probe node. They need the ROS environment of ``tools/ros/env.sh``, which
``make test`` sets up; elsewhere they are skipped (or, with ``EVALSTOP_ROS_REQUIRED=1`` as
``make test`` sets it, they fail).

Isolation from other test processes and other engineers on the same machine:

* ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``: nothing leaves the machine;
* ``ROS_DOMAIN_ID`` distinct for every concurrent test process of one ``make test``: each run
  gets a base (``EVALSTOP_TEST_DOMAIN_BASE``) and each pytest-xdist worker a block of domains
  above it (:func:`ros_domain_id`); a plain ``pytest`` derives it from the pid, and
  ``EVALSTOP_TEST_DOMAIN_ID`` overrides it;
* a fresh namespace per test (:func:`namespace`), so tests in one process never cross-talk;
* ``ROS_LOG_DIR`` under pytest's temporary directory.

Nothing here imports rclpy at module level: the non-ROS tests share this conftest.
"""

from __future__ import annotations

import fcntl
import functools
import http.server
import itertools
import os
import pathlib
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from nodes_support import LIB, NodeProcess

REPO = pathlib.Path(__file__).resolve().parents[1]
#: The ``make`` target that builds the ROS package of this run: ``ros`` (Kilted, .venv) or
#: ``ros-jazzy`` (.venv-jazzy); ``make test`` sets it with the environment of that distribution.
ROS_TARGET = os.environ.get("EVALSTOP_ROS_TARGET", "ros")
# LIB (nodes_support): the executables of the colcon prefix built by that target (EVALSTOP_ROS_INSTALL).
#: Log line format of every node process: easy to match (ros2/demos test_executables_tutorial).
LOG_FORMAT = "[{severity}] [{name}]: {message}"

_namespaces = itertools.count(1)


#: Domains one test process uses: its own and up to three more above it (the hub's ROS stations
#: of test/hub/test_hub_ros_stations.py and test_hub_ros_netns.py, one domain each).
DOMAINS_PER_PROCESS = 4
#: Blocks of :data:`DOMAINS_PER_PROCESS` in 1..100: the domain ids Fast DDS can use on Linux are
#: 0..101 (higher ones reach the ephemeral port range; docs.ros.org, "About Domain ID"), 0 is the
#: default everyone else uses.
DOMAIN_BLOCKS = 25


def _xdist_worker() -> int | None:
    """The index of this pytest-xdist worker (``PYTEST_XDIST_WORKER=gw3`` -> 3), None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def ros_domain_id() -> int:
    """The DDS domain of this test process, in 1..97 (it uses this one and the three above it).

    ``EVALSTOP_TEST_DOMAIN_ID`` wins. Otherwise the block of the run plus the pytest-xdist worker
    index: ``make test`` gives each of its concurrent pytest runs a base of its own
    (``EVALSTOP_TEST_DOMAIN_BASE``, blocks far enough apart for its workers), so no two of its
    processes share a domain. A developer's plain ``pytest`` has no base: the block comes from
    the pid of the run (the controller's, ``os.getppid()``, in a worker), so concurrent runs of
    different engineers differ unless their pids collide modulo 25, and the workers of one run
    always differ. (Namespaces carry the pid too, so even a shared domain never cross-talks.)
    """
    override = os.environ.get("EVALSTOP_TEST_DOMAIN_ID")
    if override:
        return int(override)
    worker = _xdist_worker()
    base = os.environ.get("EVALSTOP_TEST_DOMAIN_BASE")
    if base:
        first_block = (int(base) - 1) // DOMAINS_PER_PROCESS
    else:
        first_block = (os.getppid() if worker is not None else os.getpid()) % DOMAIN_BLOCKS
    return 1 + DOMAINS_PER_PROCESS * ((first_block + (worker or 0)) % DOMAIN_BLOCKS)


def _ros_importable() -> str:
    """Why the ROS environment is unusable in this process ("" if usable)."""
    try:
        with warnings.catch_warnings():
            # rosidl_generator_py (imported by rclpy on first use of a message type) imports
            # lark-parser 0.12, which imports `sre_parse` and `sre_constants`, deprecated since 3.11.
            warnings.filterwarnings("ignore", "module 'sre_(parse|constants)' is deprecated", DeprecationWarning)
            import rosidl_generator_py  # noqa: F401
        import rclpy  # noqa: F401
        from evalstop.msg import SessionStatus  # noqa: F401
    except ImportError as err:
        return f"{err} (run `make test`, or pytest under `. tools/ros/env.sh .venv build/ros/install`)"
    return ""


@pytest.fixture(scope="session")
def ros_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of every ROS process of this test session (also applied to ``os.environ``).

    Skips the test when rclpy or the built interfaces cannot be imported, unless
    ``EVALSTOP_ROS_REQUIRED`` is set (``make test``), where that is a failure. Brings the
    colcon build up to date first (``make ros``: a no-op when nothing changed), under a file
    lock so that parallel workers do not build at once.
    """
    problem = _ros_importable()
    if problem:
        if os.environ.get("EVALSTOP_ROS_REQUIRED"):
            pytest.fail(f"ROS environment required but unusable: {problem}")
        pytest.skip(f"ROS environment unavailable: {problem}")
    if LIB.resolve().is_relative_to(REPO / "build"):  # our own build, not a ROS workspace's (colcon test)
        lock_path = REPO / "build" / f"{ROS_TARGET}.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with lock_path.open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            done = subprocess.run(["make", "-s", ROS_TARGET], cwd=REPO, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"`make {ROS_TARGET}` failed:\n{done.stdout}\n{done.stderr}")
    log_dir = tmp_path_factory.mktemp("roslog")
    updates = {
        "ROS_DOMAIN_ID": str(ros_domain_id()),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_LOG_DIR": str(log_dir),
        # the runners' private error logs ($ROS_HOME/evalstop/runner) too
        "ROS_HOME": str(tmp_path_factory.mktemp("ros-home")),
        "RCUTILS_CONSOLE_OUTPUT_FORMAT": LOG_FORMAT,
        "RCUTILS_COLORIZED_OUTPUT": "0",
        "RCUTILS_LOGGING_BUFFERED_STREAM": "0",
        "PYTHONUNBUFFERED": "1",
        # STEP tables synthesized by a node go to a throw-away cache, never the user's
        "EVALSTOP_CACHE_DIR": str(tmp_path_factory.mktemp("step-cache")),
    }
    os.environ.update(updates)
    return dict(os.environ)


@pytest.fixture
def namespace() -> str:
    """A ROS namespace no other test of this process uses, e.g. ``/t4711_3``."""
    return f"/t{os.getpid()}_{next(_namespaces)}"


# -- node processes --------------------------------------------------------------------------
# NodeProcess lives in test/nodes/nodes_support.py, importable by the tests of every directory.
def params_file(path: pathlib.Path, params: dict[str, Any]) -> pathlib.Path:
    """Write ``params`` as a ROS 2 parameter file for any node (``/**``); returns ``path``."""
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": params}}, sort_keys=True))
    return path


@pytest.fixture
def start_node(ros_env: dict[str, str], tmp_path: pathlib.Path, namespace: str
               ) -> Iterator[Callable[..., NodeProcess]]:
    """Factory: ``start_node("sim_robot", params={...}, ros_args=[...])`` -> :class:`NodeProcess`.

    ``executable`` is an installed node, or the path of a test peer script (``*.py``).

    The node runs in the test's namespace with this session's ROS environment; every process
    still running at the end of the test is stopped with SIGINT, all at once (then SIGKILL).
    """
    started: list[NodeProcess] = []
    serial = itertools.count(1)

    def start(executable: str, *, params: dict[str, Any] | None = None, ros_args: list[str] | None = None,
              args: list[str] | None = None, env: dict[str, str] | None = None, ns: str | None = None,
              stdin: int | None = subprocess.DEVNULL) -> NodeProcess:
        n = next(serial)
        # an installed executable, or a test peer script (a path ending in .py) run by this Python
        program = [sys.executable, executable] if executable.endswith(".py") else [str(LIB / executable)]
        name = pathlib.Path(executable).stem
        cmd = [*program, *(args or []), "--ros-args", "-r", f"__ns:={ns or namespace}"]
        if params:
            cmd += ["--params-file", str(params_file(tmp_path / f"{name}-{n}.params.yaml", params))]
        cmd += ros_args or []
        node = NodeProcess(name, cmd, {**ros_env, **(env or {})}, tmp_path / f"{name}-{n}.log", stdin)
        started.append(node)
        return node

    yield start
    for node in started:  # all at once: each node's shutdown overlaps the others'
        node.interrupt()
    for node in started:
        node.finish()


# -- in-process probe node -------------------------------------------------------------------
class RosProbe:
    """An in-process node (own rclpy Context) to publish, subscribe and call services in tests."""

    def __init__(self, namespace: str) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("probe", namespace=namespace, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def close(self) -> None:
        """Destroy the node and shut the context down."""
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    def spin_for(self, seconds: float) -> None:
        """Process callbacks for ``seconds``."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.executor.spin_once(timeout_sec=min(0.05, max(0.0, deadline - time.monotonic())))

    def spin_until(self, predicate: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
        """Process callbacks until ``predicate()`` is truthy; return its value (fail on timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout} s waiting for {what}")
            self.executor.spin_once(timeout_sec=0.05)

    def run_goal(self, client: Any, goal: Any, timeout: float = 30.0,
                 feedback_callback: Callable[[Any], None] | None = None) -> Any:
        """Send an action ``goal`` with ``client``, re-sent while DDS drops the goal response (for up
        to 30 s, as the manager does), and return its result (fail after ``timeout`` s without it)."""
        deadline = time.monotonic() + 30.0
        while True:
            sent = client.send_goal_async(goal, feedback_callback=feedback_callback)
            try:
                handle = self.spin_until(lambda s=sent: s.done() and s.result(), 3.0, "goal response")
                break
            except pytest.fail.Exception:
                assert time.monotonic() < deadline, "no goal response within 30 s, re-sent every 3 s"
        done = handle.get_result_async()
        self.spin_until(done.done, timeout, "result")
        return done.result().result

    def hear(self, topic: str = "session_status", timeout: float = 60.0) -> None:
        """Spin until a (latched) ``SessionStatus`` arrives on ``topic``: the probe then knows the manager.

        Start the manager, hear it, then start the runner: the session cannot begin before the
        probe's subscriptions matched, so a fast session cannot end (and a volatile topic's
        messages cannot pass) before the probe hears them.
        """
        from evalstop.msg import SessionStatus

        from evalstop_ros import qos

        heard = self.collect(SessionStatus, topic, qos.STATUS_QOS)
        self.spin_until(lambda: heard, timeout, f"the manager's first {topic}")

    def collect(self, msg_type: Any, topic: str, qos: Any) -> list[Any]:
        """Subscribe to ``topic``; the returned list fills up as messages arrive."""
        received: list[Any] = []
        self.node.create_subscription(msg_type, topic, received.append, qos)
        return received

    def call(self, srv_type: Any, name: str, request: Any, timeout: float = 20.0, *,
             resend_after: float | None = 5.0) -> Any:
        """Call service ``name`` (waiting for it to appear) and return the response.

        ``resend_after``: send the request again when no response came within this many
        seconds (``None``: never, for a request that is not idempotent).  Fast DDS drops
        responses under load, right after discovery especially, and after a server was killed
        and restarted the client counts the dead server as ready until discovery notices.
        """
        client = self.node.create_client(srv_type, name)
        self.spin_until(client.service_is_ready, timeout, f"service {name}")
        deadline = time.monotonic() + timeout
        while True:
            future = client.call_async(request)
            wait = min(resend_after or timeout, max(0.0, deadline - time.monotonic()))
            try:
                self.spin_until(future.done, wait, f"response of {name}")
                break
            except pytest.fail.Exception:
                if resend_after is None or time.monotonic() >= deadline:
                    raise
        self.node.destroy_client(client)
        return future.result()

    def set_parameters(self, node_name: str, parameters: list[Any], timeout: float = 20.0,
                       resend_after: float = 5.0) -> Any:
        """Set ``parameters`` on ``node_name``; re-sent when the response is lost. The results."""
        from rclpy.parameter_client import AsyncParameterClient

        client = AsyncParameterClient(self.node, node_name)
        self.spin_until(client.services_are_ready, timeout, f"parameter services of {node_name}")
        deadline = time.monotonic() + timeout
        while True:
            future = client.set_parameters(parameters)
            try:
                self.spin_until(future.done, min(resend_after, max(0.0, deadline - time.monotonic())),
                                f"set_parameters on {node_name}")
                return future.result().results
            except pytest.fail.Exception:
                if time.monotonic() >= deadline:
                    raise


@pytest.fixture
def probe(ros_env: dict[str, str], namespace: str) -> Iterator[RosProbe]:
    """A :class:`RosProbe` in the test's namespace."""
    node = RosProbe(namespace)
    try:
        yield node
    finally:
        node.close()



# -- headless Chromium (the report and the hub's leaderboard page) ------------------------------
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars")


@pytest.fixture(scope="session")
def chromium() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``chromium(profile_dir, *args)``: run Debian's headless Chromium (``tools/install_chromium.sh``).

    Skips without it, unless ``EVALSTOP_REPORT_REQUIRED`` is set (``make test``): then a failure.
    """
    import shutil

    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if found is None:
        if os.environ.get("EVALSTOP_REPORT_REQUIRED"):
            pytest.fail(f"{CHROMIUM} is missing but EVALSTOP_REPORT_REQUIRED is set; run tools/install_chromium.sh")
        pytest.skip(f"headless Chromium not found ({CHROMIUM}); run tools/install_chromium.sh (make test does)")
    binary = found

    def run(profile: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120, check=False)

    return run


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def serve_directory() -> Iterator[Callable[[pathlib.Path], str]]:
    """Factory: serve a directory over HTTP on localhost (for headless Chromium); returns its URL.

    Every server started is shut down at the end of the test.
    """
    servers: list[tuple[http.server.ThreadingHTTPServer, threading.Thread]] = []

    def serve(root: pathlib.Path) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(10)
