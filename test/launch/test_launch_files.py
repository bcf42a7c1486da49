"""The launch files, checked from their syntax tree: what holds for Humble too, where no test can run them.

``test_ros2_launch.py`` runs every launch file for real under ROS 2 Jazzy's launch (3.4.3) and Kilted's.
Humble's launch (1.0.7) is older still and has no wheels to test with, so its API is checked here:
imports are limited to launch APIs that exist in Humble, Jazzy and Kilted (:data:`PORTABLE_API`; Humble
lacks the substitutions :data:`HUMBLE_LACKS`), and no ``PathJoinSubstitution`` joins a nested list (a
Kilted feature, ros2/launch #838, that loads neither in Humble nor in Jazzy). Every executable, parameter
and launch argument they name must exist: executables in ``scripts/`` (installed by CMakeLists.txt),
parameters among those the node declares (``declare(self, "name", ...)`` in ``evalstop_ros/nodes/``),
arguments declared with ``DeclareLaunchArgument``. The launch files share ``evalstop_ros/launch_parts.py``
(``evalstop_node``, ``session_arguments``), read here as the launch files' own text.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
LAUNCH_FILES = sorted((REPO / "launch").glob("*.launch.py"))
#: The module of parts the launch files share (``from evalstop_ros.launch_parts import ...``).
LAUNCH_PARTS = REPO / "evalstop_ros" / "launch_parts.py"

#: Public launch API present (and not deprecated) in Humble, Jazzy and Kilted.
PORTABLE_API = {
    "launch": {"LaunchDescription"},
    "launch.actions": {"DeclareLaunchArgument", "EmitEvent", "GroupAction", "IncludeLaunchDescription",
                       "OpaqueFunction", "RegisterEventHandler", "SetEnvironmentVariable", "Shutdown"},
    # not LaunchConfigurationEquals: deprecated since Iron (a UserWarning at launch time)
    "launch.conditions": {"IfCondition", "UnlessCondition"},
    "launch.event_handlers": {"OnProcessExit", "OnProcessStart"},
    "launch.events": {"Shutdown"},
    "launch.substitutions": {"LaunchConfiguration", "PathJoinSubstitution", "PythonExpression", "TextSubstitution"},
    "launch_ros.actions": {"Node", "PushRosNamespace"},
    "launch_ros.parameter_descriptions": {"ParameterValue"},
    "launch_ros.substitutions": {"FindPackageShare"},
}


#: launch.substitutions of Jazzy (launch 3.4.3) that Humble (launch 1.0.7) does not have (their
#: ``__all__``, compared): never use them in a launch file.
HUMBLE_LACKS = {"AllSubstitution", "AnySubstitution", "EqualsSubstitution", "FileContent", "IfElseSubstitution",
                "LaunchLogDir", "NotEqualsSubstitution"}


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == name]


def _kwarg(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _const(node: ast.expr | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _declared_parameters(executable: str) -> set[str]:
    """Parameters the node behind ``scripts/<executable>`` declares (also in the sibling node modules
    it imports, directly or through another, e.g. the runner parameters of both managers)."""
    module = re.search(r"from evalstop_ros\.nodes\.(\w+) import main", (REPO / "scripts" / executable).read_text())
    assert module, f"scripts/{executable} does not call a node's main"
    trees: dict[str, ast.Module] = {}
    todo = [module.group(1)]
    while todo:
        name = todo.pop()
        if name in trees or name == "_common":
            continue
        trees[name] = ast.parse((REPO / "evalstop_ros" / "nodes" / f"{name}.py").read_text())
        todo += [n.module for n in ast.walk(trees[name]) if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module]
    declared = {str(_const(c.args[1])) for t in trees.values() for c in _calls(t, "declare") if len(c.args) > 1}
    # a parameter without a default (a string array: rclpy cannot type an empty list) is declared directly
    return declared | {str(_const(n.args[0])) for t in trees.values() for n in ast.walk(t) if isinstance(n, ast.Call)
                       and getattr(n.func, "attr", None) == "declare_parameter" and n.args}


def _tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _arguments(tree: ast.AST) -> dict[str, ast.Call]:
    """The launch arguments ``tree`` declares, with those of ``session_arguments()`` where it calls it."""
    calls = _calls(tree, "DeclareLaunchArgument")
    if _calls(tree, "session_arguments"):
        calls += _calls(_tree(LAUNCH_PARTS), "DeclareLaunchArgument")
    return {str(_const(c.args[0])): c for c in calls}


def _nodes(tree: ast.AST) -> list[tuple[str, ast.Call]]:
    """``(executable, call)`` of every node ``tree`` starts: ``Node(executable=...)`` or
    ``evalstop_node(executable, ...)`` (launch_parts: ``Node(package='evalstop', name=executable, ...)``)."""
    return [(str(_const(_kwarg(c, "executable"))), c) for c in _calls(tree, "Node")] + \
        [(str(_const(c.args[0])), c) for c in _calls(tree, "evalstop_node")]


def _node(tree: ast.AST, executable: str) -> ast.Call:
    return next(c for name, c in _nodes(tree) if name == executable)


def _typed(call: ast.Call) -> dict[str, str]:
    """The parameters a launch_parts call gives, as the ``ParameterValue`` text it stands for:
    ``typed('a', T)`` (one, unnamed: key ``""``) or ``as_parameters(T, 'a', 'b')``; ``arm_runners(arms)``
    gives the manager's ``runners`` (several arms)."""
    name = getattr(call.func, "id", None)
    if name == "arm_runners":
        return {"runners": ast.unparse(call)}
    if name == "typed":
        kind = ast.unparse(call.args[1]) if len(call.args) > 1 else "str"
        return {"": f"ParameterValue(LaunchConfiguration({ast.unparse(call.args[0])}), value_type={kind})"}
    assert name == "as_parameters", ast.unparse(call)
    kind = ast.unparse(call.args[0])
    return {str(_const(a)): f"ParameterValue(LaunchConfiguration({ast.unparse(a)}), value_type={kind})"
            for a in call.args[1:]}


