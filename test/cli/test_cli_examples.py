"""Every example in ``evalstop --help``, in each verb's and sub-command's ``--help``, in the
README's and docs/'s command blocks runs as written and exits 0, and every YAML block of them loads
(a session configuration also validates).

The examples are extracted, not listed here: in a help text, the lines starting with
``evalstop`` of a block headed ``example:``/``examples...:``; in README.md, the lines starting
with ``evalstop`` of its ``sh`` blocks (continuations joined, comments dropped); in docs/*.md,
every command of the ``sh`` and ``bash`` blocks: an ``evalstop`` command runs, the others are
checked as :data:`CHECKED` says or left out for the reason :data:`NOT_RUN` gives (a command of
neither kind fails the test).  Each runs with bash in a working directory that holds what the
examples name: a copy of ``examples/`` (the files ship with evalstop, among them
``examples/session_bag/`` and ``examples/session.db``, a recorded session of
``examples/multitask_session.yaml`` and its journal, ``tools/example_session.py``) and that
session as ``session_bag/`` and ``session_2025-06-11/``, the names the README and
docs/recording.md record to.  The installed ``evalstop`` script is first on ``PATH``.

An example that is one ``evalstop`` command of plain words (no quoting, no operator or expansion
of the shell: bash would pass its words as they stand) of a verb that computes and exits runs in
this process, as :func:`evalstop_ros.cli.main.main` with those words, in its working directory
(the ``evalstop`` fixture of conftest.py): the parser, dispatch and exit status of the console
script, without an interpreter and its
imports per example (the three example tests: 76 -> 53 CPU-s side by side; docs/testing.md).
The rest runs with bash; the console script itself has its own test per verb (test_cli_main.py,
test_cli_output.py).

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
import traceback
from collections.abc import Callable, Iterator

import pytest
import yaml
from runner_support import free_port, wait_for_port

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


#: What a docs example names that does not exist here, and what the test uses instead.
DOCS_SUBSTITUTIONS = {
    "postgresql://hub@db/hub": "hub.sqlite",  # a PostgreSQL server (the hub tests run one; docs/hub.md)
    "http://hub:": "http://127.0.0.1:",  # the hub's host name
    "--host 0.0.0.0": "--host 127.0.0.1",  # every interface of a shared test machine
    "~/.ros/evalstop/s1.db": "examples/session.db",  # the journal of a session run on this machine
}
#: Commands of the docs' blocks that are checked, not run: their first words, and the check.
CHECKED = {
    "make": "the target exists in the Makefile (building it is what every test here runs on)",
    "ros2 launch": "the launch file ships in launch/ and declares every argument given (a session on a robot)",
    "ros2 run": "the executable is one the package installs (a node waits for its session)",
}
#: Commands of the docs' blocks that are left out, by their first words, and why.
NOT_RUN = {
    "cd": "moves into a ROS workspace",
    "git clone": "clones this repository",
    "echo": "writes a rosdep source under /etc (sudo)",
    "rosdep": "installs system packages",
    "colcon": "builds a ROS workspace (make ros builds the one the tests use)",
    "sudo": "creates a system user and its files (docs/deploying.md)",
    ".": "sources the ROS environment these tests run in",
    "python -m pytest": "runs the test suite itself",
    "ros2 bag record": "needs a live session; the QoS overrides file it names is checked to ship",
    "curl": "reads a hub's leaderboard; the hub tests fetch it (test_hub_leaderboard.py)",
    "evalstop audit journal.jsonl --against": "needs two stations' directories; test/hub/test_hub_audit.py runs it",
    "evalstop sim-eval examples/sim_eval.yaml --workers": "minutes of robosuite rollouts on Ray workers; "
                                                          "test/parallel/test_sim_eval.py runs a session",
    "evalstop audit sim_eval_out/s1.db": "audits that sim-eval's journal; test/parallel/test_sim_eval.py audits one",
    "evalstop report sim_eval_out/s1.db": "reports that sim-eval's journal; test/parallel/test_sim_eval.py reports one",
    "nice -n 10 python bench/sim_eval_scale.py": "a benchmark of minutes (docs/sim_eval.md gives its results)",
}


def docs_commands() -> list[tuple[str, str]]:
    """``(where, command)`` of every command in the ``sh``/``bash`` blocks of docs/*.md; ``where``
    is the file and the block's line (a block is a sequence a reader runs in one place)."""
    out = []
    for path in sorted((REPO / "docs").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for found in re.finditer(r"```(?:sh|bash)\n(.*?)```", text, flags=re.S):
            where = f"docs/{path.name}:{text.count(chr(10), 0, found.start()) + 1}"
            for line in found.group(1).replace("\\\n", " ").splitlines():
                command = re.split(r"(?:^|\s+)#", line.strip(), maxsplit=1)[0].strip()
                if command:
                    out.append((where, " ".join(command.split())))
    return out


def yaml_blocks() -> list[tuple[str, str]]:
    """``(where, text)`` of every ``yaml`` block of README.md and docs/*.md."""
    return [(path.name, block) for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
            for block in re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)]


def _kind(command: str, table: dict[str, str]) -> str | None:
    return next((key for key in sorted(table, key=len, reverse=True) if command == key or command.startswith(key + " ")),
                None)


def _check(command: str) -> str:
    """What is wrong with a :data:`CHECKED` command ("" if nothing)."""
    words = shlex.split(command)
    if words[0] == "make":
        targets = set(re.findall(r"^([\w.-]+):", (REPO / "Makefile").read_text(), flags=re.M))
        missing = [t for t in words[1:] if "=" not in t and t not in targets]
        return f"no Makefile target {missing}" if missing else ""
    if words[:2] == ["ros2", "launch"]:
        package, launch_file, *arguments = words[2:]
        path = REPO / "launch" / launch_file
        if package != "evalstop" or not path.is_file():
            return f"no launch file {package}/{launch_file}"
        declared = set(re.findall(r"DeclareLaunchArgument\(\s*['\"](\w+)['\"]",
                                  path.read_text() + (REPO / "evalstop_ros" / "launch_parts.py").read_text()))
        given = [a.split(":=")[0] for a in arguments if ":=" in a]
        undeclared = [a for a in given if a not in declared]
        return f"{launch_file} declares no argument {undeclared}" if undeclared else ""
    if words[:2] == ["ros2", "run"]:
        return "" if words[2] == "evalstop" and (REPO / "scripts" / words[3]).is_file() else f"no executable {words[3]}"
    return f"no check for {command}"


def test_the_docs_commands_are_run_checked_or_excused() -> None:
    """Every command of docs/ is an ``evalstop`` example (run below), passes its check, or is
    listed with its reason; and the files the left-out ones name ship."""
    problems = []
    for where, command in docs_commands():
        if command.startswith("evalstop ") and _kind(command, NOT_RUN) is None:
            continue
        if _kind(command, CHECKED):
            problem = _check(command)
            if problem:
                problems.append(f"{where}: {command}: {problem}")
        elif _kind(command, NOT_RUN) is None:
            problems.append(f"{where}: {command}: neither run, checked nor excused (add it to CHECKED or NOT_RUN)")
    assert not problems, "\n".join(problems)
    assert (REPO / "config" / "bag_qos_overrides.yaml").is_file()


def test_every_yaml_block_loads() -> None:
    """Each ``yaml`` block of the README and docs/ is YAML; a session configuration (it names
    ``policies``) also validates."""
    assert len(yaml_blocks()) >= 2
    for where, text in yaml_blocks():
        data = yaml.safe_load(text)
        assert isinstance(data, dict), f"{where}: {text[:200]}"
        if "policies" in data:
            parse_config(data, where)


def test_the_extraction_finds_the_examples() -> None:
    """Every verb's help has an example; the README's blocks have theirs."""
    helps = help_examples()
    verbs = {command.split()[1] for _, command in helps}
    assert verbs == {"analyze", "simulate", "step", "adastop", "audit", "report", "rank", "hub", "keys", "record",
                     "sim-eval"}
    readme = [command for _, command in readme_examples()]
    assert any(c.startswith("evalstop analyze examples/") for c in readme) and len(readme) >= 12


def test_help_cites_only_files_that_ship() -> None:
    """A repository file a help text names (examples/, docs/, config/) exists."""
    for name, parser in _parsers(build_parser(None)):
        text = parser.format_help()  # type: ignore[attr-defined]
        for path in re.findall(r"\b((?:examples|docs|config)/[\w./-]+\w)", text):
            assert (REPO / path).exists(), f"{name} --help cites {path}, which does not ship"
        assert "``" not in text and not re.search(r":(mod|func|class|data):", text), f"reST markup in {name} --help"


@pytest.mark.parametrize(("command", "here"), [
    ("evalstop rank examples/arena_ab.csv --model task --json", True),
    ("evalstop hub add-policy --db hub.sqlite pi0 sim://success=0.7", True),  # '=' inside a word is a letter
    ("evalstop hub export --db hub.sqlite -o journal.jsonl && evalstop hub analyze journal.jsonl --json", False),
    ("evalstop analyze examples/towel_like.csv --method step --alpha 0.05 | head -3", False),
    ("evalstop report 'my session.db' -o out", False),  # bash removes the quotes
    ("evalstop audit ~/.ros/evalstop/s1.db", False),  # bash expands the tilde
    ("evalstop analyze examples/*.csv --method step", False),  # ... and the glob
    ("evalstop hub serve --db hub.sqlite --port 8765", False),  # stays up until Ctrl-C
    ("evalstop hub station --hub http://127.0.0.1:8765 --key-file lab1.key --dir lab1 --trials 20", False),
    ("evalstop record -o quiet_bag --duration 5", False),  # a ROS node
    ("evalstop sim-eval examples/sim_eval.yaml --check", False),  # Ray workers without --check
    ("ros2 launch evalstop eval.launch.py robot:=sim", False),
])
def test_only_plain_commands_of_computing_verbs_run_in_process(command: str, here: bool) -> None:
    assert in_process(command) is here


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The directory the examples run in: examples/, and its recorded session as the bags the
    README and docs/recording.md record to."""
    root = tmp_path_factory.mktemp("examples-cwd")
    shutil.copytree(REPO / "examples", root / "examples")
    for name in ("session_bag", "session_2025-06-11"):
        shutil.copytree(REPO / "examples" / "session_bag", root / name)
    return root


def _environment(cache: pathlib.Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{pathlib.Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["EVALSTOP_CACHE_DIR"] = str(cache)  # STEP tables synthesized here, never in the user's cache
    return env


#: what makes bash do more than split a command into words (then the example runs in bash)
SHELL_SYNTAX = re.compile(r"[|&;<>()$`\\'\"*?\[\]{}~#!]")
#: verbs that stay up, start workers or talk to a server: they run as their own process
OWN_PROCESS = ("evalstop hub serve", "evalstop hub station", "evalstop record", "evalstop sim-eval")


def in_process(command: str) -> bool:
    """Whether ``command`` runs in this process: one ``evalstop`` command of plain words, of a
    verb that computes and exits (module docstring)."""
    return (command.startswith("evalstop ") and not SHELL_SYNTAX.search(command)
            and not any(command == verb or command.startswith(verb + " ") for verb in OWN_PROCESS))


#: the ``evalstop`` fixture of conftest.py: ``evalstop ARGS`` in this process
InProcess = Callable[..., subprocess.CompletedProcess[str]]


def _run(command: str, cwd: pathlib.Path, env: dict[str, str], evalstop: InProcess
         ) -> subprocess.CompletedProcess[str]:
    if in_process(command):
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(cwd)
            try:
                return evalstop(*command.split()[1:])
            except Exception:  # what the script would print, exiting 1 (and the next examples run)
                return subprocess.CompletedProcess(command, 1, "", traceback.format_exc())
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
                  record_env: dict[str, str], evalstop: InProcess) -> None:
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
        done = _run(command, cwd, env, evalstop)
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


def test_help_examples_run(workdir: pathlib.Path, tmp_path: pathlib.Path, ros_env: dict[str, str],
                           evalstop: InProcess) -> None:
    cwd = tmp_path / "cwd"
    shutil.copytree(workdir, cwd)
    _run_examples(help_examples(), cwd, _environment(tmp_path / "cache"), ros_env, evalstop)


def test_readme_examples_run(workdir: pathlib.Path, tmp_path: pathlib.Path, ros_env: dict[str, str],
                             evalstop: InProcess) -> None:
    cwd = tmp_path / "cwd"
    shutil.copytree(workdir, cwd)
    _run_examples(readme_examples(), cwd, _environment(tmp_path / "cache"), ros_env, evalstop)


def test_docs_examples_run(workdir: pathlib.Path, tmp_path: pathlib.Path, ros_env: dict[str, str],
                           evalstop: InProcess) -> None:
    """The ``evalstop`` commands of docs/ (with :data:`DOCS_SUBSTITUTIONS`), in order, each
    block in a fresh working directory."""
    blocks: dict[str, list[tuple[str, str]]] = {}
    for where, command in docs_commands():
        if command.startswith("evalstop ") and _kind(command, NOT_RUN) is None:
            for name, instead in DOCS_SUBSTITUTIONS.items():
                command = command.replace(name, instead)
            blocks.setdefault(where, []).append((where, command))
    assert sum(len(block) for block in blocks.values()) >= 10
    for k, examples in enumerate(blocks.values()):
        cwd = tmp_path / f"cwd{k}"
        shutil.copytree(workdir, cwd)
        _run_examples(examples, cwd, _environment(tmp_path / "cache"), ros_env, evalstop)
