"""Every example in ``evalstop --help``, in each verb's and sub-command's ``--help`` and in the
README's command blocks runs as written and exits 0.

The examples are extracted, not listed here: in a help text, the lines starting with
``evalstop`` of a block headed ``example:``/``examples...:``; in README.md, the lines starting
with ``evalstop`` of its ``sh`` blocks (continuations joined, comments dropped).  Each runs with
bash in a working directory that holds what the examples name: a copy of ``examples/`` (the
files ship with evalstop) and ``session_bag/``, a recorded session of
``examples/multitask_session.yaml`` (a real session driven through a simulated lab, written as a
bag, as ``evaluation_manager`` and ``evalstop record`` would).  The installed ``evalstop`` script
is first on ``PATH``.

Two examples run until told to stop; they are run as a user would and stopped the way they are
meant to stop, and must then exit 0:

* ``evalstop hub serve``: started in the background before the examples that talk to it (its
  port is replaced by a free one in every example of its group), stopped with Ctrl-C (SIGINT);
* ``evalstop record ... --until-finished``: a session_status saying FINISHED is published
  (latched, as the manager does) on the test's own DDS domain, and the recorder stops by itself.
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
import yaml
from runner_support import free_port, wait_for_port

from evalstop_ros.audit.synthetic import SimulatedLab, simulate_recording, write_bag
from evalstop_ros.cli.main import build_parser
from evalstop_ros.session import parse_config

REPO = pathlib.Path(__file__).resolve().parents[2]
HEADER = re.compile(r"^examples?\b.*:$")


def _parsers(parser: object, name: str = "evalstop") -> Iterator[tuple[str, object]]:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _parsers(child, f"{name} {sub}")


def help_examples() -> list[tuple[str, str]]:
    """``(where, command)`` of every example of every help text, in order, without repeats."""
    found: dict[str, str] = {}
    for name, parser in _parsers(build_parser(None)):
        block = False
        for line in parser.format_help().splitlines():  # type: ignore[attr-defined]
            if HEADER.match(line.strip()):
                block = True
            elif not line.strip():
                block = False
            elif block and line.strip().startswith("evalstop "):
                found.setdefault(line.strip(), f"{name} --help")
    return [(where, command) for command, where in found.items()]


def readme_examples() -> list[tuple[str, str]]:
    """``(where, command)`` of every ``evalstop`` command in README.md's ``sh`` blocks."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.split(r"\s+#", line.strip(), maxsplit=1)[0].strip()
            if command.startswith("evalstop "):
                out.append(("README.md", " ".join(command.split())))
    return out


def test_the_extraction_finds_the_examples() -> None:
    """Every verb's help has an example; the README's blocks have theirs."""
    helps = help_examples()
    verbs = {command.split()[1] for _, command in helps}
    assert verbs == {"analyze", "simulate", "step", "adastop", "audit", "report", "rank", "hub", "keys", "record"}
    readme = [command for _, command in readme_examples()]
    assert any(c.startswith("evalstop analyze examples/") for c in readme) and len(readme) >= 12