def _parameters(node: ast.Call) -> dict[str, str]:
    """Parameter name -> the text of its value, of a node's one parameter dict (``typed``/``as_parameters``
    resolved)."""
    params = _kwarg(node, "parameters")
    assert isinstance(params, ast.List) and len(params.elts) == 1 and isinstance(params.elts[0], ast.Dict), \
        "parameters must be one dict (checkable)"
    out: dict[str, str] = {}
    for key, value in zip(params.elts[0].keys, params.elts[0].values):
        if key is None:  # **as_parameters(...)
            assert isinstance(value, ast.Call)
            out.update(_typed(value))
        elif isinstance(value, ast.Call) and getattr(value.func, "id", None) == "typed":
            out[str(_const(key))] = _typed(value)[""]
        else:
            out[str(_const(key))] = ast.unparse(value)
    return out


def _configurations(tree: ast.AST) -> set[str]:
    """The launch arguments ``tree`` reads: ``LaunchConfiguration('a')``, ``typed('a')``, ``as_parameters(T, 'a')``."""
    return ({str(_const(c.args[0])) for c in [*_calls(tree, "LaunchConfiguration"), *_calls(tree, "typed")]}
            | {str(_const(a)) for c in _calls(tree, "as_parameters") for a in c.args[1:]})


@pytest.mark.parametrize("path", [*LAUNCH_FILES, LAUNCH_PARTS], ids=lambda p: p.name)
def test_imports_are_portable(path: pathlib.Path) -> None:
    tree = _tree(path)
    parts = {"evalstop_ros.launch_parts": set(ast.literal_eval(next(
        n.value for n in _tree(LAUNCH_PARTS).body if isinstance(n, ast.Assign)
        and getattr(n.targets[0], "id", None) == "__all__")))} if path != LAUNCH_PARTS else {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            pytest.fail(f"{path.name}: use `from launch... import ...`, found `import {node.names[0].name}`")
        if isinstance(node, ast.ImportFrom):
            allowed = {**PORTABLE_API, **parts}.get(node.module or "")
            assert allowed is not None, f"{path.name}: imports from {node.module!r}"
            for alias in node.names:
                assert alias.name in allowed, f"{path.name}: {node.module}.{alias.name} is not in PORTABLE_API"
    if path != LAUNCH_PARTS:
        assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description" for n in tree.body)


def test_launch_parts_node_is_the_package_node_named_after_its_executable() -> None:
    (node,) = _calls(_tree(LAUNCH_PARTS), "Node")
    assert _const(_kwarg(node, "package")) == "evalstop"
    assert ast.unparse(_kwarg(node, "executable")) == ast.unparse(_kwarg(node, "name")) == "executable"  # type: ignore[arg-type]


def test_portable_api_has_nothing_humble_lacks() -> None:
    assert not HUMBLE_LACKS & set().union(*PORTABLE_API.values())


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_path_joins_have_no_nested_list(path: pathlib.Path) -> None:
    """``PathJoinSubstitution([..., [a, b]])`` fails to load under Humble's and Jazzy's launch (issue 21)."""
    for call in _calls(_tree(path), "PathJoinSubstitution"):
        (parts,) = call.args
        assert isinstance(parts, ast.List), f"{path.name}: PathJoinSubstitution takes a list literal here"
        nested = [ast.unparse(e) for e in parts.elts if isinstance(e, (ast.List, ast.Tuple))]
        assert not nested, f"{path.name}: nested list {nested} in PathJoinSubstitution (Kilted only)"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_nodes_name_installed_executables_and_declared_parameters(path: pathlib.Path) -> None:
    nodes = _nodes(_tree(path))
    assert nodes, f"{path.name} starts no node"
    for executable, node in nodes:
        if getattr(node.func, "id", None) == "Node":
            assert _const(_kwarg(node, "package")) == "evalstop"
            assert _const(_kwarg(node, "name")) == executable, "node name = executable (the names the nodes use)"
        assert (REPO / "scripts" / executable).is_file(), f"{path.name}: no executable {executable!r}"
        if _kwarg(node, "parameters") is not None:
            unknown = set(_parameters(node)) - _declared_parameters(executable)
            assert not unknown, f"{path.name}: {executable} declares no parameter(s) {sorted(unknown)}"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_every_launch_configuration_is_a_declared_argument(path: pathlib.Path) -> None:
    tree = _tree(path)
    declared = _arguments(tree)
    used = _configurations(tree)
    assert used <= set(declared), f"undeclared: {sorted(used - set(declared))}"
    assert set(declared) <= used, f"declared but unused: {sorted(set(declared) - used)}"
    for name, call in declared.items():
        assert _const(_kwarg(call, "description")), f"argument {name!r} has no description"


def test_eval_launch_arguments_and_robot_presets() -> None:
    tree = _tree(REPO / "launch" / "eval.launch.py")
    declared = _arguments(tree)
    assert {"config_file", "robot", "namespace", "session_id", "use_teleop"} <= set(declared)
    presets = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "PRESETS")  # type: ignore[attr-defined]
    presets = ast.literal_eval(presets)
    assert ast.unparse(_kwarg(declared["robot"], "choices")) == "list(PRESETS)"  # type: ignore[arg-type]
    assert set(presets) == {"sim", "sim_policy", "droid", "widowx"}
    for config in presets.values():
        assert (REPO / "config" / config).is_file(), f"preset {config} is not in config/"
    # only the simulated robot starts sim_robot
    sim = _node(tree, "sim_robot")
    assert "== 'sim'" in ast.unparse(_kwarg(sim, "condition"))  # type: ignore[arg-type]
    # policy_runner for the served robots, with a servers file per robot preset
    runner = _node(tree, "policy_runner")
    assert "('sim_policy', 'droid', 'widowx')" in ast.unparse(tree)
    assert runner is not None
    for robot in ("sim_policy", "droid", "widowx"):
        servers = yaml.safe_load((REPO / "config" / f"{robot}_servers.yaml").read_text())["policy_servers"]
        policies = yaml.safe_load((REPO / "config" / presets[robot]).read_text())["policies"]
        assert sorted(servers) == sorted(policies), f"{robot}_servers.yaml must serve the preset's policies"


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_the_launch_ends_when_the_manager_exits(path: pathlib.Path) -> None:
    """Issue 8: the manager's death (``evaluation_manager``, or a hub station's ``station_manager``) ends
    the session, so it ends the launch (``on_exit=Shutdown()``); no other node's does (a runner may
    come back, the operator terminal may be reopened)."""
    for executable, node in _nodes(_tree(path)):
        on_exit = _kwarg(node, "on_exit")
        if executable in ("evaluation_manager", "station_manager"):
            assert isinstance(on_exit, ast.Call) and getattr(on_exit.func, "id", None) == "Shutdown", path.name
        else:
            assert on_exit is None, f"{path.name}: only the manager's exit ends the launch"


