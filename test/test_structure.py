"""The shape of the code: imports only point down the layers and never in a circle, no module over
~600 lines, one trial loop, test tiers that name real tests, no ticket numbers in the source, an
architecture page that names files that exist, module docstrings of a few lines.  All read the
source with :mod:`ast` or as text, importing nothing."""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "evalstop_ros"

#: Longest module (lines).  Generated tables are exempt, but none is a Python module today (the
#: STEP tables are data files under stats/step_tables/).
MAX_LINES = 600
#: Modules still over the limit, waiting for their split; the list may only shrink.
NOT_YET_SPLIT: frozenset[str] = frozenset()


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The evalstop_ros modules ``path`` imports: at module level, inside a function, or under
    ``if TYPE_CHECKING:`` (a type checker follows those too, so they count as edges)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    out.add(full if full in modules else base)
            elif isinstance(child, ast.Import):
                out.update(alias.name for alias in child.names)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in out if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, modules) for p in paths}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The subpackages' graph (``session`` -> ``active`` when a session module imports an active one)."""
    def top(module: str) -> str:
        return module.split(".")[1] if module.count(".") else ""

    out: dict[str, set[str]] = {}
    for source, targets in graph.items():
        out.setdefault(top(source), set()).update(top(t) for t in targets if top(t) not in ("", top(source)))
    out.pop("", None)
    return {k: v - {""} for k, v in out.items()}


def test_the_import_walk_sees_relative_and_lazy_imports() -> None:
    graph = _graph()
    assert "evalstop_ros.session.values" in graph["evalstop_ros.session.session"]
    assert "evalstop_ros.session.active_schedule" in graph["evalstop_ros.session.schedule"]  # inside a function
    assert "evalstop_ros.stats.batch" in graph["evalstop_ros.stats"]  # under ``if TYPE_CHECKING:``
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_among_modules() -> None:
    assert _cycles(_graph()) == []


def test_no_import_circle_between_session_and_active() -> None:
    packages = _package_graph(_graph())
    assert "session" not in packages.get("active", set())


#: The layers of docs/ARCHITECTURE.md, bottom first: a module may import its own subpackage and
#: any layer below its own, never one beside or above it.  The first layer is the package's
#: top-level modules, which import nothing of the package.  ``runner`` (the ROS-free trial
#: runner) sits above ``session``: it may seal and check goals with the session's code.  A new
#: subpackage must be given its place here.
LAYERS: tuple[frozenset[str], ...] = tuple(frozenset(layer.split()) for layer in (
    "launch_parts lazy_exports limits operator_input qos ros_context sentence_model",
    "stats",
    "active",
    "session",
    "runner",
    "parallel",
    "audit",
    "report",
    "hub",
    "station",
    "cli nodes",
))


def _layer_of(package: str) -> int:
    return next(rank for rank, layer in enumerate(LAYERS) if package in layer)


def _upward_edges(packages: dict[str, set[str]]) -> list[str]:
    """Every import of a package from one on its own layer or above (``session -> runner``)."""
    return sorted(f"{source} -> {target}" for source, targets in packages.items() for target in targets
                  if _layer_of(target) >= _layer_of(source))


def test_every_subpackage_has_a_layer() -> None:
    placed = set().union(*LAYERS)
    tops = {_module_name(p).split(".")[1] for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE or p.stem != "__init__"}
    assert tops - placed == set(), "give each new subpackage or top-level module its place in LAYERS"
    assert placed - tops == set(), "LAYERS names a subpackage that does not exist"


def test_imports_only_point_down_the_layers() -> None:
    assert _upward_edges({"stats": set(), "session": {"stats", "runner"}, "runner": {"session"}}) == ["session -> runner"]
    assert _upward_edges({"cli": {"nodes"}}) == ["cli -> nodes"]
    assert _upward_edges(_package_graph(_graph())) == []


def test_no_module_over_600_lines() -> None:
    lengths = {str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines())
               for p in PACKAGE.rglob("*.py")}
    long = {path for path, n in lengths.items() if n > MAX_LINES}
    assert long <= NOT_YET_SPLIT, f"over {MAX_LINES} lines: {sorted(long - NOT_YET_SPLIT)}"
    assert not NOT_YET_SPLIT - long, f"split now, remove from NOT_YET_SPLIT: {sorted(NOT_YET_SPLIT - long)}"


