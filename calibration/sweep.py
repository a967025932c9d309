"""Parameter sweeps and batches of runs: the engine behind ``rcusim sweep`` and ``rcusim compare``.

A sweep is a scenario, a grid of dotted keys (any knob ``--set`` accepts) with a list of values
each, and a number of replications. Every (grid point, replication) is one :class:`Job`: the
scenario mapping with the point's values set, and a seed. Seeds come from
``numpy.random.SeedSequence(base_seed)``: replication ``r`` gets the ``r``-th spawned child, the
same at every grid point (common random numbers along the grid), so a result depends only on
its point and replication, never on which worker ran it or when.

Jobs run in local worker processes (``concurrent.futures.ProcessPoolExecutor``, all cores by
default), in this process (``workers=1``), or on a Dask cluster (``scheduler=ADDRESS``, e.g.
``tcp://10.0.0.5:8786``; the workers need rcusim installed). Results stream back as they finish.

:func:`sweep` appends each finished row to the output file at once (CSV directly; Parquet via a
``FILE.partial.csv`` journal), so an interrupted sweep loses only the runs in flight; run it
again with the same arguments and it skips the rows already there. When every row is in, the
file is rewritten sorted by grid point then replication, with metric columns in name order:
an interrupted-and-resumed sweep leaves exactly the file an uninterrupted one does.

Every row also records what else determines its result: the scenario's name and its
:func:`definition`, a hash of the complete base scenario (defaults filled in, ``--set`` applied)
without the grid keys. A resume whose scenario or settings differ from the file's is refused
before anything runs, as is one with other grid keys or another seed, so a file never mixes
rows of two sweeps.

Nothing here imports the CLI or streamlit; the app and the explorer call these functions.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import hashlib
import itertools
import json
import math
import os
import signal
import threading
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from sim import scenario as sc
from sim.config import set_path
from sim.errors import ConfigError, RcusimError

ROOT = Path(__file__).resolve().parents[1]
SCENARIO_DIR = ROOT / "scenarios"

# Columns every row has before its metrics: the replication and its seed, then what the sweep
# ran (the scenario's name and its definition, see definition()).
KEY_COLUMNS = ("replication", "seed")
DEFINITION_COLUMNS = ("scenario", "definition")
ERROR_COLUMN = "error"
LATENCY_STATS = ("mean", "p50", "p90", "p99", "max")
_T = TypeVar("_T")
_R = TypeVar("_R")


# ---------------------------------------------------------------------------------- scenarios
def resolve_scenario(name: str | Path, relative_to: Path | None = None) -> Path:
    """A scenario file: a path (absolute, or relative to the cwd or to ``relative_to``), or the
    name of a bundled scenario in ``scenarios/``."""
    p = Path(name)
    candidates = [p]
    if relative_to is not None and not p.is_absolute():
        candidates.append(relative_to / p)
    candidates.append(SCENARIO_DIR / f"{name}.toml")
    for c in candidates:
        if c.is_file():
            return c
    known = ", ".join(sorted(x.stem for x in SCENARIO_DIR.glob("*.toml")))
    raise ConfigError(str(name), "no such scenario file or bundled scenario", f"bundled: {known}")


def catalog() -> sc.Catalog:
    import models

    return models.catalog()


def replication_seeds(base_seed: int, n: int) -> list[int]:
    """The seeds of replications ``0..n-1``: children of ``SeedSequence(base_seed)``, as
    63-bit integers (a scenario seed). The first ``k`` are the same whatever ``n`` is.
    ``base_seed`` is ``--seed`` or a (validated, non-negative) ``scenario.seed``."""
    if base_seed < 0:
        # the words of the scenario.seed knob's own check (rcusim run --seed -1)
        raise ConfigError("--seed", f"{base_seed} is negative", "use a value >= 0")
    children = np.random.SeedSequence(base_seed).spawn(n)
    return [int(c.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)) for c in children]


def flatten(res: sc.Result) -> dict[str, float]:
    """A run's figures as one flat mapping: the metrics, each latency's mean and percentiles
    (``message_latency_ns.p99``) and the event count."""
    out: dict[str, float] = {}
    for k, v in res.metrics.items():
        out[k] = float(v)
    for name, summary in res.latency.items():
        if not summary.get("count"):
            continue
        for stat in LATENCY_STATS:
            x = summary.get(stat)
            if x is not None:
                out[f"{name}.{stat}"] = float(x)
    out["events"] = float(res.events)
    return out


# ---------------------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class Job:
    """One simulation: a scenario mapping (overrides applied) and the seed of the run.
    ``key`` identifies it in a batch (grid values and replication)."""

    key: tuple[Any, ...]
    data: Mapping[str, Any]
    seed: int


@dataclass(frozen=True)
class Outcome:
    job: Job
    metrics: dict[str, float]
    error: str = ""


def run_job(job: Job) -> Outcome:
    """Run one job (in a worker process, a Dask worker or here). A run that cannot finish
    (deadlock, time limit) is an outcome with ``error`` set, not an exception, so one bad
    grid point does not stop a sweep."""
    cat = catalog()
    scn = sc.validate(job.data, cat)
    try:
        res = sc.run(scn, cat, seed=job.seed)
    except RcusimError as exc:
        return Outcome(job, {}, str(exc))
    return Outcome(job, flatten(res), "")


def _ignore_sigint() -> None:
    # Ctrl-C goes to the whole process group: let the parent decide, workers keep quiet.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def scheduler_address(given: str | None) -> str | None:
    """``--scheduler`` if given, else ``DASK_SCHEDULER_ADDRESS`` if set, else None (local).
    An address that is not of the form ``tcp://HOST:PORT`` is a ConfigError naming where it
    came from (before anything runs)."""
    if given:
        check_scheduler_address(given, "--scheduler")
        return given
    env = os.environ.get("DASK_SCHEDULER_ADDRESS", "").strip()
    if env:
        check_scheduler_address(env, "DASK_SCHEDULER_ADDRESS")
    return env or None


def check_scheduler_address(address: str, field: str = "--scheduler") -> None:
    """Raise a ConfigError unless Dask can parse ``address`` (``tcp://10.0.0.5:8786``, or
    ``HOST:PORT``, ``tls://HOST:PORT``...). Reachability is not checked here."""
    try:
        from distributed.comm import get_address_host_port
    except ImportError:  # pragma: no cover - dask is a dependency
        raise RcusimError(f"{field}: dask.distributed is not installed (pip install 'dask[distributed]')") from None
    try:
        get_address_host_port(address)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise ConfigError(
            field,
            f"{address!r} is not a Dask scheduler address: {exc}",
            "write it as tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786",
        ) from None


def run_jobs(jobs: Sequence[Job], workers: int | None = None, scheduler: str | None = None) -> Generator[Outcome, None, None]:
    """Run ``jobs`` and yield their outcomes as they finish (in completion order).

    ``scheduler``: a Dask scheduler address (the cluster must exist). Otherwise ``workers``
    local processes (default: every core this process may use); ``workers=1`` runs the jobs
    here, one after the other. Closing the iterator early (an exception or Ctrl-C in the
    consumer) cancels what has not started and stops the workers.
    """
    if not jobs:
        return
    if scheduler:
        yield from _run_dask(jobs, scheduler)
        return
    n = default_workers() if workers is None else workers
    if n < 1:
        raise ConfigError("--workers", f"{n} is below 1", "use at least one worker")
    n = min(n, len(jobs))
    if n == 1:
        for job in jobs:
            yield run_job(job)
        return
    yield from _run_pool(jobs, n)


@contextlib.contextmanager
def worker_pool(n: int) -> Generator[Any, None, None]:
    """A pool of ``n`` worker processes that ignore Ctrl-C; on an error or an interrupt in the
    body the runs in flight are abandoned and the workers terminated at once."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # fork is the fastest start (the workers inherit everything imported) but is only safe
    # from a single-threaded parent; an app with threads (Streamlit, a Dask client) gets
    # forkserver: workers forked from a clean single-threaded server.
    ctx: Any
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("fork")
    else:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["calibration.sweep", "models"])
    pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_ignore_sigint)
    finished = False
    try:
        yield pool
        finished = True
    finally:
        if finished:
            pool.shutdown(wait=True)
        else:
            # The runs in flight are lost anyway; do not wait minutes for them to end.
            procs = list((getattr(pool, "_processes", None) or {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for p in procs:
                if p.is_alive():
                    p.terminate()


def _run_pool(jobs: Sequence[Job], n: int) -> Generator[Outcome, None, None]:
    from concurrent.futures import FIRST_COMPLETED, wait

    with worker_pool(n) as pool:
        # Keep a bounded window of jobs in flight so an interrupt wastes little work.
        todo = iter(jobs)
        pending = set()
        for job in itertools.islice(todo, 2 * n):
            pending.add(pool.submit(run_job, job))
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: f.result().job.key):
                yield fut.result()
                nxt = next(todo, None)
                if nxt is not None:
                    pending.add(pool.submit(run_job, nxt))


def seed_metrics(run: tuple[sc.Scenario, int]) -> dict[str, float]:
    """The metrics of one validated scenario run with one seed: the worker for :func:`pmap`
    over a story's or a profile's seeds (the models' catalog, as every CLI verb uses)."""
    scn, seed = run
    return sc.run(scn, catalog(), seed=seed).metrics


def pmap(
    fn: Callable[[_T], _R],
    items: Sequence[_T],
    workers: int | None = None,
    done: Callable[[int, int], None] | None = None,
) -> list[_R]:
    """``[fn(x) for x in items]``, the calls spread over ``workers`` local processes (default:
    every core this process may use; 1: here, in order). ``fn`` must be a module-level function
    and each call independent of the others (its own seed), so the result is the same, bit for
    bit, whatever the number of workers; ``done(finished, total)`` follows the progress. Called
    from a worker process (one of several profiles validated at once), it runs here: no pool
    inside a pool."""
    import multiprocessing

    n = default_workers() if workers is None else workers
    if n < 1:
        raise ConfigError("--workers", f"{n} is below 1", "use at least one worker")
    n = min(n, len(items))
    if multiprocessing.parent_process() is not None:
        n = 1
    out: list[Any] = [None] * len(items)
    if n <= 1:
        for i, x in enumerate(items):
            out[i] = fn(x)
            if done is not None:
                done(i + 1, len(items))
        return out
    from concurrent.futures import as_completed

    with worker_pool(n) as pool:
        futs = {pool.submit(fn, x): i for i, x in enumerate(items)}
        for k, fut in enumerate(as_completed(futs), 1):
            out[futs[fut]] = fut.result()
            if done is not None:
                done(k, len(items))
    return out


def _dask_client(address: str) -> Any:
    """A Dask client connected to ``address`` (waiting up to 60 s for it).

    distributed closes a client that fails to connect only on an OSError; after any other
    failure (a TLS address without a TLS configuration) the half-started client is closed at
    garbage collection, when its event loop is gone, and that waits twice the timeout: the
    process seems to hang. This client closes itself on every failure to start."""
    from dask.distributed import Client

    class _Client(Client):  # type: ignore[misc]
        async def _start(self, *args: Any, **kwargs: Any) -> Any:
            try:
                return await super()._start(*args, **kwargs)
            except BaseException:
                if getattr(self, "status", "closed") != "closed":
                    with contextlib.suppress(Exception):
                        await self._close(fast=True)
                raise

    return _Client(address, timeout="60s", set_as_default=False)


def _run_dask(jobs: Sequence[Job], address: str) -> Generator[Outcome, None, None]:
    try:
        from dask.distributed import as_completed
    except ImportError:  # pragma: no cover - dask is a dependency
        raise RcusimError("--scheduler: dask.distributed is not installed (pip install 'dask[distributed]')") from None
    check_scheduler_address(address)
    try:
        client = _dask_client(address)
    except (OSError, TimeoutError) as exc:
        raise ConfigError(
            "--scheduler",
            f"cannot reach the Dask scheduler at {address}: {exc}",
            "start one (dask scheduler) or check the address",
        ) from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(
            "--scheduler",
            f"cannot connect to the Dask scheduler at {address}: {exc}",
            "check the address, and the TLS configuration for a tls:// address",
        ) from None
    futures = []
    finished = False
    try:
        futures = [client.submit(run_job, job, pure=False) for job in jobs]
        for fut in as_completed(futures, loop=client.loop):
            yield fut.result()
        finished = True
    finally:
        if futures and not finished:
            client.cancel(futures)
        client.close()


# ---------------------------------------------------------------------------------- grids
@dataclass(frozen=True)
class Axis:
    """One ``--grid key=v1,v2,...``: the key and its values (as written, and parsed)."""

    key: str
    texts: tuple[str, ...]
    values: tuple[Any, ...]


def axis(key: str, values: Sequence[Any]) -> Axis:
    """An axis from Python values (for the explorer and scripts): ``axis("machine.cpus", [1, 2, 4])``.
    Its texts (the values as the output file shows them) are TOML-like: ``true``, ``[0, 1]``."""
    import json

    def text(v: Any) -> str:
        if isinstance(v, str):
            return v
        return json.dumps(v)

    texts = tuple(text(v) for v in values)
    if len(set(texts)) != len(texts):
        raise ConfigError(f"grid {key}", "repeats a value", "give each value once")
    return Axis(key, texts, tuple(values))


def split_values(text: str) -> list[str]:
    """Split ``v1,v2,...`` on the commas that are not inside brackets or quotes, so a list
    value such as ``[0,1]`` or a quoted string with a comma stays one value."""
    out, cur, depth, quote = [], [], 0, ""
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    return out


def parse_grid(items: Iterable[str]) -> list[Axis]:
    """``["kernel.rcu.nocb=none,all", "machine.cpus=1,2,4"]`` -> axes, in the order given."""
    axes: list[Axis] = []
    seen = set()
    for item in items:
        key, eq, rest = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"--grid {item}", "needs key=v1,v2,...", "e.g. --grid machine.cpus=1,2,4")
        if key in seen:
            raise ConfigError(f"--grid {key}", "is given twice", "give each key once, with all its values")
        seen.add(key)
        texts = split_values(rest)
        if any(t == "" for t in texts):
            raise ConfigError(f"--grid {key}", f"has an empty value in {rest!r}", "separate values with single commas")
        if len(set(texts)) != len(texts):
            raise ConfigError(f"--grid {key}", f"repeats a value in {rest!r}", "give each value once")
        axes.append(Axis(key, tuple(texts), tuple(sc.parse_value(t) for t in texts)))
    return axes


def grid_points(axes: Sequence[Axis]) -> list[tuple[int, ...]]:
    """Every point of the grid as indices into each axis, in cartesian (row-major) order."""
    return list(itertools.product(*(range(len(a.texts)) for a in axes)))


def point_data(base: Mapping[str, Any], axes: Sequence[Axis], point: Sequence[int]) -> dict[str, Any]:
    data = copy.deepcopy(dict(base))
    for axis, i in zip(axes, point, strict=True):
        set_path(data, axis.key, axis.values[i])
    return data


# ---------------------------------------------------------------------------------- what a sweep is
def _drop_path(doc: dict[str, Any], key: str) -> None:
    *parents, last = key.split(".")
    node: Any = doc
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


def definition(base: sc.Scenario, grid_keys: Iterable[str]) -> str:
    """What determines a sweep's results besides its grid values and seeds: a short hash of the
    complete base scenario (:func:`sim.scenario.canonical`: defaults filled in, units resolved,
    ``--set`` applied) without the grid keys, so that adding values to a grid still resumes.
    The scenario's name and description change no result and are left out, and so is its
    seed: each row's seed has a column of its own, checked on its own. The model's code is in
    it too (:func:`sim.compiled.source_digest`, the sources of sim/ and models/): rows from
    before a model change are not the same sweep's."""
    from sim.compiled import source_digest

    doc = sc.canonical(base)
    for k in ("name", "description", "seed"):
        doc["scenario"].pop(k, None)
    for key in grid_keys:
        _drop_path(doc, key)
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str) + "\0" + source_digest()
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ---------------------------------------------------------------------------------- output files
def _check_columns(where: Path, header: Sequence[str], grid_columns: Sequence[str]) -> None:
    """Refuse a file whose leading columns are not those of this sweep (other grid keys, not a
    sweep file) or that does not record the sweep's definition (written by an older rcusim)."""
    want = [*grid_columns, *KEY_COLUMNS]
    if list(header[: len(want)]) != want:
        if not set(KEY_COLUMNS) <= set(header):
            problem = f"is not a sweep file (columns {', '.join(header[:6]) or 'none'}; a sweep's start with {', '.join(want)})"
            fix = f"use another output file, or delete {where}"
        else:
            problem = f"holds a different sweep (columns {', '.join(header[: len(want)])}; this one has {', '.join(want)})"
            fix = "use another output file, or the same --grid keys in the same order"
        raise ConfigError(f"--out {where}", problem, fix)
    if list(header[len(want) : len(want) + len(DEFINITION_COLUMNS)]) != list(DEFINITION_COLUMNS):
        raise ConfigError(
            f"--out {where}",
            "was written by an older rcusim that did not record the scenario and settings of its sweep, "
            "so a resume cannot tell whether its rows belong to this sweep",
            f"run the sweep into a new file (another --out), or delete {where}",
        )


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float):
        return repr(v)
    return str(v)


