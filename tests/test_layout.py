"""lakelog's and spark_ext's folders are layers (specs/layout.md): every package and root module imports only from
the layers below its own, lazy imports inside functions and ``TYPE_CHECKING`` imports included, so the tree
shows which part sits on which and no two packages lean on each other."""

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
    {"catalog"},
    {"transaction"},
    {"write"},
    {"change_feed", "alter", "maintenance", "conversion"},
    {"dml"},
    {"check", "api"},
    {"table"},
    {"cli"},
]

# spark_ext sits above all of lakelog, which it imports freely; its own folders are layers in the same way.
# "__init__" is the package's root module: the public names, which the main job imports.
SPARK_LAYERS = [
    {"jvm", "cluster", "schema"},
    {"scan"},
    {"datasource", "dml"},
    {"table"},
    {"statements"},
    {"catalog"},
    {"sql"},
    {"__init__"},
    {"demo"},
]


def _modules(package: str = "lakelog"):
    """(dotted name, path, is a package's __init__) of every module of ``package`` (lakelog's lazy root aside)."""
    for folder, dirs, files in os.walk(os.path.join(ROOT, package)):
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


def _node(name: str, package: str = "lakelog") -> str | None:
    """The package or root module of ``package`` a module belongs to: ``"__init__"`` for the package's root
    module, None for a module outside ``package``."""
    parts = name.split(".")
    if parts[0] != package:
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _layering(modules, layers=LAYERS, package: str = "lakelog") -> tuple[set, list[str]]:
    """(names no layer holds, imports of a layer that is not below the importer's) among ``modules``."""
    layer = {n: i for i, names in enumerate(layers) for n in names}
    unplaced, upward = set(), []
    for name, path, is_package in modules:
        source = _node(name, package)
        if source not in layer:
            unplaced.add(source)
            continue
        for target in sorted(_imports(name, path, is_package)):
            node = _node(target, package)
            if node in layer and node != source and layer[node] >= layer[source]:
                upward.append(f"{name} imports {target} ({node} is not below {source})")
    return unplaced, upward


def test_every_package_imports_only_from_the_layers_below_it():
    unplaced, upward = _layering(_modules())
    assert unplaced == set(), f"place these in LAYERS and in specs/layout.md: {sorted(unplaced)}"
    assert upward == []


def test_every_spark_ext_package_imports_only_from_the_layers_below_it():
    unplaced, upward = _layering(_modules("spark_ext"), SPARK_LAYERS, "spark_ext")
    assert unplaced == set(), f"place these in SPARK_LAYERS and in specs/layout.md: {sorted(unplaced)}"
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


def test_the_check_sees_spark_ext_importing_its_public_face(tmp_path):
    """The control for spark_ext: a package importing the root module's public names, or a higher package lazily,
    is found; lakelog's modules are below all of spark_ext."""
    path = tmp_path / "m.py"
    path.write_text("import lakelog\nfrom ..schema.variants import x\n\ndef f():\n    from .. import LakelogTable\n    from ..catalog import session\n")
    unplaced, upward = _layering([("spark_ext.scan.m", str(path), False)], SPARK_LAYERS, "spark_ext")
    assert unplaced == set()
    assert [u.split(" (")[0] for u in upward] == [
        "spark_ext.scan.m imports spark_ext", "spark_ext.scan.m imports spark_ext.catalog",
        "spark_ext.scan.m imports spark_ext.catalog.session"]
