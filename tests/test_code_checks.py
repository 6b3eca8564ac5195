"""The code checks CI holds every change to, run as tests so that README's one test command
covers them: ruff (lint and format), mypy, and import-linter's layer contracts
(docs/architecture.md). Their versions are pinned in the `test` extra, because a new release
of a checker changes its verdicts without a line of dumpkit changing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the full run's (CI's); `-m "not slow"` leaves it out

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)


def _tool(name: str) -> str:
    """The checker's executable beside this Python (the venv's), else on PATH. Missing is a
    failure, not a skip: the `test` extra installs it, and a skipped check passes nothing."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None and sys.version_info < (3, 10):
        pytest.skip("the checkers are installed and run on Python 3.10+ (pyproject.toml's test extra)")
    if found is None:
        pytest.fail(f"{name} is not installed; install the test extra: pip install -e '.[test]'")
    return found


def _assert_clean(result: subprocess.CompletedProcess, what: str) -> None:
    assert result.returncode == 0, f"{what} failed:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"


def test_ruff_finds_nothing():
    _assert_clean(_run(_tool("ruff"), "check", "dumpkit", "tests", "tools", "bench", "windbg_scripts"), "ruff check")


def test_code_is_formatted():
    _assert_clean(
        _run(_tool("ruff"), "format", "--check", "dumpkit", "tests", "tools", "bench", "windbg_scripts"),
        "ruff format --check (run `ruff format` to fix)",
    )


def test_mypy_finds_nothing():
    _assert_clean(_run(_tool("mypy")), "mypy")


def test_mypy_finds_nothing_in_the_windows_only_code_as_windows_sees_it():
    """dumpkit capture's Win32 side is skipped by the run above (its modules assert the
    platform); checked here as on Windows."""
    windows_only = ("dumpkit/capture", "dumpkit/commands/capture.py", "dumpkit/commands/wer.py")
    _assert_clean(_run(_tool("mypy"), "--platform", "win32", *windows_only), "mypy")


def test_layers_keep_their_contracts():
    _assert_clean(_run(_tool("lint-imports")), "lint-imports")


def test_no_code_asks_a_target_for_attributes_its_protocol_does_not_declare():
    """The Target protocol (dumpkit/target.py) is the one seam: what a front door or an
    analysis reads of a target is declared there, so a getattr/hasattr/setattr on a target
    (an attribute one source has and another lacks) is a leak in the seam."""
    import ast

    leaks = []
    for path in sorted((ROOT / "dumpkit").rglob("*.py")) + sorted((ROOT / "windbg_scripts").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr")
                and node.args
                and isinstance(node.args[0], (ast.Name, ast.Attribute))
                and (node.args[0].id if isinstance(node.args[0], ast.Name) else node.args[0].attr).endswith("target")
            ):
                leaks.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert leaks == []


