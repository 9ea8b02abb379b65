"""The Python package's layers (docs/dev/layout.md, "The Python package"): each imports only the layers below it,
the Horovod-compatible API and the strategy do not import each other, and no module imports itself back
through others. Read from the source (every import statement, also inside functions), not at run time."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "bps_tf"

# What each layer may import from bps_tf, besides itself.
ALLOWED = {
    "_native": set(),
    "compat": set(),
    "tf_environment": set(),
    "process": {"_native"},
    "numpy": {"_native", "process"},
    "process_sets": {"_native", "process", "numpy"},
    "objects": {"_native", "process", "numpy", "process_sets"},
    "compression_state": {"_native", "process", "numpy", "process_sets", "objects"},
    "communication_metrics": {"_native", "process", "numpy"},
    # Elastic training: the framework-neutral state machine, and each framework's states over the ops.
    "elastic": {"_native", "process", "numpy", "process_sets", "objects", "ops"},
    "launcher": {"_native", "tf_environment"},
    "plan": set(),
    "ops": {"compat", "process", "process_sets", "tf_environment"},
    "tensorflow": {"compat", "process", "numpy", "process_sets", "objects", "compression_state", "elastic",
                   "communication_metrics", "ops"},
    "strategy": {"compat", "process", "numpy", "process_sets", "objects", "compression_state", "elastic",
                 "ops"},
    "keras": {"compat", "process", "numpy", "process_sets", "objects", "compression_state", "elastic",
              "communication_metrics", "ops", "tensorflow"},
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def _imports(path, module):
    """The bps_tf modules `path` imports. `from bps_tf.x import y` imports the module bps_tf.x.y if there is
    one, else bps_tf.x. (A package's own __init__ runs first either way; that is not counted.)"""
    known = {name for name, _ in _modules()}
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("bps_tf")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bps_tf"):
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
    return {name for name in found if name in known and name != module}


def _layer(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


GRAPH = {name: _imports(path, name) for name, path in _modules()}


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _layer(m)))
def test_each_module_imports_only_the_layers_below_it(module):
    layer = _layer(module)
    assert layer in ALLOWED, f"{module}: a layer the layout does not name"
    outside = {m for m in GRAPH[module] if _layer(m) not in ALLOWED[layer] | {layer, None}}
    assert not outside, f"{module} reaches past its layer: {sorted(outside)}"


# Horovod's split (horovod/common/elastic.py apart from each framework's states): these know no framework.
FRAMEWORK_NEUTRAL_ELASTIC = ("bps_tf.elastic.generations", "bps_tf.elastic.state", "bps_tf.elastic.collection")


@pytest.mark.parametrize("module", FRAMEWORK_NEUTRAL_ELASTIC)
def test_the_elastic_state_machine_knows_no_framework(module):
    path = PACKAGE.parent.joinpath(*module.split(".")).with_suffix(".py")
    top_level = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            top_level |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            top_level.add(node.module.split(".")[0])
    assert not top_level & {"tensorflow", "keras", "tf_keras"}, f"{module} imports a framework"
    framework = {m for m in GRAPH[module] if m.startswith("bps_tf.ops") or m.endswith("_state")}
    assert not framework, f"{module} imports framework code: {sorted(framework)}"


def test_no_import_cycle():
    # The package root resolves its public names lazily (on first use), so it is no part of a cycle.
    graph = {m: {d for d in deps if d != "bps_tf"} for m, deps in GRAPH.items() if m != "bps_tf"}
    state = {}

    def visit(module, path):
        state[module] = "visiting"
        for dependency in sorted(graph.get(module, ())):
            if state.get(dependency) == "visiting":
                cycle = path[path.index(dependency):] + [dependency]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dependency not in state:
                visit(dependency, path + [dependency])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_bytepsstrategy_is_a_top_level_name():
    import bps_tf

    assert "BytePSStrategy" in dir(bps_tf)
    from bps_tf import BytePSStrategy
    from bps_tf.strategy import BytePSStrategy as from_strategy

    assert BytePSStrategy is from_strategy
