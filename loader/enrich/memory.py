"""How an enrich process allocates: memory a chunk frees is kept for the next chunk, in small pages.

Each chunk allocates and frees the same few hundred megabytes of numpy arrays (a chunk of
250 k rows: a few MB each). glibc hands a freed block back to the kernel once it is above
its mmap threshold (dynamic, up to 32 MB) or once the heap's free top passes its trim
threshold, and the next chunk then faults each page in again, zeroed by the kernel first. On
10 M addresses of the ASN demo that was about 270 k of the job's 370 k page faults, and most
of its 1.4 s of system time (a tenth of its CPU), measured with `/usr/bin/time`.

``tune_allocators`` fixes both thresholds high, so a freed chunk's memory stays in the heap
for the next one. Arrow's buffers come from its own pool (mimalloc), which already reuses
what it frees. The peak grows by what the heap keeps between chunks, about 45 MB on the
5 M-range city synthetic.

It also stops numpy from asking for transparent huge pages on its large arrays
(``madvise``): where the kernel's THP defrag is ``madvise``, as here, each such fault may
compact memory first, and the snapshot's load (600 MB of new arrays) spent 0.4-0.8 s in the
kernel instead of 0.2-0.45 s; the job ran 3% faster on both benchmarks, measured
interleaved (docs/decisions.md, "Where enrich's time goes").

It is called once, first thing, by the two processes that run enrich: `ipmeta enrich` and the
enrich task's Lambda. It changes the whole process, so ``enrich_part``, which tests and other
callers share, does not call it.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
from collections.abc import Callable
from typing import Final

#: ``mallopt``'s parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3
#: Blocks up to this size come from the heap, and are reused once freed. A chunk's largest
#: array is a few MB; the snapshot's, about 60 MB on 5 M ranges.
MMAP_THRESHOLD_BYTES: Final = 64 << 20
#: Free memory at the top of the heap kept instead of handed back to the kernel.
TRIM_THRESHOLD_BYTES: Final = 512 << 20


@functools.cache
def tune_allocators() -> bool:
    """Set this process's allocators for enrich. Returns whether the heap is kept (False where
    the C library is not glibc, whose thresholds these are)."""
    # numpy's own switch (its import reads NUMPY_MADVISE_HUGEPAGE into it); a numpy without it
    # asks for no huge pages.
    multiarray = importlib.import_module("numpy._core.multiarray")
    set_madvise: Callable[[bool], bool] | None = getattr(multiarray, "_set_madvise_hugepage", None)
    if set_madvise is not None:
        set_madvise(False)
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    if not libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES):
        return False
    return bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
