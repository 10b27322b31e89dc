"""How an enrich process allocates: memory a chunk frees is kept for the next chunk.

Each chunk allocates and frees the same few hundred megabytes of numpy arrays (a chunk of
250 k rows: a few MB each). glibc hands a freed block back to the kernel once it is above
its mmap threshold (dynamic, up to 32 MB) or once the heap's free top passes its trim
threshold, and the next chunk then faults each page in again, zeroed by the kernel first. On
10 M addresses of the ASN demo that was about 270 k of the job's 370 k page faults, and most
of its 1.4 s of system time (a tenth of its CPU), measured with `/usr/bin/time`.

``keep_freed_memory`` fixes both thresholds high, so a freed chunk's memory stays in the heap
for the next one. Arrow's buffers come from its own pool (mimalloc), which already reuses
what it frees. The peak grows by what the heap keeps between chunks, about 45 MB on the 5 M-range
city synthetic (docs/decisions.md, "Where enrich's time goes").

It is called once, first thing, by the two processes that run enrich: `ipmeta enrich` and the
enrich task's Lambda. It changes the whole process, so ``enrich_part``, which tests and other
callers share, does not call it.
"""

from __future__ import annotations

import ctypes
import functools
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
def keep_freed_memory() -> bool:
    """Set this process's heap for enrich. False, and nothing changed, where the C library is
    not glibc (whose thresholds these are)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    if not libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES):
        return False
    return bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
