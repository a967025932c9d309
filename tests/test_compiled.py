"""The mypyc-compiled hot modules (sim/compiled.py): used only when fresh, and bit for bit the
same results as plain Python.

The equality test runs small versions of every bundled scenario and of the variants
benchmarks/exact.py checks (NOCB, RCU eras, lock policies, EEVDF with a measured tick, timer
migration...), and a trace, in two child processes, one with ``RCUSIM_PURE=1``, and compares the whole results.
`make install` builds the compiled modules, so under CI a missing build is a failure, not a
skip. (benchmarks/exact.py compares the full-size stories; README, Speed.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim import compiled

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, io, json, sys
from pathlib import Path
import models
from sim import compiled, scenario as sc
from sim.trace import Tracer
ROOT = Path(sys.argv[1])
SMALL = {
    "netns-2014": {"workload.routers": 100},
    "hackbench-rt-2008": {"workload.groups": 2, "workload.loops": 8},
    "urcu-membarrier-2020": {"workload.duration": "50 ms"},
    "messaging-demo": {"workload.loops": 5},
}
sys.path.insert(0, str(ROOT / "benchmarks"))
from exact import VARIANTS  # the engine paths benchmarks/exact.py guards: NOCB, eras, lock policies, EEVDF...
cases = [(p.stem, {}) for p in sorted((ROOT / "scenarios").glob("*.toml"))]
cases += [(scenario, over) for _, scenario, over in VARIANTS]
cat = models.catalog()
out = {"compiled": compiled.status()[0], "results": []}
for i, (name, over) in enumerate(cases):
    scn = sc.validate(sc.load(ROOT / "scenarios" / f"{name}.toml", {**SMALL.get(name, {}), **over}), cat)
    tracer = Tracer() if i == 0 else None
    res = sc.run(scn, cat, tracer=tracer).to_json()
    res.pop("wall_s")
    if tracer is not None:
        buf = io.StringIO()
        tracer.write(buf)
        res["trace_sha256"] = hashlib.sha256(buf.getvalue().encode()).hexdigest()
    out["results"].append([name, over, res])
print(json.dumps(out, sort_keys=True))
"""


def _child(pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "RCUSIM_PURE"}
    if pure:
        env["RCUSIM_PURE"] = "1"
    r = subprocess.run([sys.executable, "-c", CHILD, str(ROOT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_compiled_modules_give_the_same_results_as_plain_python() -> None:
    files, reason, _ = compiled._check()
    if files is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI runs after `make install`, which builds the compiled modules, but: {reason}")
        pytest.skip(reason)
    fast, pure = _child(pure=False), _child(pure=True)
    assert fast["compiled"] is True and pure["compiled"] is False
    assert len(fast["results"]) == len(pure["results"]) >= 25
    for (name, over, a), (_, _, b) in zip(fast["results"], pure["results"], strict=True):
        # as JSON text: 5 == 5.0 in Python, and a compiled int-to-float conversion would hide
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True), f"{name} {over}: compiled and plain Python differ"
        assert a["events"] > 0


def _fake_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **manifest: object) -> None:
    build = tmp_path / "compiled"
    (build / "lib" / "sim").mkdir(parents=True)
    so = build / "lib" / "sim" / "machine.so"
    so.write_bytes(b"")
    base = {
        "format": compiled.FORMAT,
        "abi": compiled._abi(),
        "digest": compiled.source_digest(),
        "files": {"sim.machine": "lib/sim/machine.so"},
    }
    (build / "manifest.json").write_text(json.dumps({**base, **manifest}))
    monkeypatch.setattr(compiled, "BUILD", build)
    monkeypatch.setattr(compiled, "MANIFEST", build / "manifest.json")
    monkeypatch.delenv("RCUSIM_PURE", raising=False)


def test_a_fresh_build_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_build(tmp_path, monkeypatch)
    files, reason, warn = compiled._check()
    assert files is not None and "compiled with mypyc" in reason and not warn


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        ({"digest": "0" * 64}, "changed since the compiled build"),
        ({"abi": "cpython-399-x"}, "the compiled build is for cpython-399-x"),
        ({"format": 99}, "the compiled build is for"),
        ({"files": {"sim.machine": "lib/sim/gone.so"}}, "missing"),
        ({"files": None}, "unreadable"),
    ],
)
def test_a_stale_or_broken_build_falls_back_to_plain_python_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, manifest: dict, words: str
) -> None:
    _fake_build(tmp_path, monkeypatch, **manifest)
    files, reason, warn = compiled._check()
    assert files is None and reason.startswith("plain Python") and words in reason and warn
    assert "make install" in reason


def test_no_build_or_rcusim_pure_is_plain_python_without_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_build(tmp_path, monkeypatch)
    monkeypatch.setenv("RCUSIM_PURE", "1")
    files, reason, warn = compiled._check()
    assert files is None and "RCUSIM_PURE" in reason and not warn
    monkeypatch.delenv("RCUSIM_PURE")
    (tmp_path / "compiled" / "manifest.json").unlink()
    files, reason, warn = compiled._check()
    assert files is None and "no compiled build" in reason and not warn


def test_the_digest_covers_every_model_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a copy of the two packages: editing any file in it (not only a compiled one) changes the digest
    for pkg in ("sim", "models"):
        for p in (ROOT / pkg).rglob("*.py"):
            q = tmp_path / p.relative_to(ROOT)
            q.parent.mkdir(parents=True, exist_ok=True)
            q.write_bytes(p.read_bytes())
    monkeypatch.setattr(compiled, "ROOT", tmp_path)
    before = compiled.source_digest()
    assert before == compiled.source_digest()
    f = tmp_path / "models" / "timers" / "wheel.py"
    f.write_text(f.read_text() + "\n")
    assert compiled.source_digest() != before