def test_help_cites_only_files_that_ship() -> None:
    """A repository file a help text names (examples/, docs/, config/) exists."""
    for name, parser in _parsers(build_parser(None)):
        text = parser.format_help()  # type: ignore[attr-defined]
        for path in re.findall(r"\b((?:examples|docs|config)/[\w./-]+\w)", text):
            assert (REPO / path).exists(), f"{name} --help cites {path}, which does not ship"
        assert "``" not in text and not re.search(r":(mod|func|class|data):", text), f"reST markup in {name} --help"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The directory the examples run in: examples/ and a recorded session_bag/."""
    root = tmp_path_factory.mktemp("examples-cwd")
    shutil.copytree(REPO / "examples", root / "examples")
    config = parse_config(yaml.safe_load((REPO / "examples" / "multitask_session.yaml").read_text()))
    lab = SimulatedLab({"policy_a": 0.3, "policy_b": 0.85})
    write_bag(root / "session_bag", simulate_recording(config, lab, session_id="multitask"))
    return root


def _environment(cache: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{pathlib.Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["EVALSTOP_CACHE_DIR"] = str(cache)  # STEP tables synthesized here, never in the user's cache
    return env


def _run(command: str, cwd: pathlib.Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def _stop(proc: subprocess.Popen[str], how: int | None = signal.SIGINT, timeout: float = 60.0) -> tuple[int, str]:
    if how is not None and proc.poll() is None:
        proc.send_signal(how)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"{proc.args} did not stop: {err[-2000:]}")
    return proc.returncode, err


def _run_examples(examples: list[tuple[str, str]], cwd: pathlib.Path, env: dict[str, str],
                  record_env: dict[str, str]) -> None:
    port = free_port()
    hub: subprocess.Popen[str] | None = None
    failures = []
    for where, command in examples:
        if command.startswith("evalstop hub"):
            command = command.replace("8765", str(port))
        if command.startswith("evalstop hub serve"):
            if hub is None:
                hub = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                wait_for_port(port, hub)
            continue
        if command.startswith("evalstop record"):
            status, err = _record(command, cwd, record_env)
            if status != 0:
                failures.append(f"{where}: {command}: exit {status}\n{err[-1500:]}")
            continue
        done = _run(command, cwd, env)
        if done.returncode != 0:
            failures.append(f"{where}: {command}: exit {done.returncode}\n{done.stderr[-1500:]}")
    if hub is not None:
        status, err = _stop(hub)
        if status != 0:
            failures.append(f"hub serve: exit {status} after Ctrl-C\n{err[-1500:]}")
    assert not failures, "\n\n".join(failures)


FINISHED = textwrap.dedent("""
    import sys, time
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from evalstop.msg import SessionStatus
    rclpy.init()
    node = rclpy.create_node("examples_finished_session")
    pub = node.create_publisher(SessionStatus, "session_status",
                                QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    msg = SessionStatus(session_id="examples", state=3, state_name="FINISHED")
    deadline = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < deadline:  # latched; re-sent, as DDS may lose one under load
        pub.publish(msg)
        rclpy.spin_once(node, timeout_sec=0.5)
    node.destroy_node()
    rclpy.shutdown()
""")


def _record(command: str, cwd: pathlib.Path, env: dict[str, str]) -> tuple[int, str]:
    """Run a ``record`` example; with --until-finished, a FINISHED status is published for it.

    The example records into a bag the later examples audit (``session_bag``): the recorded
    session's own bag is set aside first and put back afterwards, since a recording of one status
    message holds no session to audit.
    """
    args = shlex.split(command)
    out = cwd / args[args.index("-o") + 1]
    kept = cwd / f".{out.name}.kept"
    if out.exists():
        out.rename(kept)
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    publisher = None
    if "--until-finished" in args:
        publisher = subprocess.Popen([sys.executable, "-c", FINISHED, "90"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        status, err = _stop(proc, None, timeout=120)
    finally:
        if publisher is not None:
            publisher.terminate()
            publisher.wait(30)
    assert (out / "metadata.yaml").is_file(), err
    if kept.exists():
        shutil.rmtree(out)
        kept.rename(out)
    return status, err


def test_help_examples_run(workdir: pathlib.Path, tmp_path: pathlib.Path, ros_env: dict[str, str]) -> None:
    cwd = tmp_path / "cwd"
    shutil.copytree(workdir, cwd)
    _run_examples(help_examples(), cwd, _environment(tmp_path / "cache"), ros_env)


def test_readme_examples_run(workdir: pathlib.Path, tmp_path: pathlib.Path, ros_env: dict[str, str]) -> None:
    cwd = tmp_path / "cwd"
    shutil.copytree(workdir, cwd)
    _run_examples(readme_examples(), cwd, _environment(tmp_path / "cache"), ros_env)
