"""Swagger UI at /v1/docs, as a person sees it: headless Chromium renders the page.

The page must work offline (its JS and CSS are inline), list every operation,
and leave a screenshot in ``test-artifacts/`` for people to look at.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ipmeta_cli.server import LocalApiServer
from tests.integration.browser import HEADLESS_FLAGS, find_chromium

ARTIFACTS = Path(__file__).parents[2] / "test-artifacts"
OPERATIONS = ["/v1/ip/{ip}", "/v1/ip/{ip}/{field}", "/v1/ip", "/v1/batch", "/v1/datasets", "/v1/health"]

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def chromium() -> str:
    path = find_chromium()
    if path:
        return path
    pytest.skip("no headless Chromium on this machine (Debian: apt-get install -y chromium)")


def run_chromium(browser: str, profile: Path, *args: str) -> str:
    command = [
        browser,
        *HEADLESS_FLAGS,
        f"--user-data-dir={profile}",
        # Lets Swagger UI's scripts run to completion before the DOM or pixels are taken.
        "--virtual-time-budget=10000",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_swagger_ui_lists_every_operation(chromium: str, api_server: LocalApiServer, tmp_path: Path) -> None:
    url = f"{api_server.url}/v1/docs"
    dom = run_chromium(chromium, tmp_path / "profile", "--dump-dom", url)
    assert "swagger-ui" in dom
    rendered_paths = dom.count('class="opblock-summary-path"')
    assert rendered_paths >= len(OPERATIONS), "Swagger UI did not render the operations"
    for path in OPERATIONS:
        assert f'data-path="{path}"' in dom, path

    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "swagger-ui.png"
    screenshot.unlink(missing_ok=True)
    run_chromium(chromium, tmp_path / "profile", "--window-size=1280,1600", f"--screenshot={screenshot}", url)
    assert screenshot.stat().st_size > 10_000
