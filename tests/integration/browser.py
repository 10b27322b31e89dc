"""Headless Chromium driven over the DevTools protocol, through a pipe: no driver, no package.

``--remote-debugging-pipe`` makes Chromium read protocol commands from its file
descriptor 3 and write answers and events to 4, each message JSON ended by a NUL.
The page tests use it to load a page, wait for what it renders, read the console
and every Content-Security-Policy violation, and take screenshots.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
#: How every browser test starts Chromium: headless, and with nothing of its own reaching the
#: network (this machine's is closed, and a test must see only what the page asks for).
HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
#: Recorded in the page before its own scripts run: the CSP violations the browser reports to it.
CSP_RECORDER = (
    "window.__cspViolations = [];"
    "document.addEventListener('securitypolicyviolation', (event) =>"
    " window.__cspViolations.push(event.violatedDirective + ' ' + event.blockedURI));"
)


def find_chromium() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def _high_fd(fd: int) -> int:
    """A copy of ``fd`` numbered 10 or more, so that placing it at 3 or 4 clobbers nothing."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return high


class Browser:
    """One headless Chromium, one page (``Target``), its events kept for the test to read."""

    def __init__(self, executable: str, profile: Path, *, blocked: tuple[str, ...] = ()) -> None:
        to_browser_read, to_browser_write = (_high_fd(fd) for fd in os.pipe())
        from_browser_read, from_browser_write = (_high_fd(fd) for fd in os.pipe())

        def into_place() -> None:  # in the child, before exec
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        self.process = subprocess.Popen(
            [
                executable,
                *HEADLESS_FLAGS,
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            preexec_fn=into_place,  # noqa: PLW1509 - the pipe's ends must sit at 3 and 4
            pass_fds=(3, 4),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._out = os.fdopen(to_browser_write, "wb", buffering=0)
        self._in = os.fdopen(from_browser_read, "rb", buffering=0)
        self._next_id = 0
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        if blocked:
            self.send("Network.setBlockedURLs", urls=list(blocked))
        self.send("Page.addScriptToEvaluateOnNewDocument", source=CSP_RECORDER)

    def _read(self) -> None:
        buffer = b""
        while chunk := self._in.read(65536):
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    with self._lock:
                        answers = self._answers.get(message["id"])
                    if answers is not None:
                        answers.put(message)
                else:
                    self.events.append(message)

    def call(self, method: str, *, session: str | None = None, **params: Any) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            command_id = self._next_id
            answers: queue.Queue[dict[str, Any]] = queue.Queue()
            self._answers[command_id] = answers
        command: dict[str, Any] = {"id": command_id, "method": method, "params": params}
        if session:
            command["sessionId"] = session
        self._out.write(json.dumps(command).encode() + b"\0")
        answer = answers.get(timeout=30)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """A command to the page's session."""
        return self.call(method, session=self.session, **params)

    def open(self, url: str, *, width: int = 1200, height: int = 1000) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.send("Page.navigate", url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, seconds: float = 20.0) -> Any:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
            except RuntimeError:
                value = None  # the page is still navigating
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"the page never made true: {expression}")

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def problems(self, *, allowed_hosts: tuple[str, ...] = ()) -> list[str]:
        """Console errors, uncaught exceptions, the browser's own errors and CSP violations; a
        failed load from ``allowed_hosts`` (the map's tiles, blocked in the tests) is expected."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(arg.get("value")) for arg in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                entry = params["entry"]
                if not any(host in entry.get("url", "") for host in allowed_hosts):
                    found.append(f"log ({entry['source']}): {entry['text']} {entry.get('url', '')}")
        found.extend(f"csp: {violation}" for violation in self.evaluate("window.__cspViolations || []"))
        return found

    def close(self) -> None:
        with suppress(RuntimeError, OSError, queue.Empty):
            self.call("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._out.close()


@contextmanager
def browser(executable: str, profile: Path, *, blocked: tuple[str, ...] = ()) -> Iterator[Browser]:
    opened = Browser(executable, profile, blocked=blocked)
    try:
        yield opened
    finally:
        opened.close()
