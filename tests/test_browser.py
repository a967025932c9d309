"""End-to-end tests of the explorer in a real headless Chromium (Debian's ``chromium``, which
``make test`` installs through ``make browser-deps``), driven by Playwright against a
``streamlit run`` server that the tests start on a free localhost port.

Screenshots of every page go to ``artifacts/screenshots/`` (gitignored; one of them is
committed as ``docs/screenshot-explorer.png``). The tests skip, with the reason, only when
Chromium or Playwright is truly unavailable.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = os.environ.get("RCUSIM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RUN_TIMEOUT_MS = 240_000  # a simulation on a busy 2-core CI box
PAGES = ("home", "netns", "hackbench", "urcu", "rcu_sync", "timers", "lab", "ab", "machine")

pytestmark = pytest.mark.slow


def _need_browser() -> None:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(f"no Chromium at {CHROMIUM} (make browser-deps installs Debian's chromium with apt; it could not here)")
    pytest.importorskip("playwright.sync_api", reason="the playwright package is missing (make install installs it)")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``streamlit run`` of the explorer, as ``rcusim app`` starts it, on a free port."""
    _need_browser()
    from app.verbs.app import command, environment

    port = _free_port()
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    cmd = [*command(port, "127.0.0.1"), "--server.fileWatcherType", "none"]
    with open(log, "w") as fp:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=environment(), stdout=fp, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit did not answer within 120 s: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser(server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
            accept_downloads=True,
        )
        ctx.set_default_timeout(60_000)
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    pg = browser.new_page()  # type: ignore[attr-defined]
    try:
        yield pg
    finally:
        pg.close()


# ---------------------------------------------------------------------------------- helpers
def open_page(page: object, server: str, path: str) -> None:
    """Open a page by its URL (the home page, the default, is served at the root), and check
    Streamlit found it: an unknown path shows a "Page not found" dialog over the main page."""
    page.goto(f"{server}/{'' if path == 'home' else path}")  # type: ignore[attr-defined]
    page.wait_for_selector("h1", timeout=120_000)  # type: ignore[attr-defined]
    wait_idle(page)
    assert page.get_by_text("Page not found").count() == 0, f"/{path}: Streamlit says the page does not exist"  # type: ignore[attr-defined]


def wait_idle(page: object, timeout_ms: int = RUN_TIMEOUT_MS) -> None:
    """Wait until the script run has finished (Streamlit's status widget gone)."""
    page.wait_for_timeout(300)  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        """() => !document.querySelector('[data-testid="stStatusWidget"]')""", timeout=timeout_ms
    )
    page.wait_for_timeout(300)  # type: ignore[attr-defined]


def screenshot(page: object, name: str) -> Path:
    """The whole page (Streamlit scrolls inside its main block, so grow the viewport to it)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    h = page.evaluate(  # type: ignore[attr-defined]
        """() => { const m = document.querySelector('[data-testid="stMain"]'); return m ? m.scrollHeight : document.body.scrollHeight; }"""
    )
    page.set_viewport_size({"width": 1400, "height": min(max(int(h), 900), 9000)})  # type: ignore[attr-defined]
    page.wait_for_timeout(1200)  # type: ignore[attr-defined]
    out = SHOTS / f"{name}.png"
    page.screenshot(path=str(out))  # type: ignore[attr-defined]
    page.set_viewport_size({"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    return out


def no_exception(page: object) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0  # type: ignore[attr-defined]


def choose(page: object, label: str, option: str) -> None:
    """Pick ``option`` in the selectbox labelled ``label`` (retried: a click that lands while
    the page re-renders may not open the list)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first  # type: ignore[attr-defined]
    shown = ""
    for _ in range(6):
        wait_idle(page)
        box.locator("input").click()
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=5_000)  # type: ignore[attr-defined]
        except PlaywrightTimeout:
            page.keyboard.press("Escape")  # type: ignore[attr-defined]
            continue
        wait_idle(page)
        # a click that lands while the page re-renders can be undone by that render: check
        # the box shows the option before going on
        # (the value is the input's value or its placeholder-like text, depending on the version)
        shown = " ".join([box.inner_text(), box.locator("input").input_value(), box.text_content() or ""])
        if option in shown.replace(label, ""):
            return
    pytest.fail(f"could not choose {option!r} in {label!r} (the box shows {shown!r})")


def run_and_wait(page: object, n: int) -> None:
    """Press Run and wait for the n-th run to appear in the runs table."""
    page.get_by_role("button", name="Run", exact=True).click()  # type: ignore[attr-defined]
    page.wait_for_function(  # type: ignore[attr-defined]
        """(n) => { const t = document.querySelector('[data-testid="stTable"]'); return t && t.innerText.includes('#' + n + ' '); }""",
        arg=n,
        timeout=RUN_TIMEOUT_MS,
    )
    wait_idle(page)
    errors = page.locator('[data-testid="stAlertContentError"]')  # type: ignore[attr-defined]
    assert errors.count() == 0, errors.first.inner_text()


def download(page: object, button: str) -> bytes:
    """The file behind a download button. A download the browser cancels (Streamlit re-rendered
    the page while it ran and replaced the button's file) is asked for again; what the file
    holds is checked by the caller."""
    from playwright.sync_api import Error as PlaywrightError

    last: Exception | None = None
    for _ in range(5):
        try:
            with page.expect_download(timeout=60_000) as info:  # type: ignore[attr-defined]
                page.get_by_role("button", name=button).first.click()  # type: ignore[attr-defined]
            return Path(info.value.path()).read_bytes()
        except PlaywrightError as e:
            if "canceled" not in str(e):
                raise
            last = e
            wait_idle(page)
    raise AssertionError(f"the {button!r} download was canceled five times in a row: {last}")


