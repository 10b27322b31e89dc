"""The shape of the code: what runs in the lookup Lambda, what in the loader, and how big a function gets.

These read the source (``ast``) or import it in a fresh interpreter; they fail
when a change puts loader code on the lookup's path, a write in the lookup's
data access, boto3 outside the data-access modules, or a function over 60 lines.
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
        "lambdas/ipmeta/store.py",
        "loader/table.py",
        "loader/s3.py",
        "loader/events.py",
    }
)
MAX_FUNCTION_LINES = 60


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
