"""``exportMmdb``: an Export state between WriteChunks and Activate, and a loader asset that can read .mmdb.

The loader's asset ships maxminddb's pure-Python reader (its C extension is
built for this machine, not for Lambda's arm64 runtime); the lookup's asset
ships neither the loader nor maxminddb.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loader.pipeline.export_task import EXPORT_PREFIX
from stacks.config import IpmetaConfig
from stacks.constants import ENV_EXPORTS_ENABLED, LOADER_MODULE, LOOKUP_HANDLER, REPO_ROOT
from stacks.load.loader_functions import EXPORT_TASK, TABLE_ACTIONS, sizing
from stacks.load.loader_workflow import TASK_TIMEOUT_MARGIN, VERIFICATION_PENDING_ERROR
from tests.infra.cfn import (
    as_list,
    function_by_handler,
    iter_states,
    policy_statements_of_role,
    resources_of_type,
    state_machine_definition,
)
from tests.infra.conftest import DEFAULT, EXPORT_MMDB, VARIANTS, Synthesized, cdk_json

ASL_VALIDATOR = REPO_ROOT / "node_modules" / ".bin" / "asl-validator"
EXPORT_HANDLER = f"{LOADER_MODULE}.{EXPORT_TASK}"
MMDB_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "mmdb"


def _asset(synthesized: Synthesized, variant: str, handler: str) -> Path:
    _, function = function_by_handler(synthesized.templates[variant], handler)
    asset_hash = function["Properties"]["Code"]["S3Key"].removesuffix(".zip")
    # A Stage's assets land in the app's output folder, not in its assembly's.
    [asset] = {
        folder / f"asset.{asset_hash}"
        for folder in (Path(synthesized.asset_dirs[variant]), synthesized.outdir)
        if (folder / f"asset.{asset_hash}").is_dir()
    }
    return asset


def _pinned(package: str) -> str:
    for line in (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        name, _, version = line.partition("==")
        if name.strip().lower() == package:
            return version.split(";")[0].strip()
    raise AssertionError(f"{package} is not pinned in requirements.txt")


# -- the assets ---------------------------------------------------------------------------------------


def test_the_loader_asset_ships_maxminddb_as_pure_python_with_its_pinned_metadata(
    synthesized: Synthesized,
) -> None:
    asset = _asset(synthesized, DEFAULT, f"{LOADER_MODULE}.start")
    package = asset / "maxminddb"
    assert {"__init__.py", "reader.py", "decoder.py", "const.py"} <= {p.name for p in package.glob("*.py")}
    # No compiled code anywhere in the asset: it would be this machine's, not Lambda's
    assert [p for p in asset.rglob("*") if p.suffix in (".so", ".pyd", ".dylib")] == []
    # maxminddb reads its version from its installed metadata when imported
    [info] = asset.glob("maxminddb-*.dist-info")
    assert info.name == f"maxminddb-{_pinned('maxminddb')}.dist-info"
    assert (info / "METADATA").is_file()
    assert not (info / "RECORD").exists()


def test_the_loader_asset_reads_a_mmdb_with_no_site_packages_and_no_extension(
    synthesized: Synthesized, tmp_path: Path
) -> None:
    # Given the asset alone on the path (-S: no site-packages; -B: the asset stays as synthesized)
    asset = _asset(synthesized, DEFAULT, f"{LOADER_MODULE}.start")
    database = _small_database(tmp_path)
    child = (
        "import json, sys, pathlib, maxminddb\n"
        "from loader.formats.mmdb_rows import open_mmdb_rows\n"
        "from loader.formats.rows import FormatOptions, SourceRow\n"
        "reader = maxminddb.open_database(sys.argv[1])\n"
        "rows = open_mmdb_rows(pathlib.Path(sys.argv[1]), 'small.mmdb', FormatOptions(format='mmdb'))\n"
        "print(json.dumps({'file': maxminddb.__file__, 'extension': maxminddb._extension is not None,\n"
        "    'reader': type(reader).__module__, 'record': reader.get('10.0.0.1'),\n"
        "    'networks': len(list(reader)), 'rows': sum(isinstance(r, SourceRow) for r in rows)}))\n"
    )
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    completed = subprocess.run(
        [sys.executable, "-S", "-B", "-c", child, str(database)],
        capture_output=True,
        text=True,
        cwd="/",
        env={**environment, "PYTHONPATH": str(asset)},
        check=True,
    )
    found = json.loads(completed.stdout)
    # Then the asset's own copy imports, falls back to the pure-Python reader, and answers,
    # and the loader's mmdb format reads every network through it
    assert found["file"].startswith(str(asset))
    assert found["extension"] is False
    assert found["reader"] == "maxminddb.reader"
    assert found["record"] == {"country": "AU", "latitude": -27.4767}
    assert found["networks"] == found["rows"] == 2


def _small_database(folder: Path) -> Path:
    from loader.export.mmdb_writer import DatabaseMetadata, write_database

    out = folder / "small.mmdb"
    ranges: list[tuple[int, int, int, dict[str, Any]]] = [
        (4, 0x0A000000, 0x0A0000FF, {"country": "AU", "latitude": -27.4767}),
        (6, 0x20010DB8 << 96, (0x20010DB8 << 96) + 0xFFFF, {"country": "NZ"}),
    ]
    write_database(ranges, out, DatabaseMetadata("test", {"en": "test"}))
    return out


@pytest.mark.parametrize("variant", [DEFAULT, EXPORT_MMDB])
def test_the_lookup_asset_holds_neither_loader_code_nor_maxminddb(
    synthesized: Synthesized, variant: str
) -> None:
    asset = _asset(synthesized, variant, LOOKUP_HANDLER)
    assert sorted(path.name for path in asset.iterdir()) == ["ipmeta"]
    assert not list(asset.rglob("maxminddb*"))
    assert not [p for p in asset.rglob("*.py") if "import maxminddb" in p.read_text(encoding="utf-8")]


# -- the Export state ---------------------------------------------------------------------------------


def test_by_default_there_is_no_export_state_function_or_export_grant(synthesized: Synthesized) -> None:
    template = synthesized.templates[DEFAULT]
    assert cdk_json()["context"]["exportMmdb"] is False
    states = dict(iter_states(state_machine_definition(template)["States"]))
    assert "Export" not in states
    assert states["WriteChunks"]["Next"] == "Activate"
    assert f"{EXPORT_PREFIX}/" not in json.dumps(template)
    with pytest.raises(AssertionError):
        function_by_handler(template, EXPORT_HANDLER)


def test_export_runs_after_the_writes_and_before_activate_which_names_it(synthesized: Synthesized) -> None:
    states = dict(iter_states(state_machine_definition(synthesized.templates[EXPORT_MMDB])["States"]))
    export, activate = states["Export"], states["Activate"]

    assert states["WriteChunks"]["Next"] == "Export"
    assert export["Next"] == "Activate"
    assert export["Parameters"] == {"load_id.$": "$.load_id"}
    assert export["ResultPath"] == "$.export"
    # The change event names the file: Activate gets the export's result
    assert activate["Parameters"] == {"load_id.$": "$.load_id", "export.$": "$.export"}
    # A failed export is a failed load: Abort, and the previous version keeps serving
    [catch] = export["Catch"]
    assert (catch["ErrorEquals"], catch["Next"]) == (["States.ALL"], "Abort")
    config = IpmetaConfig.model_validate({**cdk_json()["context"], **VARIANTS[EXPORT_MMDB]})
    timeout = sizing(EXPORT_TASK, config).timeout.plus(TASK_TIMEOUT_MARGIN).to_seconds()
    assert export["TimeoutSeconds"] == timeout
    assert all("TimeoutSeconds" in state for state in states.values() if state["Type"] == "Task")


def test_export_retries_a_check_that_ran_out_of_time_as_activate_does(synthesized: Synthesized) -> None:
    # The export's count of the version stops at its time budget (VerificationPending) with its
    # progress saved: only the retry lets a version too big for one invocation be exported
    states = dict(iter_states(state_machine_definition(synthesized.templates[EXPORT_MMDB])["States"]))
    pending = [
        retry
        for state in ("Export", "Activate")
        for retry in states[state]["Retry"]
        if retry["ErrorEquals"] == [VERIFICATION_PENDING_ERROR]
    ]
    assert len(pending) == 2
    assert pending[0] == pending[1]


def test_the_export_function_is_sized_for_a_streaming_write_to_tmp(synthesized: Synthesized) -> None:
    _, function = function_by_handler(synthesized.templates[EXPORT_MMDB], EXPORT_HANDLER)
    properties = function["Properties"]
    size = sizing(
        EXPORT_TASK, IpmetaConfig.model_validate({**cdk_json()["context"], **VARIANTS[EXPORT_MMDB]})
    )
    assert properties["MemorySize"] == size.memory_mb == cdk_json()["context"]["loaderMemoryMb"]
    assert properties["Timeout"] == 900
    assert properties["EphemeralStorage"] == {"Size": size.ephemeral_storage_mb}


def test_export_may_write_only_under_the_export_prefix_and_read_the_table(synthesized: Synthesized) -> None:
    template = synthesized.templates[EXPORT_MMDB]
    _, function = function_by_handler(template, EXPORT_HANDLER)
    statements = policy_statements_of_role(template, function["Properties"]["Role"]["Fn::GetAtt"][0])
    s3 = [statement for statement in statements if _service_actions(statement, "s3")]
    dynamodb = {action for statement in statements for action in _service_actions(statement, "dynamodb")}

    assert [as_list(statement["Action"]) for statement in s3] == [["s3:PutObject"]]
    bucket_arn = s3[0]["Resource"]["Fn::Join"][1][0]
    assert s3[0]["Resource"] == {"Fn::Join": ["", [bucket_arn, f"/{EXPORT_PREFIX}/*"]]}
    assert dynamodb == set(TABLE_ACTIONS[EXPORT_TASK])
    assert not dynamodb & {"dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem"}
    # No other function may write there; cleanup alone may delete (a deleted version's file)
    _, cleanup = function_by_handler(template, f"{LOADER_MODULE}.cleanup")
    for other in resources_of_type(template, "AWS::Lambda::Function").values():
        if other is function:
            continue
        role = other["Properties"]["Role"]["Fn::GetAtt"][0]
        granted = [
            s for s in policy_statements_of_role(template, role) if f"/{EXPORT_PREFIX}/" in json.dumps(s)
        ]
        assert [as_list(s["Action"]) for s in granted] == ([["s3:DeleteObject"]] if other is cleanup else [])
    assert cleanup["Properties"]["Environment"]["Variables"][ENV_EXPORTS_ENABLED] == "true"


def _service_actions(statement: dict[str, Any], service: str) -> list[str]:
    return [action for action in as_list(statement["Action"]) if action.startswith(f"{service}:")]


def test_the_export_definition_passes_asl_validator(synthesized: Synthesized, tmp_path: Path) -> None:
    path = tmp_path / "definition.json"
    path.write_text(json.dumps(state_machine_definition(synthesized.templates[EXPORT_MMDB])))
    completed = subprocess.run(
        [str(ASL_VALIDATOR), "--json-path", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
