"""``tune_allocators``: a chunk's freed arrays are reused by the next chunk, not faulted in again,
and numpy asks for no huge pages.

Run in a fresh interpreter: the setting changes the whole process, and pytest's worker
should keep its own allocators.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHURN = """
import json, resource
import numpy as np
from loader.enrich.memory import tune_allocators

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

def chunks():
    # Five chunks, each a 40 MB array written and freed before the next.
    before = faults()
    for _ in range(5):
        values = np.ones(40 << 20, dtype=np.uint8)
        del values
    return faults() - before

chunks()  # the first round pays for first touching the heap either way
default = chunks()
kept = tune_allocators()
chunks()  # the first round after it grows the heap once
after = chunks()
print(json.dumps({"default": default, "kept": kept, "after": after,
                  "huge_pages": np._core.multiarray._set_madvise_hugepage(False)}))
"""


def test_memory_a_chunk_frees_is_reused_without_faulting_pages_in_again() -> None:
    # Given a fresh process that allocates and frees chunk-sized arrays
    output = subprocess.run(
        [sys.executable, "-c", CHURN], check=True, capture_output=True, text=True, cwd=ROOT
    ).stdout
    report = json.loads(output)
    # When the heap keeps freed memory
    assert report["kept"] is True
    # Then the same chunks fault (almost) no page in again, where by default each one did
    assert report["default"] >= 50  # 40 MB is 20 huge pages, or 10,240 small ones
    assert report["after"] <= report["default"] // 10
    # And numpy no longer asks the kernel for huge pages (each fault may compact memory first)
    assert report["huge_pages"] is False
