"""The lookup page at ``/`` and its static files under ``/static/``: for people, not programs.

The page (``page/index.html``, ``page/static/page.js`` and ``page.css``) asks the API itself,
``GET v1/ip[/{ip}]``, from the browser: it answers the caller's own address, or ``?ip=``, and
draws a map when the data has a latitude and longitude, with Leaflet (npm ``leaflet``, pinned in
``package.json``; its ``dist`` files and licence are copied under ``page/static/leaflet/`` and
ship with the function). The map's tiles come from OpenStreetMap, in the browser.

- **No key for the page**, on every front: it holds no data. Its lookups go to ``/v1`` and
  need the key there; the page asks for it once and keeps it in the browser's local storage.
- **A strict Content-Security-Policy**: scripts and styles from this origin only (no inline
  script or style anywhere), images from this origin and OpenStreetMap's tiles, requests to
  this origin. ``tests/integration/test_page_browser.py`` loads it in Chromium and finds no
  violation.
- **Behind a stage** (``/api/``) the page's links are relative to a ``<base>`` the handler
  fills in, as the docs route does for its OpenAPI document.
- **Files are read once per container**, on the first request that wants them; a name that
  is not one of the page's files is a 404, so no path reaches the file system from a request.
"""

from __future__ import annotations

import html
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Final

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from ipmeta.api.fronts.credentials import PAGE_PATH, STATIC_PREFIX
from ipmeta.api.fronts.front_events import RestEvent

router = APIGatewayRouter()  # type: ignore[no-untyped-call]

#: The page's map tiles, in the browser: the only other origin the page may load from.
TILE_ORIGIN: Final = "https://tile.openstreetmap.org"
CONTENT_SECURITY_POLICY: Final = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        f"img-src 'self' {TILE_ORIGIN}",
        "connect-src 'self'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
CONTENT_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    "LICENSE": "text/plain; charset=utf-8",
}
#: Static files change with a deployment only: a day in browsers; the page itself is checked each time.
STATIC_MAX_AGE_SECONDS: Final = 86_400
_SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
}


def _page_folder() -> Traversable:
    return resources.files("ipmeta.api.routes") / "page"


@cache
def static_files() -> dict[str, bytes]:
    """Every static file by its path under ``/static/`` (``leaflet/images/marker-icon.png``)."""
    found: dict[str, bytes] = {}
    pending = [(_page_folder() / "static", "")]
    while pending:
        folder, prefix = pending.pop()
        for entry in folder.iterdir():
            if entry.is_dir():
                pending.append((entry, f"{prefix}{entry.name}/"))
            else:
                found[prefix + entry.name] = entry.read_bytes()
    return found


@cache
def page_html(base: str) -> str:
    template = (_page_folder() / "index.html").read_text(encoding="utf-8")
    return template.replace("{{base}}", html.escape(base, quote=True))


def _content_type(name: str) -> str:
    suffix = name[name.rfind(".") :] if "." in name else name.rsplit("/", 1)[-1]
    return CONTENT_TYPES.get(suffix, "application/octet-stream")


def stage_prefix(event: BaseProxyEvent) -> str:
    """``/api`` when called through a REST stage's URL; nothing through a custom domain, the HTTP
    API's ``$default`` stage or a function URL: what the page's links and the OpenAPI document's
    server start with."""
    if not isinstance(event, RestEvent):
        return ""
    context = event.request_context
    stage = context.stage
    return f"/{stage}" if stage and stage != "$default" and context.path.startswith(f"/{stage}/") else ""


@router.get(PAGE_PATH, include_in_schema=False)
def get_page() -> Response[str]:
    return Response(
        status_code=200,
        content_type=CONTENT_TYPES[".html"],
        body=page_html(stage_prefix(router.current_event) + "/"),
        headers={**_SECURITY_HEADERS, "Cache-Control": "no-cache"},
    )


def _static(name: str) -> Response[str | bytes]:
    data = static_files().get(name)
    if data is None:
        raise NotFoundError(f"{STATIC_PREFIX}/{name}")
    content_type = _content_type(name)
    # Text (SVG too) as text; an image as bytes, which powertools sends base64-encoded (the REST API's
    # binary media types turn it back into bytes; the HTTP API does so by itself).
    body = data.decode("utf-8") if content_type.startswith("text/") or name.endswith(".svg") else data
    return Response(
        status_code=200,
        content_type=content_type,
        body=body,
        headers={**_SECURITY_HEADERS, "Cache-Control": f"public, max-age={STATIC_MAX_AGE_SECONDS}"},
    )


# Powertools' path parameters never hold a "/": one route per folder depth the page has. Its
# response validation would write bytes as UTF-8 text: the images go out as they are (base64).
@router.get(f"{STATIC_PREFIX}/<name>", include_in_schema=False, enable_validation=False)
def get_static(name: str) -> Response[str | bytes]:
    return _static(name)


@router.get(f"{STATIC_PREFIX}/<folder>/<name>", include_in_schema=False, enable_validation=False)
def get_static_in_folder(folder: str, name: str) -> Response[str | bytes]:
    return _static(f"{folder}/{name}")


@router.get(f"{STATIC_PREFIX}/<folder>/<inner>/<name>", include_in_schema=False, enable_validation=False)
def get_static_two_deep(folder: str, inner: str, name: str) -> Response[str | bytes]:
    return _static(f"{folder}/{inner}/{name}")