#: The calls that move a trial on: issuing it, journaling its run, taking its held automatic score.
_LOOP_CALLS = frozenset({"next_trial", "record_runner_result", "held_auto_score"})


def _loop_callers() -> set[str]:
    """The evalstop_ros modules that call a method of :data:`_LOOP_CALLS` (definitions aside, and a session's
    delegation to its state machine, ``self._machine.record_runner_result(...)``: the one implementation)."""
    out = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _LOOP_CALLS
                    and not (isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "_machine")):
                out.add(_module_name(path))
    return out


def test_one_trial_loop() -> None:
    """The manager nodes (evaluation_manager, station_manager), the simulated hub station, the
    audit's synthetic recordings and the session tests all drive ``session/driver.TrialDriver``;
    no other module issues trials or journals runs itself."""
    assert _loop_callers() == {"evalstop_ros.session.driver"}


def test_the_tiers_of_the_root_conftest_name_tests_that_exist() -> None:
    """``_MC_TESTS``, ``_SLOW_TESTS``, ... (root ``conftest.py``) mark tests by file and name: a renamed
    test would silently leave its tier (and run in ``make check``)."""
    tree = ast.parse((ROOT / "conftest.py").read_text())
    tiers = {target.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
             for target in node.targets if isinstance(target, ast.Name) and target.id.endswith("_TESTS")}
    assert {"_MC_TESTS", "_SLOW_TESTS", "_SERIAL_TESTS"} <= set(tiers)
    missing = []
    for tier, files in tiers.items():
        for path, names in files.items():
            source = ROOT / path
            defined = ({node.name for node in ast.walk(ast.parse(source.read_text()))
                        if isinstance(node, ast.FunctionDef)} if source.is_file() else set())
            missing += [f"{tier}: {path}::{name}" for name in names if name not in defined]
    assert missing == []


#: A ticket reference ("issue 20", "Issue #23", "issues 19"): the source says the reason instead.
_TICKET = re.compile(r"\bissues? #?[0-9]", re.IGNORECASE)


def test_the_source_cites_no_ticket_numbers() -> None:
    assert _TICKET.search("resampled (issue 20)") and _TICKET.search("Blinding (Issue #23):")
    assert not _TICKET.search("issue a score") and not _TICKET.search("tissues 3")
    hits = [f"{path.relative_to(ROOT)}:{number}" for path in sorted(PACKAGE.rglob("*"))
            if path.is_file() and path.suffix in {".py", ".j2"}
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if _TICKET.search(line)]
    assert hits == []


#: The architecture page: every file, directory and ``file: Name`` it names must exist.
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
#: ```session/trials.py: TrialBook```, ```replay.py```, ```stats/ranking*.py```, ```audit/report.py:\nComparisonAudit```.
_FILE_REFERENCE = re.compile(r"`([\w/*.]+\.py)(?::\s*([\w.]+))?")