class RowFile:
    """The rows of a sweep in a CSV file: read what is there, append rows as they come,
    rewrite sorted at the end. ``key_columns`` are the grid keys, replication, seed, then the
    sweep's scenario and definition; ``done_columns`` (grid keys and replication) name a run.
    Reading never writes: a file that belongs to another sweep is refused untouched."""

    def __init__(self, path: Path, grid_columns: Sequence[str]) -> None:
        self.path = path
        self.grid_columns = list(grid_columns)
        self.key_columns = [*self.grid_columns, *KEY_COLUMNS, *DEFINITION_COLUMNS]
        self.done_columns = [*self.grid_columns, KEY_COLUMNS[0]]
        self.header: list[str] = []
        self.rows: list[dict[str, str]] = []
        self.dirty = False
        if path.exists() and path.stat().st_size > 0:
            self._read()

    def _read(self) -> None:
        try:
            with self.path.open(newline="", encoding="utf-8") as fp:
                reader = csv.DictReader(fp)
                header = list(reader.fieldnames or [])
                _check_columns(self.path, header, self.grid_columns)
                rows = []
                dirty = False
                for row in reader:
                    if None in row or any(v is None for v in row.values()):
                        dirty = True  # a row cut short by an interruption mid-write: run it again
                        continue
                    rows.append(dict(row))
            ends_clean = self.path.read_bytes().endswith(b"\n")
        except (UnicodeDecodeError, csv.Error) as exc:
            raise ConfigError(
                f"--out {self.path}",
                f"is not a sweep file (not a UTF-8 CSV: {exc})",
                f"use another output file, or delete {self.path}",
            ) from None
        except OSError as exc:
            raise ConfigError(f"--out {self.path}", f"cannot read it: {exc.strerror or exc}", "use another output file") from None
        self.header = header
        self.rows = rows
        # drop the broken line before appending after it (at the first append: not before the
        # sweep has checked that this file is its own)
        self.dirty = dirty or not ends_clean

    def done_keys(self) -> set[tuple[str, ...]]:
        return {tuple(r[c] for c in self.done_columns) for r in self.rows}

    def append(self, row: dict[str, str]) -> None:
        new_cols = [c for c in row if c not in self.header]
        self.rows.append(row)
        if not self.header or new_cols or self.dirty:
            # First row, a metric this file has no column for yet, or a line cut short to drop:
            # rewrite the whole file (with the wider header).
            metric_cols = sorted({*self.header[len(self.key_columns) :], *new_cols} - {ERROR_COLUMN, *self.key_columns})
            self.header = [*self.key_columns, *metric_cols, ERROR_COLUMN]
            self._write(self.rows, self.path)
            self.dirty = False
            return
        with self.path.open("a", newline="", encoding="utf-8") as fp:
            csv.DictWriter(fp, self.header, restval="", lineterminator="\n").writerow(row)
            fp.flush()
            os.fsync(fp.fileno())

    def _write(self, rows: Sequence[dict[str, str]], path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", newline="", encoding="utf-8") as fp:
            w = csv.DictWriter(fp, self.header, restval="", lineterminator="\n")
            w.writeheader()
            for r in rows:
                w.writerow(r)
            fp.flush()
            os.fsync(fp.fileno())
        os.replace(tmp, path)

    def sorted_rows(self, order: Callable[[dict[str, str]], Any]) -> list[dict[str, str]]:
        seen = set()
        out = []
        for r in sorted(self.rows, key=order):
            k = tuple(r[c] for c in self.done_columns)
            if k not in seen:
                seen.add(k)
                out.append(r)
        return out

    def finish(self, order: Callable[[dict[str, str]], Any]) -> list[dict[str, str]]:
        """Rewrite the file sorted and return its rows."""
        rows = self.sorted_rows(order)
        if self.header:
            self._write(rows, self.path)
        return rows


def _typed(texts: Sequence[str]) -> list[Any]:
    """A grid column for Parquet: ints, floats or bools when every value is one, else text."""
    vals = [sc.parse_value(t) for t in texts]
    for tp in (bool, int):
        if all(type(v) is tp for v in vals):
            return vals
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return [float(v) for v in vals]
    return list(texts)


def write_parquet(path: Path, header: Sequence[str], rows: Sequence[dict[str, str]], grid_columns: Sequence[str]) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise RcusimError("--out: writing Parquet needs pyarrow (pip install pyarrow), or use a .csv file") from None
    cols: dict[str, Any] = {}
    for c in header:
        texts = [r.get(c, "") for r in rows]
        if c in grid_columns:
            cols[c] = _typed(texts)
        elif c in KEY_COLUMNS:
            cols[c] = pa.array([int(t) for t in texts], type=pa.int64())
        elif c == ERROR_COLUMN or c in DEFINITION_COLUMNS:
            cols[c] = texts
        else:
            cols[c] = pa.array([float(t) if t != "" else math.nan for t in texts], type=pa.float64())
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(pa.table(cols), tmp)
    os.replace(tmp, path)


def read_parquet_rows(path: Path, grid_columns: Sequence[str] | None = None) -> list[dict[str, str]]:
    """Rows of a finished Parquet sweep, as the CSV journal writes them (for resuming). With
    ``grid_columns``, a file that is not Parquet, or not a sweep over those keys, is a
    ConfigError (as for a CSV file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if grid_columns is not None:
            _check_columns(path, pq.read_schema(path).names, grid_columns)
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise ConfigError(
            f"--out {path}", f"is not a sweep file (not a Parquet file: {exc})", f"use another output file, or delete {path}"
        ) from None
    out = []
    for rec in table.to_pylist():
        row = {}
        for k, v in rec.items():
            if isinstance(v, float) and k not in KEY_COLUMNS:
                row[k] = repr(v)
            elif isinstance(v, bool):
                row[k] = "true" if v else "false"
            else:
                row[k] = "" if v is None else str(v)
        out.append(row)
    return out


# ---------------------------------------------------------------------------------- the sweep
def _check_writable(path: Path) -> None:
    """Before anything runs: the output file (if it is there) takes appends, and its folder
    takes the temporary file a rewrite goes through. Nothing is left behind."""
    if path.is_dir():
        raise ConfigError("--out", f"{path} is a folder", "give a file name, FILE.csv or FILE.parquet")
    tmp = path.with_name(path.name + ".tmp")
    try:
        if path.exists():
            with path.open("a", encoding="utf-8"):
                pass
        with tmp.open("w", encoding="utf-8"):
            pass
        tmp.unlink()
    except OSError as exc:
        raise ConfigError(
            "--out", f"cannot write {path}: {exc.strerror or exc}", "write to a folder where you can create files"
        ) from None


def _check_rows(where: Path, rows: Sequence[dict[str, str]], name: str, defn: str, seeds: Sequence[int]) -> None:
    """Refuse rows that another sweep wrote: another scenario or settings (the definition
    column), or another seed for a replication this sweep runs."""
    fix = f"use another --out file, or delete {where} to start this sweep afresh"
    for row in rows:
        old_name, old_defn = row.get("scenario", ""), row.get("definition", "")
        if old_defn != defn:
            if old_name != name:
                problem = f"holds a different sweep: of scenario {old_name!r} (definition {old_defn}); this one runs {name!r} (definition {defn})"
            else:
                problem = (
                    f"holds a different sweep: of scenario {name!r} with other settings (definition {old_defn}, this one's is {defn}): "
                    "a --set, the scenario file, a model default or the model's code differs"
                )
            raise ConfigError(f"--out {where}", problem, fix)
        r = int(row["replication"]) if row["replication"].isdigit() else -1
        if 0 <= r < len(seeds) and row["seed"] != str(seeds[r]):
            raise ConfigError(
                f"--out {where}",
                f"holds replication {r} with seed {row['seed']}, but this sweep's is {seeds[r]}",
                "use the same --seed (and scenario) as the sweep that wrote it, or another file",
            )


@dataclass(frozen=True)
class SweepSummary:
    path: Path | None
    total: int
    skipped: int
    ran: int
    failed: int
    rows: list[dict[str, str]]
    header: list[str]


ProgressFn = Callable[[int, int], None]


def sweep(
    data: Mapping[str, Any],
    axes: Sequence[Axis],
    replications: int = 1,
    out: str | Path | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    base_seed: int | None = None,
    progress: ProgressFn | None = None,
    on_row: Callable[[dict[str, str]], None] | None = None,
) -> SweepSummary:
    """Run the grid ``axes`` x ``replications`` over the scenario mapping ``data``.

    Every grid point is validated before anything runs (a bad key or value is one
    ConfigError naming it). Rows go to ``out`` (``.csv`` or ``.parquet``) as they finish;
    rows already in ``out`` (an earlier, interrupted run of the same sweep) are skipped.
    A file that holds another sweep (other grid keys, seeds, scenario or settings: see
    :func:`definition`), that is not a sweep file, or that cannot be written is a ConfigError
    before anything runs, and is left as it was.
    ``on_row`` sees each new row after it is on disk. Returns every row, sorted.
    """
    if replications < 1:
        raise ConfigError("--replications", f"{replications} is below 1", "use at least one replication")
    cat = catalog()
    base = sc.validate(data, cat)
    seed0 = base.meta.seed if base_seed is None else base_seed
    seeds = replication_seeds(seed0, replications)
    points = grid_points(axes)
    datas = []
    for point in points:
        pd = point_data(data, axes, point)
        try:
            sc.validate(pd, cat)
        except ConfigError as exc:
            where = ", ".join(f"{a.key}={a.texts[i]}" for a, i in zip(axes, point, strict=True))
            raise ConfigError(f"--grid {exc.field}", f"{exc.problem} at grid point {where}", exc.fix) from None
        datas.append(pd)
    if scheduler:
        check_scheduler_address(scheduler)

    grid_columns = [a.key for a in axes]
    name, defn = base.meta.name, definition(base, grid_columns)
    path = Path(out) if out is not None else None
    parquet = path is not None and path.suffix.lower() in (".parquet", ".pq")
    if path is not None and not parquet and path.suffix.lower() != ".csv":
        raise ConfigError("--out", f"{path.name}: unknown file type", "name it FILE.csv or FILE.parquet")
    if path is not None and path.parent and not path.parent.exists():
        raise ConfigError("--out", f"{path.parent} does not exist", "create the folder first")
    journal_path = path.with_name(path.name + ".partial.csv") if parquet and path is not None else path
    if path is not None and journal_path is not None:
        _check_writable(path)
        if journal_path != path:
            _check_writable(journal_path)
    rf = RowFile(journal_path, grid_columns) if journal_path is not None else None
    earlier: list[dict[str, str]] = []
    if parquet and path is not None and path.exists() and path.stat().st_size > 0:
        earlier = read_parquet_rows(path, grid_columns)
        _check_rows(path, earlier, name, defn, seeds)
    if rf is not None:
        _check_rows(rf.path, rf.rows, name, defn, seeds)
        # only now that both files are known to hold this sweep: the journal takes the finished rows
        known = rf.done_keys()
        for row in earlier:
            if tuple(row.get(c, "") for c in rf.done_columns) not in known:
                rf.append(row)
    done = rf.done_keys() if rf is not None else set()

    jobs = []
    for point, pd in zip(points, datas, strict=True):
        texts = tuple(a.texts[i] for a, i in zip(axes, point, strict=True))
        for r in range(replications):
            key = (*texts, str(r))
            if key in done:
                continue
            jobs.append(Job(key=(point, r), data=pd, seed=seeds[r]))
    total = len(points) * replications
    skipped = total - len(jobs)
    if progress is not None:
        progress(skipped, total)

    mem_rows: list[dict[str, str]] = []
    failed = 0
    count = skipped
    with contextlib.closing(run_jobs(jobs, workers=workers, scheduler=scheduler)) as outcomes:
        for outcome in outcomes:
            point, r = outcome.job.key
            row = {a.key: a.texts[i] for a, i in zip(axes, point, strict=True)}
            row["replication"] = str(r)
            row["seed"] = str(outcome.job.seed)
            row["scenario"], row["definition"] = name, defn
            for k, v in outcome.metrics.items():
                row[k] = _cell(v)
            row[ERROR_COLUMN] = outcome.error
            failed += bool(outcome.error)
            if rf is not None:
                rf.append(row)
            else:
                mem_rows.append(row)
            count += 1
            if on_row is not None:
                on_row(row)
            if progress is not None:
                progress(count, total)

    index = {a.key: {t: i for i, t in enumerate(a.texts)} for a in axes}

    def order(row: dict[str, str]) -> tuple[Any, ...]:
        pos = []
        for a in axes:
            i = index[a.key].get(row.get(a.key, ""))
            pos.append((0, i, "") if i is not None else (1, 0, row.get(a.key, "")))
        return (*pos, int(row["replication"]))

    if rf is not None:
        rows = rf.finish(order)
        header = rf.header
        if parquet and path is not None:
            write_parquet(path, header, rows, grid_columns)
            journal_path.unlink(missing_ok=True)  # type: ignore[union-attr]
    else:
        rows = sorted(mem_rows, key=order)
        lead = [*grid_columns, *KEY_COLUMNS, *DEFINITION_COLUMNS]
        metric_cols = sorted({k for r in rows for k in r} - set(lead) - {ERROR_COLUMN})
        header = [*lead, *metric_cols, ERROR_COLUMN]
    return SweepSummary(path, total, skipped, len(jobs), failed, rows, header)
