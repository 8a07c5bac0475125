"""The package's layers import one way: from the estimators down to the kernels.

Read from the source (the modules are parsed, not imported): each module of
``skattn`` belongs to a layer, and may import modules of its own layer or of
layers below it, never above. The kernels and the model, and the internals of
the random features, import no scikit-learn: they are numpy on arrays.
"""

import ast
from pathlib import Path

import pytest

import skattn

PACKAGE = Path(skattn.__file__).parent

# Each layer by the dotted names of its modules (or packages) under skattn,
# bottom up; a module belongs to the layer of its longest listed prefix.
LAYERS = [
    ("infrastructure", {"_parallel", "_version", "_persistence"}),
    ("kernels", {"_kernels"}),
    ("model", {"_model"}),
    ("input and targets", {"_input"}),
    ("training", {"_training"}),
    (
        "estimator support",
        {
            "_estimators.resolve",
            "_estimators.docstrings",
            "_estimators.dask",
            "_estimators.attributes",
            "_estimators.forward",
        },
    ),
    ("datasets", {"datasets"}),
    ("random features", {"_random_features"}),
    ("attention estimators", {"_estimators.base"}),
    (
        "public estimators",
        {
            "_estimators.transformer",
            "_estimators.predictors",
            "text",
            "compose",
            "patterns",
        },
    ),
    ("displays", {"plotting"}),
    # and the paths that pickles of development versions recording no version
    # name, which refuse them (_persistence)
    ("package", {"__init__", "_estimators", "_transformer", "_predictors"}),
]
PREFIX_RANK = {
    prefix: rank for rank, (_, parts) in enumerate(LAYERS) for prefix in parts
}

# At most this many private modules sit at the top of the package: the rest
# live in the folders of their layers.
MAX_TOP_LEVEL_PRIVATE_MODULES = 8


def rank_of(name):
    """The layer of a module by its dotted name under skattn."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in PREFIX_RANK:
            return PREFIX_RANK[prefix]
    raise KeyError(f"{name} belongs to no layer of LAYERS")


# Modules of pure numpy on arrays (and scipy): no scikit-learn.
NUMPY_ONLY = (
    "_parallel",
    "_kernels",
    "_model",
    "_random_features.configs",
    "_random_features.runner",
    "_random_features.models",
    "_random_features.columns",
)


def modules():
    """Every module of the package: (dotted name under skattn, path)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        yield ".".join(parts), path


def imports(name, path):
    """The modules a module imports: (dotted name under skattn or None, the
    imported top-level package)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield _under_skattn(alias.name), alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
                yield target or "__init__", "skattn"
            else:
                yield _under_skattn(node.module), node.module.split(".")[0]


def _under_skattn(module):
    if module == "skattn":
        return "__init__"
    if module.startswith("skattn."):
        return module[len("skattn.") :]
    return None


MODULES = list(modules())


def test_every_module_has_a_layer():
    for name, _ in MODULES:
        rank_of(name)  # raises for a module of no layer


def test_every_listed_layer_has_a_module():
    names = [name for name, _ in MODULES]
    for prefix in PREFIX_RANK:
        assert any(n == prefix or n.startswith(prefix + ".") for n in names), prefix


def test_private_modules_live_in_the_folders_of_their_layers():
    top = [p.name for p in PACKAGE.glob("_*.py") if p.name != "__init__.py"]
    assert len(top) <= MAX_TOP_LEVEL_PRIVATE_MODULES, sorted(top)


@pytest.mark.parametrize("name, path", MODULES, ids=[name for name, _ in MODULES])
def test_modules_import_only_their_layer_and_below(name, path):
    rank = rank_of(name)
    for target, _ in imports(name, path):
        if target is None:
            continue
        target_rank = rank_of(target)
        assert target_rank <= rank, (
            f"{name} ({LAYERS[rank][0]}) imports {target} "
            f"({LAYERS[target_rank][0]}), a layer above it"
        )


@pytest.mark.parametrize(
    "name, path",
    [(name, path) for name, path in MODULES if name.startswith(NUMPY_ONLY)],
    ids=[name for name, _ in MODULES if name.startswith(NUMPY_ONLY)],
)
def test_kernels_and_model_import_no_sklearn_nor_an_estimator(name, path):
    for target, package in imports(name, path):
        assert package != "sklearn", f"{name} imports scikit-learn"
        if target is not None:
            assert target.startswith(NUMPY_ONLY), f"{name} imports {target}"


def test_the_layer_test_sees_an_upward_import(tmp_path):
    # the check itself: a kernel importing the model is caught
    module = tmp_path / "attention.py"
    module.write_text("from .._model.model import Model\nimport sklearn\n")
    found = list(imports("_kernels.attention", module))
    assert ("_model.model", "skattn") in found
    assert (None, "sklearn") in found


@pytest.mark.parametrize("name, path", list(modules()), ids=lambda x: str(x))
def test_no_module_is_over_750_lines(name, path):
    """A module that grows past this splits along its jobs."""
    n_lines = len(path.read_text().splitlines())
    assert n_lines <= 750, f"{name}: {n_lines} lines"


@pytest.mark.parametrize(
    "estimator, max_lines",
    [("AttentionTransformer", 320), ("RandomAttentionFeatures", 230)],
)
def test_estimator_docstrings_stay_short(estimator, max_lines):
    """The reference says what each parameter does; the measurements and the
    reasoning behind them live in the user guide. (Each value registered for
    an option adds its line to the reference: the caps follow the options.)"""
    n_lines = len(getattr(skattn, estimator).__doc__.splitlines())
    assert n_lines < max_lines, f"{estimator}: {n_lines} lines"


PRIVATE_PACKAGES = sorted(path.parent for path in PACKAGE.glob("_*/__init__.py"))


@pytest.mark.parametrize("package", PRIVATE_PACKAGES, ids=lambda path: path.name)
def test_the_map_of_each_private_package_names_its_modules(package):
    """A private package's docstring is its map: every module in it, by name."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    modules = [path.stem for path in package.glob("*.py") if path.stem != "__init__"]
    missing = [name for name in modules if f"``{name}``" not in doc]
    assert not missing, f"{package.name}'s docstring does not name {missing}"


def test_private_scikit_learn_apis_are_imported_by_one_module():
    """Only ``_input/validation.py`` imports scikit-learn's private names."""
    importers = set()
    for name, path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "sklearn"
            ):
                private = node.module.split(".")[-1].startswith("_") or any(
                    alias.name.startswith("_") for alias in node.names
                )
                if private:
                    importers.add(name)
    assert importers == {"_input.validation"}


def kernel_imports():
    """``{module: modules of skattn._kernels it imports}``, at any level of
    the module (a function's import counts)."""
    graph = {}
    folder = PACKAGE / "_kernels"
    for path in folder.glob("*.py"):
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    targets.add(node.module.split(".")[0])
                else:  # from . import a, b
                    targets.update(alias.name for alias in node.names)
        graph[path.stem] = targets - {path.stem}
    return graph


def test_the_kernels_import_each_other_without_a_circle():
    """No module of skattn._kernels imports, even within a function, one
    that imports it back: shared constants and helpers live in a module both
    import."""
    graph = kernel_imports()
    state = {}

    def visit(module, path):
        if state.get(module) == "done":
            return
        assert state.get(module) != "open", f"import circle: {' -> '.join(path)}"
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(graph):
        visit(module, [module])
