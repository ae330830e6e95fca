"""The ``marag serve`` API: every endpoint, streaming order, the token, each limit, and the
refusals that keep requests inside the runs directory."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from webfixtures import PNG, QUESTION, make_ctx, team

from marag.llm.scripted import ScriptedLLM
from marag.methods import METHOD_NAMES
from marag.types import Trace
from marag.web.app import create_app
from marag.web.runs import RunNotFound, RunStore
from marag.web.settings import ServeSettings

TOKEN = "s3cret-token-123"


def client(llm: Any = None, index: Path | None = None, **settings: Any) -> TestClient:
    ctx = make_ctx(llm or team(), index)
    return TestClient(create_app(ctx, ServeSettings(**settings)))


def events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        head, data = block.split("\n", 1)
        assert head.startswith("event: ") and data.startswith("data: ")
        out.append((head[7:], json.loads(data[6:])))
    return out


# ---------------------------------------------------------------------------- asking


def test_health_page_and_methods(index_dir):
    with client(index=index_dir) as c:
        assert c.get("/health").json()["status"] == "ok"
        page = c.get("/")
        assert page.status_code == 200 and "<title>marag</title>" in page.text
        assert c.get("/static/app.js").status_code == 200
        m = c.get("/api/methods").json()
        assert m["default"] == "jade"
        assert [x["name"] for x in m["methods"]] == list(METHOD_NAMES)  # the registry's
        assert all(x["available"] for x in m["methods"])
    with client() as c:  # no index: only llm-only can run
        avail = {x["name"]: x["available"] for x in c.get("/api/methods").json()["methods"]}
        assert avail["llm-only"] and not avail["jade"]
        r = c.post("/api/ask", json={"question": "q", "method": "jade"})
        assert r.status_code == 422 and "no index" in r.json()["detail"]


def test_ask_returns_a_decomposed_trace_with_scores(index_dir):
    with client(index=index_dir) as c:
        r = c.post("/api/ask", json={"question": QUESTION, "golden_answers": ["London"],
                                     "id": "mine"})
        assert r.status_code == 200
        t = Trace.from_dict(r.json())
        assert t.id == "mine" and t.answer == "London" and t.metrics["em"] == 1.0
        assert [n.question for n in t.nodes] == [QUESTION, "Who directed Inception?",
                                                 "Where was Christopher Nolan born?"]
        assert t.nodes[0].workflow == ["QDS"] and t.nodes[1].workflow == ["R", "DS", "AG"]
        assert t.nodes[1].answer == "Christopher Nolan"
        r = next(s for s in t.steps if s.role == "R" and s.node_id == 1)
        assert r.doc_ids[0] == "p0"  # BM25 found the Inception passage


def test_ask_with_method_and_overrides(index_dir):
    with client(index=index_dir) as c:
        r = c.post("/api/ask", json={"question": QUESTION, "overrides": ["method.max_rounds=1"]})
        assert r.json()["status"] == "budget"  # the override reached the workflow
        r = c.post("/api/ask", json={"question": QUESTION})
        assert r.json()["status"] == "ok"  # and did not stick to the shared context
        for bad in (["llms.default.model=x"], ["retrieval.k=3"], ["method.name=vanilla"],
                    ["method.max_rounds"], ["method.nope=1"]):
            r = c.post("/api/ask", json={"question": QUESTION, "overrides": bad})
            assert r.status_code == 422, bad
        r = c.post("/api/ask", json={"question": QUESTION, "method": "rag"})
        assert r.status_code == 422 and "unknown method" in r.json()["detail"]
        r = c.post("/api/ask", json={"question": QUESTION, "temperature": 1})
        assert r.status_code == 422  # unknown field
        r = c.post("/api/ask", json={"question": ""})
        assert r.status_code == 422


def test_stream_sends_nodes_and_steps_then_the_trace(index_dir):
    with client(index=index_dir) as c:
        r = c.post("/api/ask/stream", json={"question": QUESTION, "golden_answers": ["London"]})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    ev = events(r.text)
    kinds = [k for k, _ in ev]
    assert kinds[0] == "start" and kinds[-1] == "trace" and kinds.count("trace") == 1
    final = ev[-1][1]
    trace = final["trace"]
    steps = [d for k, d in ev if k == "step"]
    # one event per step, each with its index and one-line summary
    assert [d["index"] for d in steps] == list(range(len(trace["steps"])))
    assert [d["step"]["role"] for d in steps] == [s["role"] for s in trace["steps"]]
    assert steps[0]["summary"] == "QDS" and steps[1]["summary"].startswith("1. Who directed")
    # node events: the root first, its children when QDS made them, answers as they came
    nodes = [d["node"] for k, d in ev if k == "node"]
    assert nodes[0]["id"] == 0 and nodes[0]["answer"] is None
    first_answer = next(i for i, n in enumerate(nodes) if n["id"] == 1 and n["answer"])
    assert nodes[first_answer]["answer"] == "Christopher Nolan"
    assert nodes[-1]["id"] == 0 and nodes[-1]["answer"] == "London"
    # node 1 was answered before node 2's steps began
    pos = next(i for i, (k, d) in enumerate(ev) if k == "node" and d["node"]["id"] == 1
           and d["node"]["answer"])
    first_node2_step = next(i for i, (k, d) in enumerate(ev)
                            if k == "step" and d["step"]["node_id"] == 2)
    assert pos < first_node2_step
    # the live layout at the last step is the final layout (one layout code for both)
    last_live = steps[-1]["layout"]
    assert last_live["roots"] == final["layout"]["roots"]
    assert final["layout"]["summaries"] == [d["summary"] for d in steps]
    assert trace["metrics"]["em"] == 1.0


class GatedLLM(ScriptedLLM):
    """Holds every call of ``role`` until ``gate`` (a threading.Event) is set."""

    def __init__(self, base: ScriptedLLM, role: str, gate: threading.Event) -> None:
        super().__init__()
        self._rules, self.role, self.gate = base._rules, role, gate

    async def generate(self, batch, params):  # type: ignore[no-untyped-def]
        from marag.llm.base import current_role

        if current_role.get() == self.role:
            await asyncio.to_thread(self.gate.wait, 30)
        return await super().generate(batch, params)


def test_stream_events_arrive_before_the_run_ends(index_dir, live_server):
    gate = threading.Event()
    app = create_app(make_ctx(GatedLLM(team(), "AS", gate), index_dir), ServeSettings())
    with live_server(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as h:
        seen: list[str] = []
        with h.stream("POST", "/api/ask/stream", json={"question": QUESTION}) as r:
            buf = ""
            for chunk in r.iter_text():
                buf += chunk
                while "\n\n" in buf:
                    block, buf = buf.split("\n\n", 1)
                    kind = block.split("\n")[0][7:]
                    seen.append(kind)
                    if kind == "step" and json.loads(block.split("\n", 1)[1][6:])[
                            "step"]["role"] == "AG" and not gate.is_set():
                        # the question is still held at AS: the steps so far were streamed
                        assert "trace" not in seen and seen.count("step") >= 5
                        assert h.get("/health").json()["asks_in_flight"] == 1
                        gate.set()
        assert gate.is_set() and seen[-1] == "trace"


def test_a_client_that_leaves_a_stream_cancels_its_question(index_dir, live_server):
    gate = threading.Event()
    app = create_app(make_ctx(GatedLLM(team(), "AS", gate), index_dir), ServeSettings())
    with live_server(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as h:
        with h.stream("POST", "/api/ask/stream", json={"question": QUESTION}) as r:
            next(r.iter_text())
        gate.set()  # let the worker thread go; the question itself must be cancelled
        for _ in range(200):
            if h.get("/health").json()["asks_in_flight"] == 0:
                break
            threading.Event().wait(0.05)
        assert h.get("/health").json()["asks_in_flight"] == 0
        # a slow question never blocks others: a fresh one completes
        assert h.post("/api/ask", json={"question": QUESTION}).json()["answer"] == "London"


# ---------------------------------------------------------------------------- safety


def test_token_is_required_on_every_api_route(index_dir, runs_dir):
    with client(index=index_dir, token=TOKEN, runs=runs_dir) as c:
        routes = [("GET", "/api/methods"), ("GET", "/api/runs"), ("GET", "/api/runs/jade-team"),
                  ("GET", "/api/runs/jade-team/traces"), ("GET", "/api/runs/jade-team/traces/q1"),
                  ("GET", "/api/runs/jade-team/plots/f1.png"), ("POST", "/api/ask"),
                  ("POST", "/api/ask/stream")]
        body = {"question": QUESTION}
        for method, path in routes:
            for headers in ({}, {"Authorization": "Bearer wrong-token-xx"},
                            {"Authorization": TOKEN}, {"Authorization": f"Basic {TOKEN}"}):
                r = c.request(method, path, json=body if method == "POST" else None,
                              headers=headers)
                assert r.status_code == 401, (path, headers)
                assert r.headers["www-authenticate"] == "Bearer"
            r = c.request(method, path, json=body if method == "POST" else None,
                          headers={"Authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 200, (path, r.text)
        assert c.get("/health").status_code == 200 and c.get("/").status_code == 200


def test_body_and_question_limits(index_dir):
    with client(index=index_dir, max_body_bytes=2048, max_question_chars=100) as c:
        r = c.post("/api/ask", json={"question": "x" * 101})
        assert r.status_code == 413 and "limit is 100" in r.json()["detail"]
        r = c.post("/api/ask", json={"question": "x" * 4000})
        assert r.status_code == 413 and "limit is 2048" in r.json()["detail"]

        def chunked():  # no Content-Length: the body arrives in pieces
            yield b'{"question": "'
            for _ in range(10):
                yield b"y" * 300
            yield b'"}'

        r = c.post("/api/ask", content=chunked(), headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        small = iter([b'{"question": ', json.dumps(QUESTION).encode(), b"}"])
        r = c.post("/api/ask", content=small, headers={"Content-Type": "application/json"})
        assert r.status_code == 200 and r.json()["answer"] == "London"


def test_concurrent_asks_past_the_limit_get_429(index_dir, live_server):
    gate = threading.Event()
    app = create_app(make_ctx(GatedLLM(team(), "planner", gate), index_dir),
                     ServeSettings(max_concurrent_asks=2))
    with live_server(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as h:
        results: list[int] = []
        threads = [threading.Thread(target=lambda: results.append(
            h.post("/api/ask", json={"question": QUESTION}).status_code)) for _ in range(2)]
        for t in threads:
            t.start()
        for _ in range(200):
            if h.get("/health").json()["asks_in_flight"] == 2:
                break
            threading.Event().wait(0.02)
        r = h.post("/api/ask", json={"question": QUESTION})
        assert r.status_code == 429 and "limit is 2" in r.json()["detail"]
        assert h.post("/api/ask/stream", json={"question": QUESTION}).status_code == 429
        assert h.get("/api/runs").status_code == 200  # other routes still answer
        gate.set()
        for t in threads:
            t.join(30)
        assert results == [200, 200]
        assert h.post("/api/ask", json={"question": QUESTION}).status_code == 200


def test_a_question_past_the_timeout_gets_504(index_dir):
    with client(ScriptedLLM({"AG": "<answer>x</answer>"}, latency=0.5), index_dir,
                ask_timeout=0.05) as c:
        r = c.post("/api/ask", json={"question": "q", "method": "llm-only"})
        assert r.status_code == 504 and "longer than 0.05" in r.json()["detail"]
        ev = events(c.post("/api/ask/stream", json={"question": "q", "method": "llm-only"}).text)
        assert ev[-1][0] == "error" and "longer than" in ev[-1][1]["detail"]
        assert c.get("/health").json()["asks_in_flight"] == 0


# ---------------------------------------------------------------------------- runs


def test_runs_list_and_info(runs_dir):
    with client(runs=runs_dir) as c:
        runs = {r["name"]: r for r in c.get("/api/runs").json()["runs"]}
        assert set(runs) == {"jade-team", "vanilla-team"}
        assert runs["jade-team"]["method"] == "jade" and runs["jade-team"]["n"] == 4
        assert runs["jade-team"]["finished"] and runs["jade-team"]["em"] == 0.5
        info = c.get("/api/runs/vanilla-team").json()
        assert info["summary"]["n"] == 4 and info["summary"]["failed"] == 1
        assert info["plots"] == [] and info["finished"]
        assert c.get("/api/runs/jade-team").json()["plots"] == ["f1.png"]
        r = c.get("/api/runs/jade-team/plots/f1.png")
        assert r.status_code == 200 and r.content == PNG and r.headers["content-type"] == "image/png"


def test_traces_filters_search_and_paging(runs_dir):
    with client(runs=runs_dir) as c:
        base = "/api/runs/vanilla-team/traces"
        page = c.get(base).json()
        assert page["total"] == 4 and [r["id"] for r in page["items"]] == ["q1", "q2", "q3", "q4"]
        outcome = {r["id"]: r["outcome"] for r in page["items"]}
        assert outcome == {"q1": "correct", "q2": "correct", "q3": "incorrect", "q4": "failed"}
        ids = lambda **p: [r["id"] for r in c.get(base, params=p).json()["items"]]
        assert ids(filter="correct") == ["q1", "q2"]
        assert ids(filter="incorrect") == ["q3"] and ids(filter="failed") == ["q4"]
        assert ids(q="SEINE") == ["q3"] and ids(q="london") == ["q1", "q2", "q3"]  # answers too
        assert ids(offset=1, limit=2) == ["q2", "q3"]
        assert c.get(base, params={"filter": "some"}).status_code == 422
        assert c.get(base, params={"limit": 0}).status_code == 422
        assert c.get(base, params={"offset": -1}).status_code == 422
        one = c.get("/api/runs/jade-team/traces/q1").json()
        assert one["trace"]["id"] == "q1" and len(one["trace"]["nodes"]) == 3
        assert one["layout"]["roots"][0]["children"][0]["id"] == 1
        assert c.get("/api/runs/jade-team/traces/nope").status_code == 404


def test_a_run_being_written_is_read_without_its_torn_line(runs_dir, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(runs_dir / "vanilla-team", root / "live")
    (root / "live" / "metrics.json").unlink()  # not finished yet
    traces = root / "live" / "traces.jsonl"
    with open(traces, "a", encoding="utf-8") as f:
        f.write('{"id": "q5", "question": "half a li')
    before = traces.read_bytes()
    with client(runs=root) as c:
        assert c.get("/api/runs").json()["runs"][0]["finished"] is False
        assert c.get("/api/runs/live/traces").json()["total"] == 4
        assert c.get("/api/runs/live").json()["summary"]["n"] == 4
        assert traces.read_bytes() == before  # never repaired from here
        with open(traces, "a", encoding="utf-8") as f:  # the writer finishes the line
            f.write('ne", "method": "vanilla", "answer": "x"}\n')
        assert c.get("/api/runs/live/traces").json()["total"] == 5
        # damage before the last line is reported, not hidden
        lines = traces.read_text().splitlines()
        traces.write_text("\n".join([lines[0], "{broken", *lines[1:]]) + "\n")
        r = c.get("/api/runs/live/traces")
        assert r.status_code == 422
        assert r.json()["detail"].startswith("live/traces.jsonl:2: not a valid trace")


def test_run_names_and_plot_names_cannot_leave_the_runs_dir(runs_dir, tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    shutil.copytree(runs_dir / "jade-team", root / "ok")
    outside = tmp_path / "secret"
    shutil.copytree(runs_dir / "vanilla-team", outside)
    (outside / "leak.png").write_bytes(PNG)
    os.symlink(outside, root / "link-out")  # a run dir that is a symlink out of the root
    os.symlink(outside / "leak.png", root / "ok" / "plots" / "leak.png")
    os.symlink(root / "ok", root / "link-in")  # stays inside: allowed
    with client(runs=root) as c:
        assert [r["name"] for r in c.get("/api/runs").json()["runs"]] == ["link-in", "ok"]
        # ("." and ".." in a URL path are resolved by the client; the store refuses them below)
        for name in ("link-out", "%2e%2e", "..%2fsecret", "ok%2f..%2f..%2fsecret",
                     ".hidden", "a%20b", "x" * 200, "%2fetc"):
            for path in (f"/api/runs/{name}", f"/api/runs/{name}/traces",
                         f"/api/runs/{name}/plots/f1.png"):
                r = c.get(path)
                assert r.status_code == 404, (path, r.status_code)
        assert c.get("/api/runs/link-in").status_code == 200
        for file in ("leak.png", "..%2f..%2fsecret%2fleak.png", "traces.jsonl", "run.json",
                     "%2e%2e.png", ".png"):
            assert c.get(f"/api/runs/ok/plots/{file}").status_code == 404, file
        assert c.get("/api/runs/ok/plots/f1.png").status_code == 200
    store = RunStore(root)
    for name in ("..", ".", "../secret", "ok/../../secret", "/etc", "link-out", "ok/plots", ""):
        with pytest.raises(RunNotFound):
            store.path(name)
    with pytest.raises(RunNotFound):
        store.plot("ok", "../../secret/leak.png")
    with client() as c:  # started without --runs
        assert c.get("/api/runs").json() == {"runs": []}
        assert c.get("/api/runs/ok").status_code == 404


def test_a_training_run_lists_its_curves_and_checkpoint_evaluations(train_runs_dir):
    with client(runs=train_runs_dir) as c:
        runs = c.get("/api/runs").json()["runs"]
        assert [r["name"] for r in runs] == ["jade-team", "tiny-train", "tiny-train@iter-000001",
                                             "tiny-train@iter-000002", "vanilla-team"]
        line = {r["name"]: r for r in runs}["tiny-train"]
        assert line["kind"] == "train" and line["method"] == "vanilla"
        ckpt = {r["name"]: r for r in runs}["tiny-train@iter-000002"]
        assert ckpt["kind"] == "eval" and ckpt["parent"] == "tiny-train"
        assert ckpt["iteration"] == 2 and ckpt["n"] == 2
        assert line["iterations"] == 2 == line["planned"] and line["finished"]
        rows = [json.loads(x) for x in
                (train_runs_dir / "tiny-train" / "metrics.jsonl").read_text().splitlines()]
        best = max(rows, key=lambda r: r["eval.f1"])  # the first of equals, as best/ keeps it
        assert line["f1"] == best["eval.f1"] and line["best_iteration"] == best["iteration"]
        info = c.get("/api/runs/tiny-train").json()
        assert info["kind"] == "train" and info["evaluations"] == [
            "tiny-train@iter-000001", "tiny-train@iter-000002"]
        assert [r["iteration"] for r in info["rows"]] == [1, 2]
        assert info["rows"][0]["reward"] == rows[0]["reward"]
        assert info["rows"][1]["workflow.R,AG"] == 1.0 and "eval.f1" in info["rows"][1]
        assert info["best"]["iteration"] == best["iteration"]
        assert "method:\n  name: vanilla" in info["config"]
        # a checkpoint evaluation is an evaluation run: its metrics, questions and traces
        ev = c.get("/api/runs/tiny-train@iter-000002").json()
        assert ev["kind"] == "eval" and ev["summary"]["n"] == 2
        page = c.get("/api/runs/tiny-train@iter-000002/traces").json()
        assert [t["id"] for t in page["items"]] == ["q3", "q4"]
        one = c.get("/api/runs/tiny-train@iter-000002/traces/q3").json()
        assert one["trace"]["method"] == "vanilla"
        # a training run itself has no questions: the 404 says where they are
        r = c.get("/api/runs/tiny-train/traces")
        assert r.status_code == 404 and "tiny-train@iter-NNNNNN" in r.json()["detail"]


def test_a_training_run_being_written(train_runs_dir, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(train_runs_dir / "tiny-train", root / "live")
    metrics = root / "live" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    # the first iteration, a row with a NaN (dropped, JSON has none) and a torn line
    first = json.loads(lines[0])
    first["vf_loss"] = float("nan")
    metrics.write_text(json.dumps(first) + "\n" + '{"iteration": 2, "rew')
    shutil.rmtree(root / "live" / "eval" / "iter-000002")
    with client(runs=root) as c:
        line = c.get("/api/runs").json()["runs"][0]
        assert line["name"] == "live" and line["iterations"] == 1 and not line["finished"]
        info = c.get("/api/runs/live").json()
        assert [r["iteration"] for r in info["rows"]] == [1] and "vf_loss" not in info["rows"][0]
        assert info["evaluations"] == ["live@iter-000001"]


def _rewrite_rows(run: Path, rows: list[Any], extra: str = "") -> None:
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + extra, encoding="utf-8")


def test_the_best_checkpoint_and_odd_rows(train_runs_dir, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(train_runs_dir / "tiny-train", root / "t")
    shutil.copytree(train_runs_dir / "vanilla-team", root / "v")
    base = json.loads((root / "t" / "metrics.jsonl").read_text().splitlines()[0])
    f1s = [float("nan"), 0.2, 0.5, 0.3]  # a NaN evaluation is not the best one
    rows: list[Any] = [{**base, "iteration": i + 1, "eval.f1": f, "eval.em": f / 2}
                       for i, f in enumerate(f1s)]
    rows += [None, [1, 2], {"iteration": "five"}, {"reward": 1.0}]  # skipped, not fatal
    _rewrite_rows(root / "t", rows, '{"iteration": 6, "rew')  # and a torn last line
    with client(runs=root) as c:
        line = {r["name"]: r for r in c.get("/api/runs").json()["runs"]}["t"]
        assert line["best_iteration"] == 3 and line["f1"] == 0.5 and line["em"] == 0.25
        assert line["iterations"] == 4
        info = c.get("/api/runs/t").json()
        assert [r["iteration"] for r in info["rows"]] == [1, 2, 3, 4]
        assert "eval.f1" not in info["rows"][0]  # NaN dropped: JSON has none
    # a config that is not UTF-8 and metrics that are not either: listed, never a 500
    (root / "t" / "config.yaml").write_bytes(b"\xff\xfe method: {name: x}")
    (root / "t" / "metrics.jsonl").write_bytes(b'{"iteration": 1, "reward": 0.5}\n\xff\n')
    with client(runs=root) as c:
        runs = {r["name"]: r for r in c.get("/api/runs").json()["runs"]}
        assert runs["t"]["method"] is None and runs["t"]["planned"] is None
        assert runs["t"]["iterations"] == 1 and runs["v"]["kind"] == "eval"
        assert c.get("/api/runs/t").status_code == 200


def test_checkpoint_evaluation_names_cannot_leave_the_run(train_runs_dir, tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(train_runs_dir / "tiny-train", root / "t")
    shutil.copytree(train_runs_dir / "vanilla-team", root / "v")
    outside = tmp_path / "secret"
    shutil.copytree(train_runs_dir / "vanilla-team", outside)
    os.symlink(outside, root / "t" / "eval" / "iter-000009")  # an evaluation linked out
    os.symlink(root / "v", root / "t" / "eval" / "iter-000008")  # elsewhere in the root
    # a training run whose whole eval/ folder links to another run's, outside the root
    other = tmp_path / "other"
    shutil.copytree(train_runs_dir / "tiny-train", other)
    shutil.copytree(train_runs_dir / "tiny-train", root / "u")
    shutil.rmtree(root / "u" / "eval")
    os.symlink(other / "eval", root / "u" / "eval")
    with client(runs=root) as c:
        assert [r["name"] for r in c.get("/api/runs").json()["runs"]] == [
            "t", "t@iter-000001", "t@iter-000002", "u", "v"]
        assert c.get("/api/runs/u").json()["evaluations"] == []
        assert c.get("/api/runs/u@iter-000001").status_code == 404
        for name in ("t@iter-000009", "t@iter-000008", "v@iter-000001", "t@..", "t@%2e%2e",
                     "t@iter-000001@x", "t@", "@iter-000001", "t@eval", "nope@iter-000001"):
            for path in (f"/api/runs/{name}", f"/api/runs/{name}/traces"):
                assert c.get(path).status_code == 404, path
        assert c.get("/api/runs/t@iter-000001/traces").status_code == 200


def test_a_blank_question_is_422_with_the_cli_message_on_ask_and_stream(index_dir):
    import re

    from marag.types import EMPTY_QUESTION

    # U+0085 and U+001C are blank to Python but not to JSON Schema's \s; U+FEFF the other way
    # round (Schemathesis found "\u0085" refused although the documented pattern was \S)
    blanks = ("   ", "\n\t", "\u0085", "\x1c \u3000", "\ufeff")
    with client(index=index_dir) as c:
        for route in ("/api/ask", "/api/ask/stream"):
            for blank in blanks:
                r = c.post(route, json={"question": blank})
                assert r.status_code == 422 and r.json() == {"detail": EMPTY_QUESTION}
        spec = c.get("/openapi.json").json()
    pattern = spec["components"]["schemas"]["AskRequest"]["properties"]["question"]["pattern"]
    assert "\\s" not in pattern and "\\S" not in pattern  # no dialect-dependent class
    assert all(re.search(pattern, b) is None for b in blanks)
    assert all(re.search(pattern, q) for q in ("?", "é", "\u200b", " x "))