def csv_rows(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"))))


def results_of(page: object, n: int) -> list[dict[str, str]]:
    """The Results CSV once it holds ``n`` runs. The runs table shows a new run before the rest
    of the page (timeline, downloads) has re-rendered; until then the download button still
    serves the previous render's file, so download again until the new one is there."""
    rows: list[dict[str, str]] = []
    for _ in range(30):
        rows = csv_rows(download(page, "Results (CSV)"))
        if len(rows) >= n:
            return rows
        page.wait_for_timeout(1000)  # type: ignore[attr-defined]
    return rows


# ---------------------------------------------------------------------------------- tests
def test_every_page_loads_and_is_screenshotted(page: object, server: str) -> None:
    for name in PAGES:
        open_page(page, server, name)
        no_exception(page)
        assert page.locator("h1").first.inner_text().strip()  # type: ignore[attr-defined]
        screenshot(page, name)
    assert all((SHOTS / f"{n}.png").stat().st_size > 10_000 for n in PAGES)


def test_netns_nocb_all_lowers_the_rate_and_the_trace_parses(page: object, server: str) -> None:
    open_page(page, server, "netns")
    page.get_by_role("tab", name="Try it").click()  # type: ignore[attr-defined]
    run_and_wait(page, 1)
    choose(page, "kernel.rcu.nocb", "all")
    run_and_wait(page, 2)
    no_exception(page)
    # the rate the chart shows, read from what the page rendered: the runs table ...
    table = page.locator('[data-testid="stTable"]').first.inner_text()  # type: ignore[attr-defined]
    assert "nocb=none" in table and "nocb=all" in table
    # ... and the chart's own data, downloaded as CSV (one line per run in the chart), once the
    # downloads are the new render's (results_of waits for that)
    results = results_of(page, 2)
    series = csv_rows(download(page, "Series (CSV)"))
    by_run: dict[str, list[float]] = {}
    for r in series:
        if r["y_name"] == "per_s":
            by_run.setdefault(r["run"], []).append(float(r["y"]))
    none_run = next(k for k in by_run if "nocb=none" in k)
    all_run = next(k for k in by_run if "nocb=all" in k)
    mean_none = sum(by_run[none_run]) / len(by_run[none_run])
    mean_all = sum(by_run[all_run]) / len(by_run[all_run])
    assert mean_all < mean_none, f"NOCB_ALL should lower the fake-router rate: {mean_none:.1f} -> {mean_all:.1f}/s"
    rate = {r["run"]: float(r["routers_per_s"]) for r in results}
    assert rate[all_run] < rate[none_run]
    # the latest run's trace (nocb=all): Chrome trace-event JSON with CPU and RCU tracks
    doc = json.loads(download(page, "Trace (Chrome JSON)"))
    names = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert {"CPU 0", "RCU grace periods"} <= names
    assert any(e.get("ph") == "X" and str(e.get("name", "")).startswith("rcuo") for e in doc["traceEvents"])
    scenario = download(page, "Scenario (TOML)").decode()
    assert 'nocb = "all"' in scenario
    screenshot(page, "netns-runs")
    if os.environ.get("RCUSIM_UPDATE_SCREENSHOT"):
        # the README's screenshot (docs/screenshot-explorer.png): the runs and the rate chart
        page.set_viewport_size({"width": 1400, "height": 1250})  # type: ignore[attr-defined]
        page.get_by_text("Runs on this page").evaluate("e => e.scrollIntoView({block: 'start'})")  # type: ignore[attr-defined]
        page.wait_for_timeout(1500)  # type: ignore[attr-defined]
        page.screenshot(path=str(ROOT / "docs" / "screenshot-explorer.png"))  # type: ignore[attr-defined]


def test_hackbench_lock_policy_changes_the_time(page: object, server: str) -> None:
    from app.explorer import core

    if "hackbench-rt-2008" not in core.bundled_scenarios() or "hackbench" not in core.catalog().workloads:
        pytest.skip("hackbench-rt-2008 is not available yet (no scenarios/hackbench-rt-2008.toml or hackbench workload)")
    open_page(page, server, "hackbench")
    page.get_by_role("tab", name="Try it").click()  # type: ignore[attr-defined]
    run_and_wait(page, 1)
    choose(page, "kernel.locks.policy", "adaptive")
    run_and_wait(page, 2)
    no_exception(page)
    results = results_of(page, 2)
    times = {("strict" if "policy=strict" in r["run"] else "adaptive"): float(r["time_s_at_100_loops"]) for r in results}
    assert set(times) == {"strict", "adaptive"}, [r["run"] for r in results]
    assert times["adaptive"] != times["strict"]
    assert times["adaptive"] < times["strict"], f"adaptive spinning should beat strict handoff: {times}"
    table = page.locator('[data-testid="stTable"]').first.inner_text()  # type: ignore[attr-defined]
    assert re.search(r"policy=adaptive", table)
    screenshot(page, "hackbench-runs")


def test_ab_mode_in_the_browser(page: object, server: str) -> None:
    open_page(page, server, "ab")
    routers = page.get_by_role("spinbutton", name="workload.routers")  # type: ignore[attr-defined]
    routers.fill("30")
    routers.press("Enter")
    wait_idle(page)
    reps = page.get_by_role("spinbutton", name="replications (seeds)")  # type: ignore[attr-defined]
    reps.fill("3")
    reps.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Run A and B").click()  # type: ignore[attr-defined]
    page.wait_for_selector('[data-testid="stMetric"]', timeout=RUN_TIMEOUT_MS)  # type: ignore[attr-defined]
    wait_idle(page)
    no_exception(page)
    text = page.locator('[data-testid="stMain"]').inner_text()  # type: ignore[attr-defined]
    assert "95% interval" in text and "paired runs" in text
    screenshot(page, "ab-result")
