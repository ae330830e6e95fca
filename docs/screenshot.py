"""Regenerate ``docs/serve.png``: ``marag serve``'s page in headless Chromium after asking a
question that the team decomposes (scripted agents, real BM25 retrieval over wiki-demo).

    .venv/bin/python docs/screenshot.py [--out docs/serve.png]

Needs Debian's chromium and chromium-driver and the selenium package (``make browser``).
"""

from __future__ import annotations

import argparse
import socket
import threading
import time
from pathlib import Path

QUESTION = "In which country was the composer of The Four Seasons born?"


def main() -> None:
    import uvicorn
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from marag.config import RetrievalConfig, load_config
    from marag.llm.scripted import decomposing
    from marag.retrieval import open_retriever
    from marag.web.app import create_app
    from marag.web.settings import ServeSettings
    from marag.workflows import Context

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).with_name("serve.png")))
    args = ap.parse_args()
    llm = decomposing(["Who composed The Four Seasons?", "In which country was he born?"],
                      ["Antonio Vivaldi", "Italy"], "Italy", latency=0.05,
                      rewrites={"In which country was he born?":
                                "In which country was Antonio Vivaldi born?"})
    ctx = Context(llms={"default": llm}, config=load_config(None, ["llms.default.backend=scripted"]),
                  retriever=open_retriever(RetrievalConfig(index="wiki-demo")))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(ctx, ServeSettings()), host="127.0.0.1",
                                           port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1300",
              "--hide-scrollbars"):
        opts.add_argument(a)
    d = webdriver.Chrome(options=opts, service=webdriver.ChromeService("/usr/bin/chromedriver"))
    try:
        d.get(f"http://127.0.0.1:{port}/")
        wait = WebDriverWait(d, 20)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#method option"))
        d.find_element(By.ID, "question").send_keys(QUESTION)
        d.find_element(By.ID, "golden").send_keys("Italy")
        d.find_element(By.ID, "ask-button").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#ask-trace .final-answer"))
        step = d.find_element(By.CSS_SELECTOR, '#ask-trace [data-node="2"] details[data-role="R"]')
        step.find_element(By.TAG_NAME, "summary").click()
        height = d.execute_script("return document.body.scrollHeight")
        # headless Chromium clips screenshots to the viewport: make it as tall as the page
        d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": height + 16, "deviceScaleFactor": 1, "mobile": False})
        d.save_screenshot(args.out)
        print(f"wrote {args.out}")
    finally:
        d.quit()
        server.should_exit = True


if __name__ == "__main__":
    main()
