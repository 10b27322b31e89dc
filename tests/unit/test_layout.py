"""The shape of the code: what runs in the lookup Lambda, what in the loader, and how big a function gets.

These read the source (``ast``) or import it in a fresh interpreter; they fail
when a change puts loader code on the lookup's path, a write in the lookup's
data access, boto3 outside the data-access modules, an import against the
direction of the loader's parts (``loader/__init__.py``) or of the lookup's
packages (``lambdas/ipmeta/__init__.py``), a module name twice in the lookup
package, a product definition that only tests or benchmarks use, a function
over 60 lines, a class of the loader's data access over 20 methods, work that
only some routes need back on the lookup's cold start, or test code where it
does not belong: the product importing ``tests``, ``bench`` or ``testing``, the
benchmarks importing ``tests``, or ``testing`` importing either.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOOKUP_PACKAGE = ROOT / "lambdas" / "ipmeta"
RUNTIME_FOLDERS = ("lambdas", "loader", "ipmeta_cli")
#: What ships or deploys: the runtime, and the CDK app that deploys it.
PRODUCT_FOLDERS = (*RUNTIME_FOLDERS, "stacks")
#: The code that checks or measures the product, never part of it.
TEST_PACKAGES = ("tests", "bench", "testing")
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
        "loader/store/region_pointers.py",
        "loader/store/partition_counts.py",
        "loader/store/table_creation.py",
        "loader/store/s3.py",
        "loader/store/events.py",
        "loader/store/edge_cache.py",
        "loader/store/enrich_objects.py",
        "loader/store/enrich_executions.py",
    }
)
MAX_FUNCTION_LINES = 60
#: One small class per concern of the loader's data access, never one class that serves them all.
MAX_STORE_CLASS_METHODS = 20
#: The loader's packages, by role; its top-level modules are the vocabulary they share.
LOADER_PACKAGES = ("pipeline", "formats", "export", "planning", "store", "feeds", "enrich")
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
    # The enrich engine reads snapshots (files), never the table: no store, no pipeline.
    "enrich": {"errors", "shared", "formats", "export"},
    "pipeline": {"errors", "shared", "formats", "store", "export", "feeds", "enrich"},
}
#: The export modules that write files: pure over sorted ranges, so no table access.
FILE_WRITERS = ("loader/export/files.py", "loader/export/mmdb_writer.py", "loader/export/parquet.py")


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


def package_imports(tree: ast.Module, package: str) -> set[str]:
    """The modules of ``package`` a file imports, ``from loader import x`` read as ``loader.x``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == package:
            names.update(f"{package}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.split(".")[0] == package}


def loader_imports(tree: ast.Module) -> set[str]:
    return package_imports(tree, "loader")


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


@pytest.mark.parametrize("package", [*(f"loader/{package}" for package in LOADER_PACKAGES), "testing"])
def test_each_package_says_what_it_holds_and_may_import(package: str) -> None:
    docstring = ast.get_docstring(tree_of(ROOT / package / "__init__.py")) or ""
    modules = sorted(path.stem for path in (ROOT / package).glob("*.py") if path.stem != "__init__")
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


def report_of_a_fresh_import(
    child: str, *arguments: str, folders: tuple[Path, ...] = (ROOT / "lambdas",)
) -> Any:
    """What ``child`` prints (JSON), run in a fresh interpreter with only ``folders`` on the path,
    as a new Lambda container of the function whose asset they are."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(str(folder) for folder in folders)}
    output = subprocess.run(
        [sys.executable, "-c", child, *arguments],
        check=True,
        capture_output=True,
        text=True,
        cwd="/",
        env=environment,
    ).stdout
    return json.loads(output)


def test_importing_the_lookup_handler_loads_no_loader_code() -> None:
    # Given only the lookup's asset folder on the path, as in its Lambda
    child = (
        "import json, sys\n"
        "import ipmeta.api.handler\n"
        "outside = ('loader', 'ipmeta_cli', 'stacks', 'pyarrow', 'numpy')\n"
        "print(json.dumps(sorted(name for name in sys.modules if name.split('.')[0] in outside)))\n"
    )
    # Then it imports, and nothing of the loader, the CLI or the stacks came with it, nor the
    # enrich engine's pyarrow and numpy (only the enrich functions' layer carries them)
    assert report_of_a_fresh_import(child) == []


#: Lookup modules that only some routes use, imported by those routes on their first request,
#: and boto3, whose client the lookup's botocore client is (only the loader serializes items).
DEFERRED_MODULES = ("ipmeta.lookup.reverse", "boto3", "s3transfer")


def test_the_lookup_cold_start_leaves_what_only_some_routes_need_for_later() -> None:
    # Given a fresh interpreter with the lookup's asset on the path, as a new Lambda container
    child = (
        "import json, sys\n"
        "import ipmeta.api.handler\n"
        "from pydantic import BaseModel\n"
        "from ipmeta.api import models\n"
        "bases = (models.ApiModel, models.ApiRootModel)\n"
        "# The models the module defines; not the ``RootModel[...]`` classes pydantic adds to it.\n"
        "response_models = [value for value in vars(models).values()\n"
        "    if isinstance(value, type) and issubclass(value, BaseModel) and value not in bases\n"
        "    and value.__module__ == models.__name__ and not value.__pydantic_generic_metadata__['origin']]\n"
        "import gc\n"
        "print(json.dumps({\n"
        "    'imported': sorted(name for name in sys.argv[1:] if name in sys.modules),\n"
        "    'frozen': gc.get_freeze_count(), 'collecting': gc.isenabled(),\n"
        "    'models': len(response_models),\n"
        "    'built': sorted(model.__name__ for model in response_models if model.__pydantic_complete__),\n"
        "}))\n"
    )
    report = report_of_a_fresh_import(child, *DEFERRED_MODULES)
    # When the handler is imported, the reverse listing and boto3 are not (bench/cold_start.py
    # measures the gain)
    assert report["imported"] == []
    # And what the import made is out of the collector's way, which is on again for requests
    assert report["frozen"] > 10_000
    assert report["collecting"] is True
    # And no response model has built its validator yet: each is built on first use
    assert report["models"] > 20
    assert report["built"] == []


#: What only the feeds' handlers and the export handler run: the Distributed Map's scan,
#: resolve and write workers, most of a load's containers, start without them.
LOADER_DEFERRED_PACKAGES = ("loader.feeds", "loader.export")


def test_the_loader_cold_start_leaves_the_feeds_and_the_export_for_their_handlers() -> None:
    # Given a fresh interpreter with the loader's asset on the path, as a new loader container
    child = (
        "import gc, json, sys\n"
        "import loader.pipeline.handlers\n"
        "print(json.dumps({\n"
        "    'imported': sorted(name for name in sys.modules if name.startswith(tuple(sys.argv[1:]))),\n"
        "    'frozen': gc.get_freeze_count(), 'collecting': gc.isenabled(),\n"
        "}))\n"
    )
    report = report_of_a_fresh_import(child, *LOADER_DEFERRED_PACKAGES, folders=(ROOT / "lambdas", ROOT))
    # When the handlers' module is imported, nothing of the feeds or the export came with it
    assert report["imported"] == []
    # And what the import built is out of the collector's way, which is on again for the tasks
    assert report["frozen"] > 10_000
    assert report["collecting"] is True


#: What a command of the CLI imports when it runs, never when the parser is built: botocore
#: (through the store's client) and the load driver (boto3) cost every command about 0.3 s.
CLI_DEFERRED_PACKAGES = ("botocore", "boto3", "loader.pipeline.driver", "ipmeta.store.dynamodb")


def test_building_the_cli_parser_leaves_aws_and_the_load_driver_to_their_commands() -> None:
    # Given a fresh interpreter with the CLI on the path, as `ipmeta` starts
    child = (
        "import json, sys\n"
        "from ipmeta_cli.main import parser\n"
        "parser()\n"
        "print(json.dumps(sorted(name for name in sys.modules if name.startswith(tuple(sys.argv[1:])))))\n"
    )
    # When every command's arguments are registered, none of them came with it (`ipmeta enrich`
    # on a local snapshot, `ipmeta plan`, `--help` never need them)
    assert report_of_a_fresh_import(child, *CLI_DEFERRED_PACKAGES, folders=(ROOT / "lambdas", ROOT)) == []


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


def top_level_imports(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_modules(tree_of(path))}


@pytest.mark.parametrize("path", [*python_files(*PRODUCT_FOLDERS), ROOT / "app.py"], ids=module_of)
def test_the_product_never_imports_the_tests_the_benchmarks_or_their_helpers(path: Path) -> None:
    assert top_level_imports(path) & set(TEST_PACKAGES) == set()


@pytest.mark.parametrize("path", list(python_files("bench")), ids=module_of)
def test_the_benchmarks_never_import_the_tests(path: Path) -> None:
    # What a benchmark shares with the tests lives in testing/, which both import.
    assert "tests" not in top_level_imports(path)


@pytest.mark.parametrize("path", list(python_files("testing")), ids=module_of)
def test_the_shared_helpers_import_neither_the_tests_nor_the_benchmarks(path: Path) -> None:
    assert top_level_imports(path) & {"tests", "bench"} == set()


@pytest.mark.parametrize(
    "module", sorted(path.stem for path in (ROOT / "testing").glob("*.py") if path.stem != "__init__")
)
def test_each_shared_helper_is_used_by_the_tests_and_by_the_benchmarks(module: str) -> None:
    # A helper only the tests use belongs in tests/; one only a benchmark uses, in bench/.
    users = {
        folder
        for folder in ("tests", "bench")
        for path in python_files(folder)
        if f"testing.{module}" in imported_modules(tree_of(path))
    }
    assert users == {"tests", "bench"}


def test_no_function_is_longer_than_sixty_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in python_files(*RUNTIME_FOLDERS, "stacks")
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


# -- the lookup package, by role -------------------------------------------------------------------

#: The sub-packages of ``lambdas/ipmeta`` and what each may import of the others (itself always):
#: the schema is everyone's vocabulary; the lookup is pure logic over it; the store fills the
#: lookup's cover index; the shapes write what the lookup found; the API uses them all.
LOOKUP_PACKAGES_ALLOWED: dict[str, set[str]] = {
    "schema": set(),
    "lookup": {"schema"},
    "store": {"schema", "lookup"},
    "shapes": {"schema", "lookup"},
    "api": {"schema", "lookup", "store", "shapes"},
}


def lookup_part(module: str) -> str:
    """``ipmeta.lookup.answers`` is in ``lookup``; ``ipmeta`` itself in ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("path", list(python_files("lambdas/ipmeta")), ids=module_of)
def test_each_lookup_package_imports_only_the_packages_below_it(path: Path) -> None:
    module = ".".join(path.relative_to(ROOT / "lambdas").with_suffix("").parts)
    part = lookup_part(module)
    if part == "__init__":
        return
    imported = {name for name in imported_modules(tree_of(path)) if name.split(".")[0] == "ipmeta"}
    # ``from ipmeta.schema import keys`` names the package; that is enough to place it.
    against = {name for name in imported if lookup_part(name) not in LOOKUP_PACKAGES_ALLOWED[part] | {part}}
    assert against == set(), f"{part} may import only {sorted(LOOKUP_PACKAGES_ALLOWED[part])}"


def test_the_lookup_packages_are_exactly_the_ones_with_rules_and_hold_every_module() -> None:
    package = ROOT / "lambdas" / "ipmeta"
    folders = sorted(path.name for path in package.iterdir() if (path / "__init__.py").is_file())
    assert folders == sorted(LOOKUP_PACKAGES_ALLOWED)
    # Nothing lives beside them but the package's own docstring
    assert sorted(path.name for path in package.glob("*.py")) == ["__init__.py"]


@pytest.mark.parametrize("package", ["lambdas/ipmeta", "stacks"])
def test_no_module_name_is_repeated_in_a_package(package: str) -> None:
    names = [path.stem for path in python_files(package) if path.stem != "__init__"]
    assert sorted({name for name in names if names.count(name) > 1}) == []


@pytest.mark.parametrize("package", sorted(LOOKUP_PACKAGES_ALLOWED))
def test_each_lookup_package_says_what_it_holds_and_may_import(package: str) -> None:
    folder = ROOT / "lambdas" / "ipmeta" / package
    docstring = ast.get_docstring(tree_of(folder / "__init__.py")) or ""
    modules = sorted(path.stem for path in folder.glob("*.py") if path.stem != "__init__")
    assert [module for module in modules if f"``{module}``" not in docstring] == []
    assert "import" in docstring.lower()


def test_the_lookup_package_rules_catch_an_import_against_the_direction() -> None:
    # The schema importing the lookup, and the lookup importing the API, are refused.
    assert lookup_part("ipmeta.lookup.answers") not in LOOKUP_PACKAGES_ALLOWED["schema"]
    assert lookup_part("ipmeta.api.dependencies") not in LOOKUP_PACKAGES_ALLOWED["lookup"]
    assert lookup_part("ipmeta.store.dynamodb") not in LOOKUP_PACKAGES_ALLOWED["shapes"]


# -- the API: shared modules at the top, the fronts and the routes each in their own folder ---------

API_PACKAGE = LOOKUP_PACKAGE / "api"
#: The modules ``lambdas/ipmeta/api/`` may hold at its top, its ``__init__`` included.
MAX_API_TOP_MODULES = 10
#: The API's sub-packages and what of the API and of ipmeta each may import (besides itself):
#: the fronts decide whether a request passes before any route runs, from the schema alone, so an
#: authorizer's container loads nothing of the lookup; the routes may read a front's event shape.
API_SUBPACKAGES_ALLOWED: dict[str, set[str]] = {
    "fronts": {"ipmeta.schema"},
    "routes": {
        "ipmeta.schema",
        "ipmeta.lookup",
        "ipmeta.store",
        "ipmeta.shapes",
        "ipmeta.api",
        "ipmeta.api.dependencies",
        "ipmeta.api.models",
        "ipmeta.api.responses",
        "ipmeta.api.observability",
        "ipmeta.api.fronts",
    },
}


def api_import_allowed(imported: str, allowed: set[str]) -> bool:
    """``ipmeta.api.fronts.credentials`` is allowed by ``ipmeta.api.fronts``; ``ipmeta.api`` alone
    (``from ipmeta.api import dependencies``) names the package, not a module of it."""
    return any(
        imported == prefix or imported.startswith(prefix + ".") for prefix in allowed - {"ipmeta.api"}
    ) or (imported == "ipmeta.api" and "ipmeta.api" in allowed)


def test_the_api_keeps_at_most_ten_modules_at_its_top_and_the_rest_by_role() -> None:
    top = sorted(path.name for path in API_PACKAGE.glob("*.py"))
    assert len(top) <= MAX_API_TOP_MODULES, top
    folders = sorted(path.name for path in API_PACKAGE.iterdir() if (path / "__init__.py").is_file())
    assert folders == sorted(API_SUBPACKAGES_ALLOWED)


@pytest.mark.parametrize("package", sorted(API_SUBPACKAGES_ALLOWED))
def test_each_api_subpackage_says_what_it_holds_and_may_import(package: str) -> None:
    folder = API_PACKAGE / package
    docstring = ast.get_docstring(tree_of(folder / "__init__.py")) or ""
    modules = sorted(path.stem for path in folder.glob("*.py") if path.stem != "__init__")
    assert [module for module in modules if f"``{module}``" not in docstring] == []
    assert "import" in docstring.lower()
    # And the API's own docstring names the folder
    assert f"``{package}/``" in (ast.get_docstring(tree_of(API_PACKAGE / "__init__.py")) or "")


@pytest.mark.parametrize(
    "path",
    [path for package in API_SUBPACKAGES_ALLOWED for path in python_files(f"lambdas/ipmeta/api/{package}")],
    ids=module_of,
)
def test_each_api_subpackage_imports_only_what_its_role_allows(path: Path) -> None:
    package = path.relative_to(API_PACKAGE).parts[0]
    allowed = API_SUBPACKAGES_ALLOWED[package] | {f"ipmeta.api.{package}"}
    imported = {name for name in imported_modules(tree_of(path)) if name.split(".")[0] == "ipmeta"}
    assert {name for name in imported if not api_import_allowed(name, allowed)} == set()


def test_the_api_subpackage_rules_catch_an_import_against_the_direction() -> None:
    # A front importing a route or the resolver, and a route importing the resolver, are refused.
    fronts = API_SUBPACKAGES_ALLOWED["fronts"] | {"ipmeta.api.fronts"}
    assert not api_import_allowed("ipmeta.api.routes.page_routes", fronts)
    assert not api_import_allowed("ipmeta.api.app", fronts)
    assert not api_import_allowed("ipmeta.lookup.answers", fronts)
    assert api_import_allowed("ipmeta.api.fronts.credentials", fronts)
    routes = API_SUBPACKAGES_ALLOWED["routes"] | {"ipmeta.api.routes"}
    assert not api_import_allowed("ipmeta.api.app", routes)
    assert not api_import_allowed("ipmeta.api.handler", routes)
    assert api_import_allowed("ipmeta.api.fronts.front_events", routes)


# -- no definition only tests or benchmarks use -----------------------------------------------------

PRODUCT_FOLDERS = ("lambdas", "loader", "ipmeta_cli", "stacks")
#: Definitions the product never names because a library calls them: each with the caller.
CALLED_BY_A_LIBRARY = {
    # Lambda's context interface, which powertools' logger reads.
    "LocalLambdaContext.get_remaining_time_in_millis",
    # http.server's hooks.
    "ProxyRequestHandler.log_message",
    # io.BufferedReader's raw-stream interface, which the local server's rfile reads through.
    "DeadlineReader.readinto",
    # The same interface, through which pyarrow reads enrich's inputs (gzip inflated, byte ranges).
    "_Plain.readinto",
    "_Plain.readable",
    "_Inflating.readinto",
    "_Inflating.readable",
    "_Prefixed.readinto",
    "_Prefixed.readable",
    "_ByteRange.readinto",
    "_ByteRange.readable",
    # CDK's ILocalBundling interface.
    "_LoaderSources.try_bundle",
    # powertools' resolver turns each raw event into its event class through it.
    "LookupResolver._to_proxy_event",
}
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def product_definitions(tree: ast.Module) -> Iterator[tuple[str, int, bool]]:
    """Functions, classes, methods and module constants: (name, line, registered by a decorator)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name, node.lineno, bool(node.decorator_list)
        if isinstance(node, ast.ClassDef):
            for inner in node.body:
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef) and not inner.name.startswith(
                    "__"
                ):
                    yield f"{node.name}.{inner.name}", inner.lineno, bool(inner.decorator_list)
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for target in targets:
            if isinstance(target, ast.Name) and target.id.lstrip("_").isupper():
                yield target.id, node.lineno, False


def code_strings(tree: ast.Module) -> set[str]:
    """The words of a module's string values (handler paths, ``__all__``), not of its docstrings."""
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return {
        word
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        for word in _WORDS.findall(node.value)
    }


def names_read(tree: ast.Module) -> set[str]:
    """Every name a module reads, imports, or spells in a string value (a handler's path)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.alias):
            names.add(node.name.split(".")[-1])
    return names | code_strings(tree)


def module_name(path: Path) -> str:
    """``lambdas/ipmeta/lookup/answers.py`` is ``ipmeta.lookup.answers``; a package is its folder."""
    parts = list(path.relative_to(ROOT / "lambdas" if path.is_relative_to(ROOT / "lambdas") else ROOT).parts)
    parts[-1] = parts[-1].removesuffix(".py")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class ProductReads:
    """What the product reads of each module: names imported from it, attributes read where it
    is imported, its own reads, and the words of every string value."""

    def __init__(self, trees: dict[Path, ast.Module]) -> None:
        modules = {module_name(path) for path in trees}
        self.imported: set[tuple[str, str]] = set()
        self.attributes_of: dict[str, set[str]] = {}
        for tree in trees.values():
            attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    for alias in node.names:
                        self.imported.add((node.module, alias.name))
                        if f"{node.module}.{alias.name}" in modules:
                            self.attributes_of.setdefault(f"{node.module}.{alias.name}", set()).update(
                                attributes
                            )
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        self.attributes_of.setdefault(alias.name, set()).update(attributes)
        self.strings = set().union(*(code_strings(tree) for tree in trees.values()))
        self.own = {module_name(path): names_read(tree) for path, tree in trees.items()}
        self.anywhere = set().union(*self.own.values())

    def reads(self, module: str, name: str) -> bool:
        """A method by its name anywhere (its receiver's type is not known here); a module's own
        definition where its module reads it, imports name it, or importers read it as an attribute."""
        short = name.rsplit(".", maxsplit=1)[-1]
        if "." in name:
            return short in self.anywhere
        return (
            short in self.own[module]
            or (module, short) in self.imported
            or short in self.attributes_of.get(module, set())
            or short in self.strings
        )


def test_no_product_definition_is_used_only_by_tests_or_benchmarks() -> None:
    """A definition the product never reads is a second path users never run (or dead).

    Read means: used in its own module, imported from it, read as an attribute of it where
    it is imported, or spelled in a string value (a handler's path); docstrings do not count.
    ``reset…`` hooks of module state may stay, and so may what a library calls
    (``CALLED_BY_A_LIBRARY``).
    """
    paths = [*python_files(*PRODUCT_FOLDERS), ROOT / "app.py"]
    trees = {path: tree_of(path) for path in paths}
    reads = ProductReads(trees)
    unused = [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for path, tree in trees.items()
        for name, line, registered in product_definitions(tree)
        if not registered
        and not name.split(".")[-1].startswith("reset")
        and name not in CALLED_BY_A_LIBRARY
        and not reads.reads(module_name(path), name)
    ]
    assert unused == []


def test_the_unused_definition_check_sees_an_unused_function_and_a_used_one() -> None:
    # Given a module whose docstring names a function nothing calls
    source = (
        '"""``unused`` is here."""\nLIMIT = 3\n'
        "def used() -> int:\n    return LIMIT\ndef unused() -> None: ...\n"
    )
    caller = "from loader.example import used\nused()\n"
    trees = {
        ROOT / "loader" / "example.py": ast.parse(source),
        ROOT / "loader" / "caller.py": ast.parse(caller),
    }
    reads = ProductReads(trees)
    # Then the imported one and the constant it reads are used, and the one only its docstring names is not
    definitions = [name for name, _, _ in product_definitions(trees[ROOT / "loader" / "example.py"])]
    assert [name for name in definitions if not reads.reads("loader.example", name)] == ["unused"]


# -- the stacks, by role ------------------------------------------------------------------------------

#: The sub-packages of ``stacks`` and what each may import of the others (the shared top-level
#: modules always): a front knows nothing of loads, alarms or regions; the alarms and the regions
#: read a front; the stacks at the top assemble everything (``stacks/__init__.py``).
STACKS_PACKAGES_ALLOWED: dict[str, set[str]] = {
    "shared": set(),
    "fronts": {"shared"},
    "load": {"shared"},
    "monitoring": {"shared", "fronts"},
    "regions": {"shared", "fronts"},
    "assembly": {"shared", "fronts", "load", "monitoring", "regions"},
}
#: The top-level modules that build stacks from the parts; every other one is shared vocabulary.
STACKS_ASSEMBLY = frozenset({"ipmeta_stack", "lookup_region_stack", "deployment"})
MAX_STACKS_TOP_MODULES = 12


def stacks_part(module: str) -> str:
    """``stacks.fronts.edge`` is in ``fronts``; ``stacks.ipmeta_stack`` in ``assembly``; ``stacks.nag``
    in ``shared``."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and parts[1] in STACKS_PACKAGES_ALLOWED):
        return parts[1]
    return "assembly" if parts[1:] and parts[1] in STACKS_ASSEMBLY else "shared"


@pytest.mark.parametrize("path", list(python_files("stacks")), ids=module_of)
def test_each_stacks_part_imports_only_the_parts_below_it(path: Path) -> None:
    part = stacks_part(module_of(path))
    allowed = STACKS_PACKAGES_ALLOWED[part] | {part, "shared"}
    against = {name for name in package_imports(tree_of(path), "stacks") if stacks_part(name) not in allowed}
    assert against == set(), f"{part} may import only {sorted(allowed)}"


def test_the_stacks_rules_catch_an_import_against_the_direction() -> None:
    # A front importing the alarms, and a shared module importing a front, are refused.
    assert stacks_part("stacks.monitoring.dashboard") not in STACKS_PACKAGES_ALLOWED["fronts"]
    assert stacks_part("stacks.fronts.lookup_api") not in STACKS_PACKAGES_ALLOWED["shared"]
    assert stacks_part("stacks.ipmeta_stack") == "assembly"
    assert stacks_part("stacks.config") == "shared"
    source = "from stacks import nag\nfrom stacks.load import schedule"
    imported = package_imports(ast.parse(source), "stacks")
    assert imported == {"stacks.nag", "stacks.load"}


def test_the_stacks_top_holds_few_modules_and_its_packages_are_the_ones_with_rules() -> None:
    top = sorted(path.stem for path in (ROOT / "stacks").glob("*.py") if path.stem != "__init__")
    assert len(top) <= MAX_STACKS_TOP_MODULES, top
    folders = sorted(path.name for path in (ROOT / "stacks").iterdir() if (path / "__init__.py").is_file())
    assert folders == sorted(set(STACKS_PACKAGES_ALLOWED) - {"shared", "assembly"})
    # The top's docstring names every module and package there, and the import direction
    docstring = ast.get_docstring(tree_of(ROOT / "stacks" / "__init__.py")) or ""
    assert [name for name in (*top, *folders) if f"``{name}``" not in docstring] == []
    assert "import" in docstring.lower()


@pytest.mark.parametrize("package", sorted(set(STACKS_PACKAGES_ALLOWED) - {"shared", "assembly"}))
def test_each_stacks_package_says_what_it_holds_and_may_import(package: str) -> None:
    folder = ROOT / "stacks" / package
    docstring = ast.get_docstring(tree_of(folder / "__init__.py")) or ""
    modules = sorted(path.stem for path in folder.glob("*.py") if path.stem != "__init__")
    assert [module for module in modules if f"``{module}``" not in docstring] == []
    assert "import" in docstring.lower()