def _defines(path: pathlib.Path, dotted: str) -> bool:
    """Whether ``path`` defines ``Name`` (class, function, assignment or import at the top, or a
    method of a class at the top) and, for ``Name.attr``, whether ``Name``'s body or one of its
    methods (``self.attr = ...``) does."""
    def names(body: list[ast.stmt]) -> set[str]:
        out: set[str] = set()
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.ImportFrom | ast.Import):
                out.update((a.asname or a.name).split(".")[0] for a in node.names)
        return out

    tree = ast.parse(path.read_text(encoding="utf-8"))
    name, _, attr = dotted.partition(".")
    if not attr:
        return name in names(tree.body).union(*(names(c.body) for c in tree.body if isinstance(c, ast.ClassDef)))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            assigned = {t.attr for n in ast.walk(node) for t in getattr(n, "targets", [getattr(n, "target", None)])
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
            return attr in names(node.body) | assigned
    return False


def _architecture_problems(text: str) -> list[str]:
    """What ``text`` (the page) names that does not exist: files (in the package, or the
    repository for ``test/...``; a bare ``replay.py`` anywhere in the package), the names after
    ``file:``, the package directories of its layer diagram, and its relative links."""
    problems = []
    for match in _FILE_REFERENCE.finditer(text):
        reference, name = match.group(1), match.group(2)
        if "/" not in reference:
            found = sorted(PACKAGE.rglob(reference))
        else:
            found = sorted(PACKAGE.glob(reference)) or sorted(ROOT.glob(reference))
        if not found:
            problems.append(f"no file {reference}")
        elif name and not any(_defines(path, name) for path in found):
            problems.append(f"{reference} defines no {name}")
    for block in re.findall(r"^```\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            for directory in re.match(r"((?:\w+/\s+)*)", line).group(1).split():  # type: ignore[union-attr]
                if not (PACKAGE / directory).is_dir():
                    problems.append(f"no package directory {directory}")
    for link in re.findall(r"\]\(([^)#:]+)\)", text):
        if not (ARCHITECTURE.parent / link).exists():
            problems.append(f"no page {link}")
    return problems


def test_the_architecture_page_names_what_exists() -> None:
    assert _architecture_problems(
        "`session/trials.py: TrialBook`, `hub/family.py:\nHolmPairs.rows`, `replay.py`, `stats/ranking*.py`\n"
        "```\nnodes/    thin\ncli/ audit/   verbs\n```\n[protocol](protocol.md)") == []
    assert _architecture_problems(
        "`session/gone.py`, `session/trials.py: TrialLedger`, `hub/family.py: HolmPairs.nothing`, `gone.py`\n"
        "```\nnowhere/    the client\n```\n[x](gone.md)") == [
        "no file session/gone.py", "session/trials.py defines no TrialLedger", "hub/family.py defines no HolmPairs.nothing",
        "no file gone.py", "no package directory nowhere/", "no page gone.md"]
    assert _architecture_problems(ARCHITECTURE.read_text(encoding="utf-8")) == []


def test_the_architecture_diagram_is_the_layer_order() -> None:
    """The page's diagram lists the subpackages top first, one layer a line, as :data:`LAYERS` does."""
    block = re.search(r"^```\n(.*?)^```", ARCHITECTURE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert block is not None
    diagram = [frozenset(d.rstrip("/") for d in line.split()) for line in
               (re.match(r"(?:\w+/\s+)*", row).group(0) for row in block.group(1).splitlines())  # type: ignore[union-attr]
               if line]
    assert diagram == list(reversed(LAYERS[1:]))


#: A module docstring says what the module is for in a few lines (the anchors' median is one line);
#: the design lives in docs/.  The median over the package, and the longest any one may be.
MAX_MEDIAN_DOCSTRING = 5
MAX_DOCSTRING = 25


def _docstring_lines(path: pathlib.Path) -> int:
    """The lines of ``path``'s module docstring (0 without one)."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    return len(docstring.strip().splitlines()) if docstring else 0


def test_module_docstrings_are_short() -> None:
    lengths = {str(p.relative_to(PACKAGE)): _docstring_lines(p) for p in sorted(PACKAGE.rglob("*.py"))}
    ordered = sorted(lengths.values())
    median = (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) / 2
    print(f"module docstrings: {len(ordered)} modules, {sum(ordered)} lines, median {median}, longest {ordered[-1]}")
    assert median <= MAX_MEDIAN_DOCSTRING
    long = {path for path, n in lengths.items() if n > MAX_DOCSTRING}
    assert not long, f"over {MAX_DOCSTRING} lines (design prose goes to docs/): {sorted(long)}"


def test_the_design_notes_name_modules_that_exist() -> None:
    """A ``### `pkg/module.py``` heading of a docs/ page (the design notes per module) names a module of the package."""
    named = {(page.name, name) for page in sorted((ROOT / "docs").glob("*.md"))
             for name in re.findall(r"^### `([\w/]+\.py)`", page.read_text(encoding="utf-8"), re.MULTILINE)}
    assert ("statistics.md", "stats/holm.py") in named
    assert sorted(f"{page}: {name}" for page, name in named if not (PACKAGE / name).is_file()) == []
