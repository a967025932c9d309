"""Bad input `rcusim collect` refuses before it measures, in one line naming the option (exit code
2), and what it says and keeps after a measurement: an --out that cannot be written (also when it
fails only at the end: the profile is kept), empty --items, --max-samples 0, a --collector that is
not the collector, the next step after a partial collection, the destination it reports and records.

Every measurement goes through a guard around the collector built by tests/test_collector.py: it
runs only with --quick and a non-empty --items (a regression that would run every item fails
instead), and --items syscall takes well under a second."""

from __future__ import annotations

import json
import os
import shlex
import signal
import tempfile
from pathlib import Path

import pytest

from app.cli import main
from app.verbs import collect as collect_verb
from calibration.fit import calibrate, calibration_gaps
from calibration.profile import DEFAULT_PROFILE, load_profile, validate_profile
from sim.errors import ConfigError
from tests.helpers import cli_error
from tests.test_collector import collector  # noqa: F401 - the session fixture

QUICK = ["collect", "--quick", "--no-progress"]


def _guard(real: Path, where: Path, race: Path | None = None) -> Path:
    """A wrapper around the collector that refuses a measurement without --quick and a non-empty
    --items (and --modify-system); with ``race``, it makes that path a directory once the
    measurement is done (something took the --out path while the collector ran)."""
    after = f'{shlex.quote(str(real))} "$@"; rc=$?; mkdir {shlex.quote(str(race))}; exit $rc' if race else ""
    script = where / "guarded-collector"
    script.write_text(
        f"""#!/bin/sh
case "$1" in --version|--list|--help) exec {shlex.quote(str(real))} "$@";; esac
quick=; items=; prev=
for a in "$@"; do
  [ "$a" = --modify-system ] && {{ echo "guard: no --modify-system in tests" >&2; exit 1; }}
  [ "$a" = --quick ] && quick=1
  [ "$prev" = --items ] && [ -n "$a" ] && items=1
  prev=$a
done
if [ -z "$quick" ] || [ -z "$items" ]; then echo "guard: a measurement needs --quick and --items" >&2; exit 1; fi
{after}
exec {shlex.quote(str(real))} "$@"
"""
    )
    script.chmod(0o755)
    return script


@pytest.fixture
def guarded(collector, tmp_path, monkeypatch) -> Path:  # noqa: F811
    # the temporary profile (and one kept after a failure) goes under tmp_path
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return _guard(collector, tmp_path)


def fails(args: list[str], capsys: pytest.CaptureFixture[str], *words: str) -> str:
    # the collector's first progress line: it ran before the input was refused
    return cli_error(args, capsys, *words, absent="machine facts")


