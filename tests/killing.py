"""A loader process run until a condition holds, then SIGKILLed: how the fault tests stop a load mid-phase."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
PROJECT = Path(__file__).parent.parent


def kill_when(
    command: Sequence[str], env: Mapping[str, str], found: Callable[[], T | None], *, timeout: float = 120
) -> tuple[T, int]:
    """Run ``command``, polling ``found`` every few milliseconds; SIGKILL it once ``found`` returns
    something. Returns that, and the process's exit status; fails if the moment never came."""
    process = subprocess.Popen(
        list(command), env=dict(env), cwd=PROJECT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    caught: T | None = None
    try:
        deadline = time.monotonic() + timeout
        while caught is None and time.monotonic() < deadline and process.poll() is None:
            caught = found()
            if caught is not None:
                process.send_signal(signal.SIGKILL)
            time.sleep(0.005)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert caught is not None, f"never caught the loader at that moment: {stderr}"
    return caught, process.returncode
