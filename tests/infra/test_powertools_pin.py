"""The Powertools layer in the stack is the release the code is tested with."""

from __future__ import annotations

import re

from stacks.constants import POWERTOOLS_LAYER_NAME, POWERTOOLS_VERSION, REPO_ROOT
from stacks.function import ARCHITECTURE, RUNTIME


def test_requirements_pin_the_same_powertools_release_as_the_layer() -> None:
    requirements = (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8")
    pins = re.findall(r"^aws-lambda-powertools(?:\[[^\]]*\])?==([^\s;#]+)", requirements, re.MULTILINE)
    assert pins == [POWERTOOLS_VERSION]


def test_layer_is_built_for_the_function_runtime_and_architecture() -> None:
    python = RUNTIME.name.replace(".", "")  # python3.13 -> python313
    expected = f"AWSLambdaPowertoolsPythonV3-{python}-{ARCHITECTURE.name}"
    assert expected == POWERTOOLS_LAYER_NAME