def test_demo_manager_exits_when_the_session_is_decided() -> None:
    tree = _tree(REPO / "launch" / "demo.launch.py")
    manager = _node(tree, "evaluation_manager")
    values = _parameters(manager)
    assert values["exit_on_finish"] == "True"


def test_package_runs_its_launch_files_and_tests() -> None:
    """package.xml exec_depends on the launch packages; ``colcon test`` runs the test suite with pytest, where
    ``test_ros2_launch.py`` runs every launch_testing test under ``launch_test``."""
    package = (REPO / "package.xml").read_text()
    for dep in ("launch", "launch_ros"):
        assert f"<exec_depend>{dep}</exec_depend>" in package
    cmake = (REPO / "CMakeLists.txt").read_text()
    assert re.search(r"ament_add_pytest_test\(evalstop_pytest ", cmake)
    launch_tests = [p for p in (REPO / "test" / "launch").glob("test_*.py")
                    if re.search(r"^def generate_test_description", p.read_text(), re.MULTILINE)]
    runner = (REPO / "test" / "launch" / "test_ros2_launch.py").read_text()
    conftest = (REPO / "test" / "launch" / "conftest.py").read_text()
    assert launch_tests
    for test in launch_tests:
        assert f'"{test.name}"' in runner and f'"{test.name}"' in conftest, test.name


