"""End to end in headless Chromium: ask a question and watch the streamed tree, then browse an
evaluation run and open its traces (one alone, then two runs side by side).

Needs Debian's ``chromium`` and ``chromium-driver`` packages (``make test`` installs them when
it may) and the ``selenium`` package (in the ``dev`` extra); skips saying which is missing.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from webfixtures import QUESTION, make_ctx, team

from marag.web.app import create_app
from marag.web.settings import ServeSettings

# MARAG_CHROMIUM / MARAG_CHROMEDRIVER point at other builds of the two executables
CHROMIUM = os.environ.get("MARAG_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = (os.environ.get("MARAG_CHROMEDRIVER") or shutil.which("chromedriver")
          or "/usr/bin/chromedriver")

if not (Path(CHROMIUM).is_file() and Path(DRIVER).is_file()):
    pytest.skip(f"chromium not installed: need {CHROMIUM} and {DRIVER} (Debian packages "
                "'chromium' and 'chromium-driver'; `make browser` installs them as root)",
                allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver",
                                reason="selenium not installed (pip install -e '.[dev]')")
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=webdriver.ChromeService(DRIVER))
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, cond: Any, timeout: float = 15) -> Any:
    # the live tree is redrawn on every event, so an element found a moment ago may be gone
    return WebDriverWait(driver, timeout, poll_frequency=0.02,
                         ignored_exceptions=[StaleElementReferenceException]).until(cond)


def _click(driver: Any, css: str) -> None:
    # opening a trace scrolls the page smoothly; a click sent while it still moves lands on
    # whatever is under the element's old position, so wait for the page to stand still first
    last = None
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        y = driver.execute_script("return window.scrollY")
        if y == last:
            break
        last = y
        time.sleep(0.15)
    driver.find_element(By.CSS_SELECTOR, css).click()


def _text(driver: Any, css: str) -> str:
    return " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, css))


def test_ask_and_browse_runs(browser, index_dir, runs_dir, live_server):
    # each scripted call takes 300 ms, so the tree visibly grows while the question runs (with
    # margin for a loaded machine: the page must see a node still running)
    app = create_app(make_ctx(team(latency=0.3), index_dir), ServeSettings(runs=runs_dir))
    with live_server(app) as srv:
        d = browser
        d.get(srv.url + "/")
        _wait(d, lambda d: Select(d.find_element(By.ID, "method")).first_selected_option.text
              == "jade")
        d.find_element(By.ID, "question").send_keys(QUESTION)
        d.find_element(By.ID, "golden").send_keys("London")
        d.find_element(By.ID, "ask-button").click()

        # live: a sub-question shows up while the run is still going
        _wait(d, lambda d: "Who directed Inception?" in _text(d, "#ask-trace .node-head")
              and d.find_elements(By.CSS_SELECTOR, "#ask-trace .node.running"))
        assert not d.find_elements(By.CSS_SELECTOR, "#ask-trace .final-answer")
        _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, "#ask-trace .final-answer"))
        assert _text(d, "#ask-trace .final-answer") == "A: London"
        assert "EM 1.00" in _text(d, "#ask-trace .scores")
        workflows = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#ask-trace .workflow")]
        assert workflows == ["QDS", "R, DS, AG", "R, DS, AG"]  # the planner's choices
        heads = _text(d, "#ask-trace .node-head")
        assert "Where was Christopher Nolan born? → London" in heads
        assert "11 LLM calls · 2 retrievals" in _text(d, "#ask-trace .cost")
        # a step opens to its prompt, raw output, parse, validity, documents and cost
        r_step = d.find_element(By.CSS_SELECTOR, '#ask-trace [data-node="1"] details[data-role="R"]')
        r_step.find_element(By.TAG_NAME, "summary").click()
        body = _wait(d, lambda d: r_step.find_element(By.CSS_SELECTOR, ".step-body")).text
        assert "Inception — p0" in body and "DOCUMENTS" in body.upper()
        ag = d.find_element(By.CSS_SELECTOR, '#ask-trace [data-node="1"] details[data-role="AG"]')
        ag.find_element(By.TAG_NAME, "summary").click()
        body = _wait(d, lambda d: ag.find_element(By.CSS_SELECTOR, ".step-body")).text
        # the prompt: the system message, then the documents (best ranked last) and question
        assert "\n[user] Document" in body and "Document0: (Inception)" in body
        assert "RAW OUTPUT\n<answer>Christopher Nolan\nPARSED\n\"Christopher Nolan\"" in body
        assert "VALIDITY\nvalid" in body and "2 completion tokens" in body

        # the run browser: a run's metrics, plots and questions; a trace; two runs side by side
        d.find_element(By.ID, "tab-runs").click()
        _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-run="jade-team"]'))[0].click()
        _wait(d, lambda d: "jade-team" in d.find_element(By.ID, "run-title").text
              and d.find_elements(By.CSS_SELECTOR, "#run-questions .question-row"))
        assert "50.00" in _text(d, "#run-metrics table")  # EM of the jade-team run
        _wait(d, lambda d: d.find_element(By.CSS_SELECTOR, "#run-plots img")
              .get_property("naturalWidth") == 2)
        d.find_element(By.CSS_SELECTOR, '#run-questions [data-id="q1"]').click()
        _wait(d, lambda d: "A: London" in _text(d, "#run-traces .final-answer"))
        assert "Who directed Inception?" in _text(d, "#run-traces .node-head")
        Select(d.find_element(By.ID, "run-compare")).select_by_value("vanilla-team")
        _click(d, '#run-questions [data-id="q1"]')
        _wait(d, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#run-traces .final-answer")) == 2)
        titles = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#run-traces .trace-title")]
        assert titles == ["jade-team · q1", "vanilla-team · q1"]
        # filters
        _click(d, '[data-run="vanilla-team"]')
        _wait(d, lambda d: "vanilla-team" in d.find_element(By.ID, "run-title").text)
        Select(d.find_element(By.ID, "run-filter")).select_by_value("failed")
        _wait(d, lambda d: [e.get_attribute("data-id") for e in
                            d.find_elements(By.CSS_SELECTOR, "#run-questions .question-row")]
              == ["q4"])
        _click(d, '#run-questions [data-id="q4"]')
        _wait(d, lambda d: "error: LLMError" in _text(d, "#run-traces .failed"))
        assert _text(d, "#error") == ""


def test_a_training_run_shows_its_curves_and_opens_its_evaluations(browser, index_dir,
                                                                    train_runs_dir, live_server,
                                                                    tmp_path):
    import json

    root = tmp_path / "runs"
    shutil.copytree(train_runs_dir, root)
    metrics = root / "tiny-train" / "metrics.jsonl"
    rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    rows[0]["workflow.AG"] = 0.5  # not sampled at iteration 2: a share of 0 there
    rows[1]["valid.QR"] = 1.0     # QR ran at iteration 2 only: no line before it
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    app = create_app(make_ctx(team(), index_dir), ServeSettings(runs=root))
    with live_server(app) as srv:
        d = browser
        d.get(srv.url + "/#runs")
        _wait(d, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-run="tiny-train"]'))[0].click()
        _wait(d, lambda d: "training, vanilla" in d.find_element(By.ID, "run-title").text
              and d.find_elements(By.CSS_SELECTOR, "#train-charts svg.chart"))
        assert "iteration 2 of 2 (finished)" in d.find_element(By.ID, "train-summary").text
        titles = [e.get_attribute("aria-label")
                  for e in d.find_elements(By.CSS_SELECTOR, "#train-charts svg.chart")]
        dev = "development F1 (greedy, each checkpoint evaluation)"
        assert titles[:4] == ["reward and F1", dev, "workflow mix (share of sampled plans)",
                              "format-valid rate per role"]
        # one line per series, each through both iterations (the evaluation too)
        lines = d.find_elements(By.CSS_SELECTOR, "#train-charts svg.chart polyline")
        points = {e.get_attribute("data-key"): e.get_attribute("points").split() for e in lines}
        assert {"reward", "f1", "eval.f1", "workflow.R,AG", "valid.AG"} <= set(points)
        assert all(len(v) == 2 for k, v in points.items() if k != "valid.QR")
        assert len(points["valid.QR"]) == 1
        y_ag = [float(p.split(",")[1]) for p in points["workflow.AG"]]
        y_rag = [float(p.split(",")[1]) for p in points["workflow.R,AG"]]
        assert y_ag[1] > y_ag[0] and y_ag[1] > y_rag[1]  # 0% at iteration 2: on the axis
        assert d.find_element(By.ID, "run-questions-part").is_displayed() is False
        # a checkpoint evaluation opens as an evaluation run with its questions
        d.find_element(By.CSS_SELECTOR, '#train-evals [data-run="tiny-train@iter-000002"]').click()
        _wait(d, lambda d: [e.get_attribute("data-id") for e in
                            d.find_elements(By.CSS_SELECTOR, "#run-questions .question-row")]
              == ["q3", "q4"])
        assert d.find_element(By.ID, "run-training").is_displayed() is False
        assert _text(d, "#error") == ""
