"""The one way this stack builds a Python Lambda function.

Every function gets its own role and its own log group, and the role may only
write to that log group: no ``AWSLambdaBasicExecutionRole`` managed policy, so
each function's permissions are exactly what its construct grants.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import (
    AssetHashType,
    Aws,
    BundlingOptions,
    DockerImage,
    Duration,
    ILocalBundling,
    RemovalPolicy,
    Size,
    Stack,
    Tags,
)
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.constants import (
    CORE_PACKAGE_DIR,
    LAMBDAS_DIR,
    LOADER_DIR,
    POWERTOOLS_LAYER_ACCOUNT,
    POWERTOOLS_LAYER_NAME,
    POWERTOOLS_LAYER_VERSION,
    POWERTOOLS_VERSION,
)
from stacks.nag import acknowledge

RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64
_ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "**/.pytest_cache", "**/.mypy_cache"]
_LAYER_ID = "PowertoolsLayer"


def powertools_layer_arn() -> str:
    return (
        f"arn:aws:lambda:{Aws.REGION}:{POWERTOOLS_LAYER_ACCOUNT}:layer:"
        f"{POWERTOOLS_LAYER_NAME}:{POWERTOOLS_LAYER_VERSION}"
    )


def powertools_layer(scope: Construct) -> lambda_.ILayerVersion:
    """The public Powertools layer, imported once per stack."""
    stack = Stack.of(scope)
    existing = stack.node.try_find_child(_LAYER_ID)
    if existing is not None:
        return existing  # type: ignore[return-value]
    return lambda_.LayerVersion.from_layer_version_arn(stack, _LAYER_ID, powertools_layer_arn())


def lookup_code() -> lambda_.Code:
    return lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=_ASSET_EXCLUDES)


#: Third-party packages the loader ships in its asset (the runtime brings boto3, the layer
#: Powertools): pure Python only, as ``(import name, distribution name)``.
LOADER_PACKAGES: tuple[tuple[str, str], ...] = (("maxminddb", "maxminddb"),)
#: Compiled extensions are built for this machine, not for Lambda's arm64 runtime.
_NATIVE_SUFFIXES = ("*.so", "*.pyd", "*.dylib", "*.pyi")


def installed_package(name: str) -> Path:
    """The folder of an installed package, as this interpreter imports it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the loader's asset needs {name}: install requirements.txt into the venv")
    return Path(next(iter(spec.submodule_search_locations)))


@jsii.implements(ILocalBundling)
class _LoaderSources:
    """Copies ``loader/``, the core package and the loader's pure-Python packages, with no docker.

    The loader imports ``ipmeta``, which lives under ``lambdas/`` in the
    repository but must sit at the root of the loader's asset. ``maxminddb``
    ships without its C extension: ``open_database``'s default mode
    (``MODE_AUTO``) falls back to the pure-Python reader when the extension
    does not import. Its ``dist-info`` goes too, because ``maxminddb``
    reads its own version from the installed metadata when imported.
    """

    sources: tuple[tuple[Path, str], ...] = ((LOADER_DIR, "loader"), (CORE_PACKAGE_DIR, "ipmeta"))

    def try_bundle(self, output_dir: str, *_options: Any, **_keywords: Any) -> bool:
        for source, name in self.sources:
            _copy(source, Path(output_dir) / name)
        for package, distribution in LOADER_PACKAGES:
            _copy(installed_package(package), Path(output_dir) / package, *_NATIVE_SUFFIXES)
            info = _dist_info(distribution)
            # RECORD would list the extension left behind.
            _copy(info, Path(output_dir) / info.name, "RECORD", "INSTALLER", "REQUESTED")
        return True


def _dist_info(distribution: str) -> Path:
    installed = importlib.metadata.distribution(distribution)
    for file in installed.files or ():
        if file.name == "METADATA" and file.parent.name.endswith(".dist-info"):
            return Path(str(installed.locate_file(file.parent)))
    raise RuntimeError(f"{distribution} has no .dist-info metadata to ship")


def _copy(source: Path, target: Path, *excluded: str) -> None:
    shutil.copytree(
        source,
        target,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", *excluded),
        dirs_exist_ok=True,
    )


def loader_code() -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(LOADER_DIR),
        # The output holds the core package too, so hash what ships, not loader/.
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            image=DockerImage.from_registry("unused"),
            local=_LoaderSources(),
        ),
    )


class PythonFunction(Construct):
    """An arm64 Python 3.13 function with the Powertools layer and its own logs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        handler: str,
        description: str,
        environment: Mapping[str, str],
        memory_mb: int,
        timeout: Duration,
        log_retention: logs.RetentionDays,
        tracing: bool = False,
        ephemeral_storage_mb: int | None = None,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group, self.role = self._build_logs_and_role(description, log_retention)
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=code,
            handler=handler,
            description=description,
            environment=dict(environment),
            memory_size=memory_mb,
            timeout=timeout,
            ephemeral_storage_size=Size.mebibytes(ephemeral_storage_mb) if ephemeral_storage_mb else None,
            reserved_concurrent_executions=reserved_concurrency,
            role=self.role,
            log_group=self.log_group,
            layers=[powertools_layer(self)],
            # Lambda's own X-Ray segments, with no SDK in the code (docs/decisions.md).
            tracing=lambda_.Tracing.ACTIVE if tracing else lambda_.Tracing.DISABLED,
        )
        # The layer's ARN names a layer number, not the Powertools release the code is
        # tested with (requirements.txt); the tag says which one, on every function.
        Tags.of(self.function).add("ipmeta:powertools-version", POWERTOOLS_VERSION)
        # Grants land in the role's default policy after the function exists in
        # the tree; depending on the whole role makes CloudFormation attach them
        # before the function can first run.
        self.function.node.add_dependency(self.role)
        acknowledge(
            self.function,
            "L1",
            "Pinned to python3.13: the Powertools layer is built per Python version "
            f"({POWERTOOLS_LAYER_NAME}) and the code is tested on 3.13; the runtime, "
            "the layer name and CI move to a new Python together.",
        )

    def _build_logs_and_role(
        self, description: str, log_retention: logs.RetentionDays
    ) -> tuple[logs.LogGroup, iam.Role]:
        log_group = logs.LogGroup(self, "Logs", retention=log_retention, removal_policy=RemovalPolicy.DESTROY)
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{description} (Lambda execution role)",
        )
        log_group.grant_write(role)
        return log_group, role
