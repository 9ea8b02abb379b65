"""The malloc bps_tf's processes run with (BYTEPS_ALLOCATOR), preloaded by bpslaunch into each process it starts.

A push_pull's requests, callbacks and frames are made on the caller's thread and freed on the transport's
thread when the reply comes. glibc's malloc serves such memory slowly (the freeing thread's cache fills, the
allocating thread's stays empty, both meet in the arena under its lock); jemalloc hands it back cheaply. With
jemalloc a worker spends about a third less CPU on a small push_pull (docs/performance.md section 7), so
bpslaunch preloads it where it is installed (Debian and Ubuntu: `apt-get install libjemalloc2`), as PyTorch's
CPU launcher does with tcmalloc and jemalloc. TensorFlow's own CPU tensors come from its BFC allocator
(tf_environment), not from malloc.

BYTEPS_ALLOCATOR: "jemalloc" (the default: preloaded if installed, glibc's malloc otherwise; set explicitly,
it must be installed), "system" (glibc's malloc, nothing preloaded), or the path of a malloc library to preload.
A malloc the user preloads already (LD_PRELOAD naming jemalloc, tcmalloc or mimalloc) is kept.

With jemalloc, bps_tf's allocation router (libbps_preload.so, next to the package's native libraries) is
preloaded ahead of it: once a worker starts, it sends the aligned allocations of 1 MiB and more, which is how
TensorFlow takes its memory, to an arena a server on the host can map, which then reads and writes the
tensors of a push_pull where they lie (cc/common/shareable_heap.h). Every other allocation goes to jemalloc
as before.

What jemalloc costs: in a process with NumPy, it hands a freed NumPy array of more than 8 MB back to the kernel
at once, where glibc's malloc keeps blocks of up to 32 MB for the next, so a NumPy push_pull of 16 MB (which
makes a new output array each call) runs 1.3-1.6 times as long as with glibc. Keeping freed memory
(MALLOC_CONF=dirty_decay_ms:-1) avoids that but doubled a worker's peak memory, so it is not the default.

This module imports nothing heavy: the launcher uses it before any process starts.
"""

import ctypes.util
import functools
import os

VARIABLE = "BYTEPS_ALLOCATOR"
ROUTER = "libbps_preload.so"
JEMALLOC = "jemalloc"
SYSTEM = "system"
_KNOWN_MALLOCS = ("jemalloc", "tcmalloc", "mimalloc")


@functools.lru_cache(maxsize=None)
def find_jemalloc():
    """The loader's name of the installed jemalloc (libjemalloc.so.2), or None (looked up once: it runs
    ldconfig)."""
    return ctypes.util.find_library(JEMALLOC)


def library(environ, find=None):
    """The library to preload for `environ` (None: glibc's malloc). Raises ValueError for a setting that
    cannot be served, saying what to do. `find`: finds jemalloc (default find_jemalloc)."""
    find = find or find_jemalloc
    choice = environ.get(VARIABLE, "").strip()
    if choice == SYSTEM:
        return None
    if choice in ("", JEMALLOC):
        found = find()
        if found is None and choice == JEMALLOC:
            raise ValueError(f"{VARIABLE}=jemalloc, but jemalloc is not installed: install it (Debian and "
                             f"Ubuntu: apt-get install libjemalloc2) or set {VARIABLE}=system")
        return found
    if not os.path.isfile(choice):
        raise ValueError(f"{VARIABLE}={choice!r}: not a file; give jemalloc, system, or the path of a malloc "
                         "library (a .so) to preload")
    if any(c in choice for c in " :"):  # LD_PRELOAD separates its entries with them
        raise ValueError(f"{VARIABLE}={choice!r}: LD_PRELOAD cannot name a path with a space or a colon; "
                         "link the library from a path without them")
    return os.path.abspath(choice)  # (every process resolves it alike, whatever its working directory)


def router():
    """The path of bps_tf's allocation router, or None where it is not built or LD_PRELOAD cannot name it (a
    space or a colon in the package's path: tensors are then copied to servers, as without jemalloc)."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ROUTER)
    return path if os.path.isfile(path) and not any(c in path for c in " :") else None


def _preloads(environ):
    return [entry for entry in environ.get("LD_PRELOAD", "").replace(":", " ").split() if entry]


def apply(environ, find=None):
    """Adds the chosen malloc to LD_PRELOAD in `environ` (unless a malloc is preloaded already), and with
    jemalloc the router ahead of it; returns `environ`."""
    chosen = library(environ, find)
    before = _preloads(environ)
    preloads = list(before)
    preloaded = chosen in preloads or any(m in os.path.basename(p) for p in preloads for m in _KNOWN_MALLOCS)
    if chosen is not None and not preloaded:
        preloads = [chosen] + preloads
    routes = router()
    if routes and routes not in preloads and any(JEMALLOC in os.path.basename(p) for p in preloads):
        preloads = [routes] + preloads
    if preloads != before:
        environ["LD_PRELOAD"] = " ".join(preloads)
    return environ


def in_effect(environ):
    """Whether `environ` (this process's, if it is os.environ) preloads what `apply` would."""
    return apply(dict(environ)).get("LD_PRELOAD", "") == environ.get("LD_PRELOAD", "")