def _cycles(imports: dict) -> list:
    """Strongly connected groups of more than one module (Tarjan's, iterative)."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    found = []
    counter = 0
    for root in sorted(imports):
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(imports[root])))]
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif nxt not in index:
                index[nxt] = low[nxt] = counter
                counter += 1
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(imports.get(nxt, ())))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    return found


def test_no_module_imports_itself_through_others():
    """Zero import circles (TYPE_CHECKING and function-level imports count): a circle is
    two modules that cannot be understood, tested or moved apart (issue #33)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("dumpkit")
    imports = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _cycles(imports) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check itself


# The Target seam (issue #33 item 2): what only some sources have is declared in
# dumpkit/target.py, as a protocol on an optional field (a bundle's image store, the dump file
# a bundle writer copies), so that nothing above dumpkit/sources asks which source it holds.


def _target_classes() -> set:
    """The concrete targets: every class named *Target that dumpkit/sources defines."""
    import ast

    names = set()
    for path in sorted((ROOT / "dumpkit" / "sources").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names |= {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name.endswith("Target")}
    return names


def _asks_for_a_source(text: str, targets: set) -> list:
    """Lines of `text` that call isinstance/issubclass with one of `targets`."""
    import ast

    found = []
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
        ):
            if len(node.args) == 2:
                classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                named = {
                    c.id if isinstance(c, ast.Name) else c.attr
                    for c in classes
                    if isinstance(c, (ast.Name, ast.Attribute))
                }
                if named & targets:
                    found.append(node.lineno)
    return found


def test_nothing_outside_the_sources_asks_which_source_a_target_came_from():
    """A bundle writer, a command or an analysis asks the Target for what it declares
    (`dump_file`, `image_store`, `bundle`), never whether it is a MinidumpTarget."""
    targets = _target_classes()
    assert "MinidumpTarget" in targets and "PykdTarget" in targets
    leaks = []
    paths = sorted((ROOT / "dumpkit").rglob("*.py")) + sorted((ROOT / "windbg_scripts").glob("*.py"))
    for path in paths:
        if (ROOT / "dumpkit" / "sources") in path.parents:
            continue
        leaks += [f"{path.relative_to(ROOT)}:{line}" for line in _asks_for_a_source(path.read_text(), targets)]
    assert leaks == []
    assert _asks_for_a_source("isinstance(t, (int, sources.MinidumpTarget))", targets) == [1]  # the check itself


def _loose_annotations(text: str) -> list:
    """`Class.member` of every protocol class in `text` whose annotation says Any."""
    import ast

    found = []
    for cls in ast.walk(ast.parse(text)):
        bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in getattr(cls, "bases", ())}
        if not isinstance(cls, ast.ClassDef) or "Protocol" not in bases:
            continue
        for node in ast.walk(cls):
            notes = []
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                notes = [(node.target.id, node.annotation)]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                notes = [(node.name, a.annotation) for a in arguments] + [(node.name, node.returns)]
            for name, note in notes:
                if note is not None and any(isinstance(n, ast.Name) and n.id == "Any" for n in ast.walk(note)):
                    found.append(f"{cls.name}.{name}")
    return found


def test_the_target_seam_declares_the_type_of_every_field():
    """Target and the protocols of its optional fields say what each field holds: an `Any`
    there lets a source hand anything across the seam unchecked."""
    assert _loose_annotations((ROOT / "dumpkit" / "target.py").read_text()) == []
    sample = "class P(Protocol):\n    x: Optional[Any]\n    def f(self) -> int: ...\n"
    assert _loose_annotations(sample) == ["P.x"]  # the check itself


def _private_imports(module: str, text: str) -> list:
    """Imports in `module` (dumpkit.PACKAGE...) of a `_private` name or module of another
    dumpkit package (a top-level module counts as a package of its own)."""
    import ast

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    def package(name: str) -> str:
        return name.split(".")[1] if name.count(".") else name

    found = []
    for node in ast.walk(ast.parse(text)):
        names = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("dumpkit."):
            names = [(node.module or "", a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            names = [(a.name, "") for a in node.names if a.name.startswith("dumpkit.")]
        for source, name in names:
            if package(source) != package(module) and (private(name) or any(map(private, source.split(".")))):
                found.append(f"{module}:{node.lineno} {source} {name}".rstrip())
    return found


def test_no_package_imports_the_private_names_of_another():
    """A `_name` is its module's own: a package that needs it from another makes it public
    where it belongs (the span helpers bundle/slim.py once took from sources/pykd.py are
    dumpkit/spans.py's now)."""
    leaks = []
    for path in sorted((ROOT / "dumpkit").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        leaks += _private_imports(module, path.read_text())
    assert leaks == []
    sample = "from dumpkit.sources.pykd import _join\nfrom dumpkit.bundle.format import _get\n"
    assert _private_imports("dumpkit.bundle.slim", sample) == ["dumpkit.bundle.slim:1 dumpkit.sources.pykd _join"]
