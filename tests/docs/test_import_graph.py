"""The package's import graph: no cycle, and no arrow from the method layer or the analysis module up to TRL or the
trainer (issue #14's structure rules, checked on the source so that a new import that breaks them fails here)."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest


PACKAGE = Path(__file__).resolve().parents[2] / "lze_trl"
METHOD_LAYER = sorted(
    ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    for p in (PACKAGE / "method").rglob("*.py")
)
ANALYSIS = ["lze_trl.plotting"]
FLOORS = [["lze_trl.method"], ["lze_trl.common"], ["lze_trl.grpo", "lze_trl.async_grpo"]]
"""The package's floors, bottom first: a module imports from its own layer and the floors below it, never from above
nor from a sibling on its floor (the two trainers stand side by side on the shared layers)."""
LAYERS = [layer for floor in FLOORS for layer in floor]
ROOT_MODULES = {"__init__.py", "cli.py", "extras.py", "rewards.py"}
"""The package root: its public entry points (the names `lze_trl` exports, the console script, the reward functions,
the extra that installs the plots' library); everything else is in a subpackage."""
TRAINER_LAYER = {"lze_trl.grpo.trainer", "lze_trl.grpo.config", "lze_trl.plotting.callback"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST, type_checking: bool):
    """Every import statement of a module, lazy ones (inside functions) included, and those under
    `if TYPE_CHECKING:` (which never run) where `type_checking`."""
    never = {
        id(inner)
        for node in ast.walk(tree)
        if not type_checking and isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    yield from (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in never)


def import_graph(type_checking: bool = True) -> dict[str, set[str]]:
    """Imports between the package's modules, lazy ones included (a cycle through an import inside a function is a
    cycle all the same), and those only a type checker runs unless `type_checking=False` (a knot for a reader all the
    same)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges = set()
        for node in _imports(ast.parse(path.read_text()), type_checking):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    edges.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, stack = set(), [start]
    while stack:
        for nxt in graph[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def test_graph_parser_sees_the_trainer_imports():
    # guards the checks below against a parser that finds no edges at all
    graph = import_graph()
    assert {
        "lze_trl.grpo.config",
        "lze_trl.method.run",
        "lze_trl.grpo.step",
        "lze_trl.method.checkpoint",
    } <= graph["lze_trl.grpo.trainer"]
    assert "lze_trl.method.selectors.base" in graph["lze_trl.method.selectors.builtin"]


def imported_packages(folder: Path) -> set[str]:
    """The top-level packages that the modules under `folder` import, lazily or for a type checker included."""
    return {
        (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
        for path in folder.rglob("*.py")
        for node in _imports(ast.parse(path.read_text()), type_checking=True)
        if isinstance(node, ast.Import) or not node.level
        for alias in node.names
    }


def test_the_library_imports_nothing_of_the_examples():
    # examples/ (`lze_examples`) builds on the library, never the other way: the commands and model names the examples
    # add reach `lze_trl` through entry points (lze_trl/cli.py, lze_trl/commands/grpo.py)
    assert "lze_examples" not in imported_packages(PACKAGE)
    assert {"lze_trl", "trl"} <= imported_packages(PACKAGE.parent / "examples" / "lze_examples")  # the scan sees them


def test_the_package_root_holds_the_entry_points_and_subpackages():
    assert {p.name for p in PACKAGE.glob("*.py")} == ROOT_MODULES
    assert {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} >= {n.split(".")[1] for n in LAYERS}


@pytest.mark.parametrize("layer", LAYERS)
def test_no_layer_imports_from_a_layer_above_it_or_beside_it(layer):
    floor = next(i for i, f in enumerate(FLOORS) if layer in f)
    above = [other for f in FLOORS[floor:] for other in f if other != layer]
    graph = import_graph()
    wrong = {
        (module, target)
        for module, targets in graph.items()
        if module == layer or module.startswith(f"{layer}.")
        for target in targets
        if any(target == a or target.startswith(f"{a}.") for a in above)
    }
    assert wrong == set()


def test_the_layer_check_sees_a_wrong_arrow():
    # guards the check above: an edge from the method up to the trainer's layer would be found
    graph = import_graph()
    assert "lze_trl.method.run" in graph["lze_trl.grpo.trainer"]
    assert "lze_trl.common.state_owner" in graph["lze_trl.grpo.trainer"]  # the sibling trainers share this floor
    assert "lze_trl.common.state_owner" in graph["lze_trl.async_grpo.trainer"]
    assert len(METHOD_LAYER) >= 12 and "lze_trl.method.validation" in METHOD_LAYER


def test_no_import_cycle():
    # `if TYPE_CHECKING:` imports counted: a config that imports its consumers' registries to validate, while they
    # import it for its type, is a knot although it never loops at import time
    graph = import_graph()
    cycles = [name for name in graph if name in reachable(graph, name)]
    assert cycles == []


def test_the_settings_sit_below_the_registries_that_read_them():
    graph = import_graph()
    assert graph["lze_trl.method.checks"] == set()  # the generic checks and the registry type: the bottom
    above = ("lze_trl.method.selectors", "lze_trl.method.validation")
    assert {m for m in reachable(graph, "lze_trl.method.settings") if m.startswith(above)} == set()
    # the validation is above both: it reads the settings and the registries
    assert {"lze_trl.method.settings", "lze_trl.method.selectors"} <= set(graph["lze_trl.method.validation"])


@pytest.mark.parametrize("module", METHOD_LAYER + ANALYSIS)
def test_method_layer_and_analysis_never_reach_the_trainer(module):
    graph = import_graph()
    assert reachable(graph, module) & TRAINER_LAYER == set()


def test_method_layer_imports_neither_torch_nor_trl():
    code = (
        "import sys\n"
        f"for m in {METHOD_LAYER!r}: __import__(m)\n"
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'datasets') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_neither_the_package_nor_the_tests_of_the_core_import_the_benchmarks():
    # The peers live in benchmarks/peers, outside the wheel: no module of the package imports them (at module level or
    # lazily), none branches on the settings of the modes that left, and only the tests of the benchmarks import them.
    experimental = ("fresh_fraction", "rollout_filter", "replay_", "dapo_max_resample", "selector_kwargs")
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert not (node.module or "").startswith(("benchmarks", "lze_trl.experimental")), path
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("benchmarks") for a in node.names), path
            elif isinstance(node, ast.Attribute) and node.attr.startswith(experimental):
                raise AssertionError(f"{path.name} reads the experimental setting {node.attr!r}")
    assert not (PACKAGE / "experimental").exists()
    # the tests of the benchmarks are in tests/benchmarks (the peers' among them); besides them, the peers' two-process
    # launcher and the tables' golden values read benchmarks/ (the tests of the package's selectors do not)
    also = {"test_tables.py", "dist_peers.py"}
    for path in (PACKAGE.parent / "tests").rglob("*.py"):
        if path.parent.name != "benchmarks" and path.name not in also:
            assert not re.search(r"^\s*(from|import) benchmarks\b", path.read_text(), re.MULTILINE), path.name


def test_no_module_of_the_package_is_over_400_lines():
    long = {p.name: n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}, "split these modules"


def test_the_graph_sees_lazy_imports():
    # a lazy import inside a function is an edge (guards once imported prompt_ids lazily, prompt_ids imported guards)
    graph = import_graph()
    # `check_trl` imports it inside the function
    assert "lze_trl.method.errors" in graph["lze_trl.common.coupling"]
    assert "lze_trl.grpo.trainer" in graph["lze_trl"]  # `if TYPE_CHECKING:` imports count ...
    assert "lze_trl.grpo.trainer" not in import_graph(type_checking=False)["lze_trl"]  # ... unless left out


def test_the_module_map_lists_every_module_of_the_package():
    # docs/source/modules.md is the map a reader starts from (it replaced a bound on the core's lines)
    text = (PACKAGE.parent / "docs" / "source" / "modules.md").read_text()
    listed = set(re.findall(r"`(lze_trl[\w./]*?)(?:\.py)?`", text))
    modules = {module_name(p).replace(".", "/") for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    packages = {module_name(p).replace(".", "/") for p in PACKAGE.rglob("__init__.py")} - {"lze_trl"}
    missing = {m for m in modules if m not in listed and not any(m.startswith(f"{p}/") for p in packages & listed)}
    assert missing == set(), "add these modules to docs/source/modules.md"
    assert listed <= modules | packages, "docs/source/modules.md names modules that do not exist"
