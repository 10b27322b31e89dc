"""The shape of the code: what runs in the lookup Lambda, what in the loader, and how big a function gets.

These read the source (``ast``) or import it in a fresh interpreter; they fail
when a change puts loader code on the lookup's path, a write in the lookup's
data access, boto3 outside the data-access modules, an import against the
direction of the loader's parts (``loader/__init__.py``), a function over 60 lines,
or a class of the loader's data access over 20 methods.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOOKUP_PACKAGE = ROOT / "lambdas" / "ipmeta"
RUNTIME_FOLDERS = ("lambdas", "loader", "ipmeta_cli")
#: DynamoDB client operations that change a table.
WRITE_OPERATIONS = frozenset(
    {
        "put_item",
        "update_item",
        "delete_item",
        "batch_write_item",
        "transact_write_items",
        "create_table",
        "update_table",
        "delete_table",
    }
)
#: The modules that may talk to AWS through boto3: each side's data access.
BOTO3_MODULES = frozenset(
    {
        "lambdas/ipmeta/store/dynamodb.py",
        "loader/store/dataset_items.py",
        "loader/store/batch_writes.py",
        "loader/store/versions.py",
        "loader/store/loads.py",
        "loader/store/load_lock.py",
        "loader/store/table_creation.py",
        "loader/store/s3.py",
        "loader/store/events.py",
    }
)
MAX_FUNCTION_LINES = 60
#: One small class per concern of the loader's data access, never one class that serves them all.
MAX_STORE_CLASS_METHODS = 20
#: The loader's packages, by role; its top-level modules are the vocabulary they share.
LOADER_PACKAGES = ("pipeline", "formats", "export", "planning", "store", "feeds")
#: What each part of the loader may import from the loader besides itself. ``errors``
#: stands apart from the other shared modules because ``formats`` may import it alone.
LOADER_IMPORTS_ALLOWED = {
    "errors": set(),
    "shared": {"errors", "formats"},
    "formats": {"errors"},
    "store": {"errors", "shared"},
    "planning": {"errors", "shared"},
    "export": {"errors", "shared", "formats", "store"},
    # The vendor feeds reach the network through their own HTTP module and hand
    # files to the pipeline (which may import them), never the other way.
    "feeds": {"errors", "shared"},
    "pipeline": {"errors", "shared", "formats", "store", "export", "feeds"},
}
#: The export modules that write files: pure over sorted ranges, so no table access.
FILE_WRITERS = ("loader/export/files.py", "loader/export/mmdb_writer.py")


def python_files(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


def tree_of(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported_modules(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def loader_imports(tree: ast.Module) -> set[str]:
    """The loader modules a file imports, ``from loader import x`` read as ``loader.x``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "loader":
            names.update(f"loader.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.split(".")[0] == "loader"}


def loader_part(module: str) -> str:
    """The part of the loader a module is in.

    ``loader.store.table`` is in ``store``, ``loader.errors`` in ``errors``, ``loader.options`` in ``shared``.
    """
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LOADER_PACKAGES:
        return parts[1]
    return "errors" if parts[1:] == ["errors"] else "shared"


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


@pytest.mark.parametrize("path", list(python_files("loader")), ids=module_of)
def test_each_loader_part_imports_only_the_parts_below_it(path: Path) -> None:
    # Given the part this module belongs to, and the parts that part may use
    part = loader_part(module_of(path))
    allowed = LOADER_IMPORTS_ALLOWED[part] | {part}
    tree = tree_of(path)
    # Then every loader module it imports is in one of them
    against = {name for name in loader_imports(tree) if loader_part(name) not in allowed}
    assert against == set(), f"{part} may import only {sorted(allowed)}"
    # And no loader code reaches into the CLI or the infrastructure
    assert not {name for name in imported_modules(tree) if name.split(".")[0] in ("ipmeta_cli", "stacks")}


def test_the_loader_parts_rules_catch_an_import_against_the_direction() -> None:
    # A store module importing a pipeline state, and a format importing the options, are refused.
    store = loader_part("loader.store.table")
    assert loader_part("loader.pipeline.write") not in LOADER_IMPORTS_ALLOWED[store]
    imported = loader_imports(ast.parse("from loader import options\nfrom loader.store import table"))
    assert imported == {"loader.options", "loader.store"}
    assert {loader_part(name) for name in imported} - LOADER_IMPORTS_ALLOWED["formats"] == {"shared", "store"}


@pytest.mark.parametrize("relative", FILE_WRITERS)
def test_the_export_file_writers_do_not_read_the_table(relative: str) -> None:
    imported = loader_imports(tree_of(ROOT / relative))
    assert {name for name in imported if loader_part(name) == "store"} == set()


@pytest.mark.parametrize("package", LOADER_PACKAGES)
def test_each_loader_package_says_what_it_holds_and_may_import(package: str) -> None:
    docstring = ast.get_docstring(tree_of(ROOT / "loader" / package / "__init__.py")) or ""
    modules = sorted(
        path.stem for path in (ROOT / "loader" / package).glob("*.py") if path.stem != "__init__"
    )
    # Every module of the package is named in its docstring, and so are its import rules
    assert [module for module in modules if f"``{module}``" not in docstring] == []
    assert "import" in docstring.lower()


def test_the_pipeline_docstring_names_every_lambda_task_the_stack_runs() -> None:
    from stacks.constants import FEED_TASKS, LOADER_MODULE, LOADER_TASKS

    assert LOADER_MODULE == "loader.pipeline.handlers"
    docstring = ast.get_docstring(tree_of(ROOT / "loader" / "pipeline" / "__init__.py")) or ""
    handlers = {
        node.name
        for node in tree_of(ROOT / "loader" / "pipeline" / "handlers.py").body
        if isinstance(node, ast.FunctionDef)
    }
    for task in (*LOADER_TASKS, "export", *FEED_TASKS):
        assert task in handlers
        assert f"``{task}``" in docstring or f"``handlers.{task}``" in docstring, task


def test_importing_the_lookup_handler_loads_no_loader_code() -> None:
    # Given only the lookup's asset folder on the path, as in its Lambda
    child = (
        "import json, sys\n"
        "import ipmeta.api.handler\n"
        "outside = ('loader', 'ipmeta_cli', 'stacks')\n"
        "print(json.dumps(sorted(name for name in sys.modules if name.split('.')[0] in outside)))\n"
    )
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "lambdas")}
    output = subprocess.run(
        [sys.executable, "-c", child], check=True, capture_output=True, text=True, cwd="/", env=environment
    ).stdout
    # Then it imports, and nothing of the loader, the CLI or the stacks came with it
    assert json.loads(output) == []


