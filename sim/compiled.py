"""The hot modules of the engine and of the lock model, compiled with mypyc when a fresh build exists.

mypyc (the mypy project's compiler) turns type-annotated modules into C extensions with
the same behaviour: the same code, with attribute reads of its classes as C struct fields and
calls between its functions as C calls. It takes about 45 % off the run time of the
``hackbench-rt-2008`` story and about 40 % off the engine benchmark (README, Speed); the
results are bit for bit the same, which ``tests/test_compiled.py`` checks against a
plain-Python run in a child process.

The Python sources stay the reference. ``make install`` (``python -m sim.compile``)
compiles :data:`MODULES` into ``build/compiled/`` and writes there a manifest with a digest
of every ``.py`` file under ``sim/`` and ``models/``. Importing :mod:`sim` calls
:func:`install`, which puts a finder for the compiled modules first on ``sys.meta_path``
only when that digest still matches the sources and the build is for this Python:

* no build: plain Python, silently (a checkout that never ran ``make``);
* a stale build (a source changed since): plain Python, and one line on stderr saying so,
  so an edited model is never run as its old compiled self;
* ``RCUSIM_PURE=1`` in the environment: plain Python (debugging, coverage, the check above).

All the compiled modules are used, or none: compiled classes call each other natively, so a
mix of compiled and plain modules cannot work.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "compiled"
MANIFEST = BUILD / "manifest.json"
FORMAT = 1

# The modules that run per event (py-spy and cachegrind profiles, docs/notes/speed.md): the engine's
# loop, tasks and ops, pipes, cost jitter, and the kernel locks hackbench-rt-2008 takes.
MODULES = (
    "sim/machine.py",
    "sim/task.py",
    "sim/ops.py",
    "sim/channel.py",
    "sim/rng.py",
    "models/locks/core.py",
)

_state: dict[str, Any] = {"installed": False, "reason": "not checked"}


def source_digest() -> str:
    """sha256 of every ``.py`` file under ``sim/`` and ``models/`` (paths and contents).

    Wider than :data:`MODULES` on purpose: mypyc compiles a module against the types and
    constants of the modules it imports, so any change there makes the build stale too.
    """
    h = hashlib.sha256()
    for pkg in ("sim", "models"):
        for p in sorted((ROOT / pkg).rglob("*.py")):
            h.update(p.relative_to(ROOT).as_posix().encode())
            h.update(b"\0")
            h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def _rel(p: Path) -> str:
    try:
        return p.relative_to(ROOT).as_posix()
    except ValueError:
        return str(p)


def _abi() -> str:
    return f"{sys.implementation.cache_tag}-{importlib.machinery.EXTENSION_SUFFIXES[0]}"


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the compiled extension of each module in the manifest, and nothing else."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> Any:
        so = self.files.get(fullname)
        if so is None:
            return None
        return importlib.util.spec_from_file_location(fullname, so)


def status() -> tuple[bool, str]:
    """(compiled modules in use, why or why not), for ``rcusim --version``, the explorer and the benchmarks."""
    return bool(_state["installed"]), str(_state["reason"])


def _check() -> tuple[dict[str, Path] | None, str, bool]:
    """(files to load or None, reason, whether the reason deserves a warning)."""
    if os.environ.get("RCUSIM_PURE", "") not in ("", "0"):
        return None, "plain Python (RCUSIM_PURE is set)", False
    if not MANIFEST.exists():
        return None, "plain Python (no compiled build: `make install` or `python -m sim.compile`)", False
    try:
        man = json.loads(MANIFEST.read_text())
        files = {name: BUILD / rel for name, rel in man["files"].items()}
        fmt, abi, digest = man["format"], man["abi"], man["digest"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return None, f"plain Python (unreadable {_rel(MANIFEST)}: {e}; `make install` rebuilds it)", True
    if fmt != FORMAT or abi != _abi():
        return None, f"plain Python (the compiled build is for {abi}, this is {_abi()}; `make install` rebuilds it)", True
    if digest != source_digest():
        return None, "plain Python (sim/ or models/ changed since the compiled build; `make install` rebuilds it)", True
    missing = [_rel(p) for p in files.values() if not p.exists()]
    if missing:
        return None, f"plain Python (compiled build incomplete, missing {missing[0]}; `make install` rebuilds it)", True
    return files, f"compiled with mypyc ({len(MODULES)} modules, {_rel(BUILD)})", False


def install() -> None:
    """Use the compiled modules if the build is fresh (see the module's docstring). Idempotent."""
    if _state["reason"] != "not checked":
        return
    files, reason, warn = _check()
    _state["reason"] = reason
    if files is None:
        if warn:
            sys.stderr.write(f"rcusim: {reason}\n")
        return
    # sim/__init__.py calls this before it imports anything else of sim, and models/ imports sim
    # first, so no compiled module has been imported as plain Python yet
    sys.meta_path.insert(0, _Finder(files))
    _state["installed"] = True


def build(verbose: bool = False) -> Path:
    """Compile :data:`MODULES` into ``build/compiled/`` and write the manifest; return its path."""
    import shutil
    import subprocess

    BUILD.mkdir(parents=True, exist_ok=True)
    digest = source_digest()
    if MANIFEST.exists():
        MANIFEST.unlink()  # a failed build leaves no manifest: plain Python, never a half build
    out = BUILD / "lib"
    shutil.rmtree(out, ignore_errors=True)
    # setup.py runs in the build directory so setuptools reads no pyproject.toml; mypyc names the
    # modules from the package directories (sim/, models/), whatever the working directory.
    script = (
        "import sys\n"
        "from setuptools import setup\n"
        "from mypyc.build import mypycify\n"
        "setup(name='rcusim-compiled', ext_modules=mypycify(sys.argv[1:], opt_level='3'),\n"
        "      script_args=['-q', 'build_ext', '--build-lib', 'lib', '--build-temp', 'tmp'])\n"
    )
    (BUILD / "setup_compiled.py").write_text(script)
    srcs = [str(ROOT / m) for m in MODULES]
    r = subprocess.run(
        [sys.executable, "setup_compiled.py", *srcs],
        cwd=BUILD,
        capture_output=not verbose,
        text=True,
    )
    if r.returncode != 0:
        tail = (r.stderr or r.stdout or "")[-3000:] if not verbose else ""
        raise SystemExit(f"sim.compiled: mypyc build failed (exit {r.returncode}); plain Python still works\n{tail}")
    files: dict[str, str] = {}
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for so in sorted(out.rglob(f"*{suffix}")):
        rel = so.relative_to(out)
        name = ".".join(rel.parts)[: -len(suffix)]
        files[name] = so.relative_to(BUILD).as_posix()
    want = {m[:-3].replace("/", ".") for m in MODULES}
    if not want <= set(files):
        raise SystemExit(f"sim.compiled: the build lacks {sorted(want - set(files))}")
    if digest != source_digest():
        raise SystemExit("sim.compiled: sources changed during the build; run it again")
    MANIFEST.write_text(json.dumps({"format": FORMAT, "abi": _abi(), "digest": digest, "files": files}, indent=1) + "\n")
    return MANIFEST
