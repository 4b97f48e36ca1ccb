"""lakelog's folders are layers (specs/layout.md): every package and root module imports only from the layers
below its own, lazy imports inside functions and ``TYPE_CHECKING`` imports included, so the tree shows
which part sits on which and no two packages lean on each other."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Bottom first: a package or root module may import what an earlier line names, never what its own line or
# a later one names. specs/layout.md says what each holds and why it sits where it does.
LAYERS = [
    {"errors"},
    {"environment", "storage", "variant", "actions"},
    {"schema"},
    {"expressions"},
    {"table_features"},
    {"log"},
    {"read"},
    {"iceberg"},
    {"transaction"},
    {"write"},
    {"change_feed", "alter", "maintenance", "conversion"},
    {"dml"},
    {"check", "api"},
    {"table"},
    {"cli"},
]


def _modules():
    """(dotted name, path, is a package's __init__) of every module of lakelog but its lazy root."""
    for folder, dirs, files in os.walk(os.path.join(ROOT, "lakelog")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts.pop()
                if parts != ["lakelog"]:
                    yield ".".join(parts), path, f == "__init__.py"


def _imports(name: str, path: str, is_package: bool) -> set[str]:
    """Every module name ``path`` imports, resolved to absolute names (names imported from a module included)."""
    package = name if is_package else name.rpartition(".")[0]
    out = set()
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)
    return out


def _node(name: str) -> str | None:
    """The package or root module a lakelog module belongs to (None for the root package itself)."""
    parts = name.split(".")
    return parts[1] if parts[0] == "lakelog" and len(parts) > 1 else None


def _layering(modules) -> tuple[set, list[str]]:
    """(names no layer holds, imports of a layer that is not below the importer's) among ``modules``."""
    layer = {n: i for i, names in enumerate(LAYERS) for n in names}
    unplaced, upward = set(), []
    for name, path, is_package in modules:
        source = _node(name)
        if source not in layer:
            unplaced.add(source)
            continue
        for target in sorted(_imports(name, path, is_package)):
            node = _node(target)
            if node in layer and node != source and layer[node] >= layer[source]:
                upward.append(f"{name} imports {target} ({node} is not below {source})")
    return unplaced, upward


def test_every_package_imports_only_from_the_layers_below_it():
    unplaced, upward = _layering(_modules())
    assert unplaced == set(), f"place these in LAYERS and in specs/layout.md: {sorted(unplaced)}"
    assert upward == []


def test_the_core_imports_no_spark():
    spark = sorted(f"{name} imports {t}" for name, path, is_package in _modules()
                   for t in _imports(name, path, is_package) if t.split(".")[0] in ("pyspark", "spark_ext"))
    assert spark == []


def test_the_check_sees_upward_and_unplaced_imports(tmp_path):
    """The control: lazy imports of a higher layer and of the same layer's neighbour, written as the code writes
    them, are found, and so is a root module no layer holds."""
    path = tmp_path / "m.py"
    path.write_text("from ..actions import AddFile\n\ndef f():\n    from ..read.scan import pruned_files\n    from .. import log, table_features\n")
    unplaced, upward = _layering([("lakelog.table_features.m", str(path), False), ("lakelog.helpers", str(path), False)])
    assert unplaced == {"helpers"}
    assert [u.split(" (")[0] for u in upward] == [
        "lakelog.table_features.m imports lakelog.log", "lakelog.table_features.m imports lakelog.read.scan",
        "lakelog.table_features.m imports lakelog.read.scan.pruned_files"]