@pytest.mark.parametrize("path", list(python_files("lambdas")), ids=lambda path: path.name)
def test_no_lookup_module_imports_the_loader_or_writes_to_the_table(path: Path) -> None:
    tree = tree_of(path)
    assert not {name for name in imported_modules(tree) if name.split(".")[0] in ("loader", "ipmeta_cli")}
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert not called & WRITE_OPERATIONS


def crowded_classes(tree: ast.Module) -> list[tuple[str, int]]:
    """Each class of ``tree`` with more than ``MAX_STORE_CLASS_METHODS`` methods, and its count."""
    counts = [
        (node.name, sum(isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in node.body))
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    ]
    return [(name, count) for name, count in counts if count > MAX_STORE_CLASS_METHODS]


def test_no_class_in_the_loaders_store_has_more_than_twenty_methods() -> None:
    crowded = {
        str(path.relative_to(ROOT)): found
        for path in python_files("loader/store")
        if (found := crowded_classes(tree_of(path)))
    }
    assert crowded == {}


def test_the_method_count_rule_catches_a_class_that_serves_every_concern() -> None:
    # A class of 21 methods (properties and class methods count too) is refused; one of 20 is not.
    methods = "".join(f"    def method_{number}(self) -> None: ...\n" for number in range(20))
    assert crowded_classes(ast.parse(f"class Table:\n{methods}")) == []
    extra = "    @property\n    def one_more(self) -> int: ...\n"
    assert crowded_classes(ast.parse(f"class Table:\n{methods}{extra}")) == [("Table", 21)]


def test_boto3_is_imported_only_by_the_data_access_modules() -> None:
    importers = {
        str(path.relative_to(ROOT))
        for path in python_files(*RUNTIME_FOLDERS)
        if any(name.split(".")[0] in ("boto3", "botocore") for name in imported_modules(tree_of(path)))
    }
    # The CLI may catch botocore's errors to print them as one line.
    assert importers - {"ipmeta_cli/main.py"} <= BOTO3_MODULES


def test_no_function_is_longer_than_sixty_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in python_files(*RUNTIME_FOLDERS)
        for node in ast.walk(tree_of(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


#: The feeds' one module that opens connections, and what counts as opening one.
FEEDS_HTTP_MODULE = "loader/feeds/http_client.py"
NETWORK_MODULES = ("http.client", "urllib.request", "urllib3", "requests", "socket", "ssl")


def test_the_feeds_reach_the_network_only_through_their_http_module() -> None:
    importers = {
        str(path.relative_to(ROOT))
        for path in python_files("loader/feeds")
        if any(name.startswith(NETWORK_MODULES) for name in imported_modules(tree_of(path)))
    }
    assert importers == {FEEDS_HTTP_MODULE}
