"""``python -m sim.compile [-v]``: compile the hot modules with mypyc (see :mod:`sim.compiled`).

A module of its own because ``python -m sim.compiled`` would run a second copy of the module
``sim/__init__.py`` has already imported. Run it with ``RCUSIM_PURE=1`` (as the Makefile does)
so the import of :mod:`sim` does not warn that the build it is about to replace is stale.
"""

from __future__ import annotations

import sys

from sim import compiled

if __name__ == "__main__":
    path = compiled.build(verbose="-v" in sys.argv[1:])
    sys.stdout.write(f"sim.compiled: {len(compiled.MODULES)} modules compiled with mypyc; {path.relative_to(compiled.ROOT)}\n")
