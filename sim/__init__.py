"""rcusim's substrate: a SimPy model of a multi-CPU machine running a Linux-like scheduler.

Imports only SimPy, NumPy and mypy_extensions; ``models/`` builds kernel mechanisms on it. Its
hot modules run compiled with mypyc when a fresh build exists (:mod:`sim.compiled`).
"""

from . import compiled

compiled.install()  # before any hot module is imported: see sim/compiled.py

from .scenario import VERSION as __version__  # noqa: E402

__all__ = ["__version__"]