def test_out_that_cannot_be_written_is_refused_before_measuring(guarded, tmp_path, capsys):
    run = [*QUICK, "--items", "syscall", "--collector", str(guarded)]
    fails([*run, "--out", "/proc/rcusim-nope.json"], capsys, "--out", "cannot write", "/proc/rcusim-nope.json")
    (tmp_path / "pdir.toml").mkdir()
    fails([*run, "--out", str(tmp_path / "pdir.toml")], capsys, "--out", "is a directory", "give a file name")
    fails([*run, "--out", ""], capsys, "--out", "empty")
    (tmp_path / "plain").write_text("x")
    fails([*run, "--out", str(tmp_path / "plain" / "p.json")], capsys, "--out", "not a directory")
    assert not Path("/proc/rcusim-nope.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["guarded-collector", "pdir.toml", "plain"]


def test_a_write_that_fails_at_the_end_keeps_the_measured_profile(collector, tmp_path, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    out = tmp_path / "p.json"
    guard = _guard(collector, tmp_path, race=out)  # the --out path becomes a directory while the collector runs
    rc = main([*QUICK, "--items", "syscall", "--max-samples", "5", "--collector", str(guard), "--out", str(out)])
    _, err = capsys.readouterr()
    assert rc == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("rcusim: error: --out: cannot write") and "Traceback" not in err, err
    kept = Path(line.split("kept in ", 1)[1].split(":", 1)[0])
    assert kept.is_file() and kept.is_relative_to(tmp_path), line
    assert list(load_profile(kept).items) == ["syscall"]


def test_empty_items_are_refused(guarded, tmp_path, capsys):
    run = [*QUICK, "--collector", str(guarded), "--out", str(tmp_path / "p.json")]
    line = fails([*run, "--items", ""], capsys, "--items", "empty", "--list")
    assert "leave --items out" in line
    fails([*run, "--items", " , "], capsys, "--items", "empty")
    fails([*run, "--items", "syscall,,timerfd_arm_cancel"], capsys, "--items", "empty item name")
    fails([*run, "--items", "syscall,"], capsys, "--items", "empty item name")
    assert not (tmp_path / "p.json").exists()


def test_max_samples_below_one_or_above_the_collectors_limit_is_refused(guarded, tmp_path, capsys):
    run = [*QUICK, "--items", "syscall", "--collector", str(guarded), "--out", str(tmp_path / "p.json")]
    fails([*run, "--max-samples", "0"], capsys, "--max-samples", "0 is below 1", "calibrate")
    fails([*run, "--max-samples", "-3"], capsys, "--max-samples", "below 1")
    fails([*run, "--max-samples", "1000001"], capsys, "--max-samples", "above")
    assert not (tmp_path / "p.json").exists()
    # the smallest accepted value keeps one sample, which calibrate can read
    assert main([*run, "--max-samples", "1"]) == 0
    capsys.readouterr()
    assert len(load_profile(tmp_path / "p.json").items["syscall"].samples) == 1


@pytest.mark.parametrize("impostor", ["/bin/true", "/bin/false"])
def test_a_collector_that_is_not_the_collector_is_named(impostor, tmp_path, capsys):
    if not os.access(impostor, os.X_OK):
        pytest.skip(f"{impostor} is missing")
    line = fails(
        [*QUICK, "--items", "syscall", "--collector", impostor, "--out", str(tmp_path / "p.json")],
        capsys,
        "--collector",
        "not the rcusim collector",
        impostor,
    )
    assert "unknown item" not in line
    fails(["collect", "--list", "--collector", impostor], capsys, "--collector", "not the rcusim collector")


def test_partial_collection_says_what_calibrate_still_needs(guarded, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main([*QUICK, "--items", "syscall", "--max-samples", "5", "--collector", str(guarded), "--out", str(out)]) == 0
    stdout, _ = capsys.readouterr()
    assert f"profile written to {out}" in stdout
    assert "next: rcusim calibrate" not in stdout
    assert "not ready for rcusim calibrate" in stdout and "pipe_costs" in stdout
    assert "rcusim collect --items syscall,pipe_costs" in stdout
    # what is named is what calibrate refuses
    missing, unusable = calibration_gaps(load_profile(out))
    assert "syscall" not in missing and "pipe_costs" in missing and not unusable
    with pytest.raises(ConfigError) as exc:
        calibrate(load_profile(out), seeds=1, bootstrap=0)
    assert any(f"items.{name}" in exc.value.field for name in missing), exc.value


def test_calibration_gaps_follow_calibrate():
    raw = json.loads(DEFAULT_PROFILE.read_text())
    assert calibration_gaps(validate_profile(raw)) == ([], [])  # the bundled profile calibrates
    del raw["items"]["pipe_costs"]
    raw["items"]["fork_exec"].update(status="skipped", reason="test")
    missing, unusable = calibration_gaps(validate_profile(raw))
    assert missing == ["pipe_costs"] and unusable == ["fork_exec"]


def test_only_the_real_destination_is_reported_and_recorded(guarded, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main([*QUICK, "--items", "syscall", "--max-samples", "5", "--collector", str(guarded), "--out", str(out)]) == 0
    stdout, err = capsys.readouterr()
    assert "rcusim-collect-" not in stdout + err
    assert (stdout + err).count("profile written to") == 1
    assert f"profile written to {out}" in stdout
    assert json.loads(out.read_text())["options"]["out"] == str(out)
    assert load_profile(out).options.out == str(out)
    assert not list(tmp_path.glob("rcusim-collect-*")), "the temporary profile is left behind"


def _running_under(path: Path) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(path).encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except (OSError, ValueError):
            continue
    return pids


def test_the_collector_is_stopped_when_the_display_fails(guarded, tmp_path, monkeypatch, capsys):
    def broken(self, text: str) -> None:
        raise BrokenPipeError  # e.g. rcusim collect ... 2>&1 | head -1

    monkeypatch.setattr(collect_verb._Display, "line", broken)
    main([*QUICK, "--items", "syscall", "--collector", str(guarded), "--out", str(tmp_path / "p.json")])
    capsys.readouterr()
    left = [p for p in _running_under(tmp_path) if p != os.getpid()]
    for pid in left:  # (a regression must not leave it running)
        os.kill(pid, signal.SIGINT)
    assert not left, "the collector runs on after rcusim collect returned"