def test_droid_cameras_is_a_launch_argument_passed_to_policy_runner() -> None:
    """``droid_cameras:=[...]`` reaches policy_runner's ``droid.cameras`` as the list the adapter parses.

    launch_ros parses a substitution-only parameter value as YAML, so the argument's text (its
    default, or a lab's mapping) must be a YAML list of ``<image key>=<camera name>`` strings.
    """
    from evalstop_ros.runner.adapters.droid import parse_cameras
    from evalstop_ros.runner.errors import RunnerError

    tree = _tree(REPO / "launch" / "eval.launch.py")
    declared = _arguments(tree)
    assert "droid_cameras" in declared
    runner = _node(tree, "policy_runner")
    values = _parameters(runner)
    assert values["droid.cameras"] == "LaunchConfiguration('droid_cameras')"
    assert "droid.cameras" in _declared_parameters("policy_runner")

    default = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                   and getattr(n.targets[0], "id", None) == "DROID_CAMERAS")
    assert ast.unparse(_kwarg(declared["droid_cameras"], "default_value")) == "DROID_CAMERAS"  # type: ignore[arg-type]
    assert parse_cameras(yaml.safe_load(ast.literal_eval(default))) == {"<serial>_left": "exterior_image_1_left"}
    lab = "[24259877_left=exterior_image_1_left, 13062452_left=wrist_image_left]"  # as documented
    assert parse_cameras(yaml.safe_load(lab)) == {"24259877_left": "exterior_image_1_left",
                                                  "13062452_left": "wrist_image_left"}
    for bad in ("[24259877_left]", "[24259877_left=front_camera]", "[a=wrist_image_left, b=wrist_image_left]"):
        with pytest.raises(RunnerError, match="droid.cameras"):
            parse_cameras(yaml.safe_load(bad))


def test_confirm_reset_defaults_on_for_the_real_robots_and_sim_policy() -> None:
    """The manager gets ``confirm_reset`` from a launch argument whose default depends on ``robot``."""
    tree = _tree(REPO / "launch" / "eval.launch.py")
    declared = _arguments(tree)
    confirmed = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                     and getattr(n.targets[0], "id", None) == "CONFIRMED")
    assert set(ast.literal_eval(confirmed)) == {"sim_policy", "droid", "widowx"}
    default = ast.unparse(_kwarg(declared["confirm_reset"], "default_value"))  # type: ignore[arg-type]
    # PythonExpression(["'true' if '", robot, "' in ", repr(CONFIRMED), " else 'false'"]): evaluate it per robot
    parts = ast.literal_eval(default.replace("PythonExpression(", "", 1)[:-1].replace("robot", "'{robot}'")
                             .replace("repr(CONFIRMED)", repr(repr(ast.literal_eval(confirmed)))))
    for robot, expected in (("sim", "false"), ("sim_policy", "true"), ("droid", "true"), ("widowx", "true")):
        assert eval("".join(parts).replace("{robot}", robot)) == expected  # the launch file's own text
    manager = _node(tree, "evaluation_manager")
    values = _parameters(manager)
    assert values["confirm_reset"] == "LaunchConfiguration('confirm_reset')"


def test_thread_priority_reaches_the_manager_and_the_operator_terminal() -> None:
    """``thread_priority:=N`` (docs/ros.md) is passed, as an integer, to both ends of a score."""
    tree = _tree(REPO / "launch" / "eval.launch.py")
    assert "thread_priority" in _arguments(tree)
    for executable in ("evaluation_manager", "teleop_scorer"):
        node = _node(tree, executable)
        values = _parameters(node)
        assert values["thread_priority"] == \
            "ParameterValue(LaunchConfiguration('thread_priority'), value_type=int)", executable
        assert "thread_priority" in _declared_parameters(executable)
