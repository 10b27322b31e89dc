"""The lookup page's files: Leaflet as npm ships it (the pinned version, its licence), and no inline code.

The page ships with the lookup function (``lambdas/ipmeta/api/routes/page/``), so the Leaflet files are
copies, committed; these tests keep them equal to ``node_modules/leaflet`` at the version
``package.json`` pins.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ipmeta.api.routes.page_routes import CONTENT_TYPES, static_files

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "lambdas" / "ipmeta" / "api" / "routes" / "page"
SHIPPED = PAGE / "static" / "leaflet"
NPM = ROOT / "node_modules" / "leaflet"
LEAFLET_FILES = (
    "leaflet.js",
    "leaflet.css",
    *(f"images/{path.name}" for path in (SHIPPED / "images").glob("*.png")),
)


def test_leaflet_is_pinned_to_one_version() -> None:
    package = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    version = package["devDependencies"]["leaflet"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), "pin an exact version"
    lock = json.loads((ROOT / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"]["node_modules/leaflet"]["version"] == version
    assert f't.version="{version}"' in (SHIPPED / "leaflet.js").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", [*LEAFLET_FILES, "LICENSE"])
def test_the_shipped_leaflet_files_are_npms(name: str) -> None:
    if not NPM.is_dir():
        pytest.fail("node_modules/leaflet is missing: run `make setup` (npm ci)")
    source = NPM / name if name == "LICENSE" else NPM / "dist" / name
    assert (SHIPPED / name).read_bytes() == source.read_bytes()


def test_the_marker_images_the_map_needs_are_shipped() -> None:
    images = {path.name for path in (SHIPPED / "images").glob("*.png")}
    assert {"marker-icon.png", "marker-icon-2x.png", "marker-shadow.png"} <= images
    assert "BSD 2-Clause" in (SHIPPED / "LICENSE").read_text(encoding="utf-8")


def test_the_page_has_no_inline_script_or_style() -> None:
    text = (PAGE / "index.html").read_text(encoding="utf-8")
    assert re.findall(r"<script(?![^>]*\bsrc=)", text) == []
    assert "<style" not in text
    assert re.findall(r"\s(?:style|on[a-z]+)=", text) == []


def test_every_static_file_has_a_content_type() -> None:
    for name in static_files():
        suffix = name[name.rfind(".") :] if "." in name else name.rsplit("/", 1)[-1]
        assert suffix in CONTENT_TYPES, name
