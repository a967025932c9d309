"""rcusim's substrate: a SimPy model of a multi-CPU machine running a Linux-like scheduler.

Imports only SimPy and NumPy; ``models/`` builds kernel mechanisms on it.
"""

from .scenario import VERSION as __version__

__all__ = ["__version__"]
