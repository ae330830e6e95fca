"""The retrieval server: Search-R1 and MMOA-RAG wire formats, request validation, failures.

Runs in-process with FastAPI's TestClient over real passages from the NQ-open fixture corpus:
first a small word-overlap retriever written here, then a real BM25 index when it is built.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from fastapi.testclient import TestClient
from overlap import WordOverlapRetriever, load_passages

from marag.retrieval.base import Retriever
from marag.retrieval.server import create_app
from marag.types import Hits, Passage

QUERIES = [
    "who got the first nobel prize in physics",
    "when was the last time anyone was on the moon",
    "who wrote the declaration of independence",
    "where is the bermuda triangle located",
]


@pytest.fixture(scope="module")
def overlap(qa_data) -> WordOverlapRetriever:
    return WordOverlapRetriever(load_passages(qa_data))


@pytest.fixture(scope="module")
def bm25(qa_data, tmp_path_factory):
    from marag.retrieval import build_index, open_index

    out = tmp_path_factory.mktemp("bm25") / "nq"
    build_index(qa_data / "nq_open.corpus.jsonl", out, kind="bm25", show_progress=False)
    index = open_index(out)
    yield index
    index.close()


@pytest.fixture(params=["overlap", "bm25"])
def retriever(request) -> Retriever:
    return request.getfixturevalue(request.param)


def client_for(retriever: Retriever, **kw) -> TestClient:
    return TestClient(create_app(retriever, **kw))


def test_retrieve_with_scores_matches_search_r1_schema(retriever):
    http = client_for(retriever)
    r = http.post("/retrieve", json={"queries": QUERIES, "topk": 5, "return_scores": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert list(body) == ["result"]
    assert isinstance(body["result"], list) and len(body["result"]) == len(QUERIES)
    local = retriever.search_batch(QUERIES, 5)
    for items, hits in zip(body["result"], local):
        assert isinstance(items, list) and len(items) == 5
        for item, passage, score in zip(items, hits.passages, hits.scores):
            assert set(item) == {"document", "score"}
            assert set(item["document"]) == {"id", "contents"}
            assert isinstance(item["document"]["id"], str)
            assert isinstance(item["document"]["contents"], str)
            assert type(item["score"]) is float
            assert item["document"]["id"] == passage.id
            assert item["document"]["contents"] == f'"{passage.title}"\n{passage.text}'
            assert item["score"] == score


def test_retrieve_without_scores_returns_bare_documents(retriever):
    http = client_for(retriever)
    r = http.post("/retrieve", json={"queries": QUERIES[:2], "topk": 2, "return_scores": False})
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    local = retriever.search_batch(QUERIES[:2], 2)
    assert [[d["id"] for d in docs] for docs in result] == [h.ids for h in local]
    for docs in result:
        for d in docs:
            assert set(d) == {"id", "contents"} and isinstance(d["contents"], str)
    # return_scores defaults to false, as in Search-R1
    assert http.post("/retrieve", json={"queries": QUERIES[:2], "topk": 2}).json() == r.json()


def test_topk_defaults_to_server_setting(overlap):
    http = client_for(overlap, default_topk=4)
    for body in ({"queries": ["nobel prize"]}, {"queries": ["nobel prize"], "topk": None}):
        assert len(http.post("/retrieve", json=body).json()["result"][0]) == 4


def test_whole_batch_goes_to_one_search_call_and_blank_queries_get_no_hits(overlap):
    http = client_for(overlap)
    overlap.calls.clear()
    r = http.post("/retrieve", json={"queries": [QUERIES[0], "  ", QUERIES[1]], "topk": 3})
    assert r.status_code == 200
    assert [len(x) for x in r.json()["result"]] == [3, 0, 3]
    assert overlap.calls == [[QUERIES[0], QUERIES[1]]]


def test_search_endpoint_matches_mmoa_rag_shape(retriever):
    http = client_for(retriever)
    r = http.post("/search", json={"questions": QUERIES[:3], "N": 4})
    assert r.status_code == 200, r.text
    body = r.json()
    local = retriever.search_batch(QUERIES[:3], 4)
    assert isinstance(body, list) and len(body) == 3
    for entry, q, hits in zip(body, QUERIES, local):
        assert set(entry) == {"question", "top_k_docs"}
        assert entry["question"] == q
        assert entry["top_k_docs"] == [f"{p.title}\n{p.text}" for p in hits.passages]
    # N defaults to 10 like the MMOA-RAG flask server
    assert len(http.post("/search", json={"questions": QUERIES[:1]}).json()[0]["top_k_docs"]) == 10


def test_health_reports_kind_and_size(retriever):
    body = client_for(retriever).get("/health").json()
    assert body["status"] == "ok"
    assert body["kind"] == retriever.name
    assert body["passages"] == len(retriever)


BAD = [  # FastAPI's default error objects, as Search-R1's own server sends them
    ({}, 422, "missing", ["body", "queries"]),
    ({"queries": "who"}, 422, "list_type", ["body", "queries"]),
    ({"queries": ["ok", 3]}, 422, "string_type", ["body", "queries", 1]),
    ({"queries": ["q"], "topk": -2}, 422, "greater_than_equal", ["body", "topk"]),
    ({"queries": ["q"], "topk": 51}, 422, "less_than_equal", ["body", "topk"]),
    ({"queries": ["q"], "topk": 2.5}, 422, "int_from_float", ["body", "topk"]),
    ({"queries": ["q"], "topk": "three"}, 422, "int_parsing", ["body", "topk"]),
    ({"queries": ["q"], "return_scores": "maybe"}, 422, "bool_parsing", ["body", "return_scores"]),
    ([{"queries": ["q"]}], 422, "model_type", ["body"]),
]


@pytest.mark.parametrize("body,status,kind,loc", BAD)
def test_malformed_retrieve_requests_get_fastapi_shaped_422(overlap, body, status, kind, loc):
    r = client_for(overlap, max_batch=8, max_topk=50).post("/retrieve", json=body)
    assert r.status_code == status, r.text
    [error] = r.json()["detail"]
    assert error["type"] == kind and error["loc"] == loc, error
    assert isinstance(error["msg"], str) and error["msg"]


@pytest.mark.parametrize("body,reason", [
    ({"queries": ["q"] * 9}, r"9 queries.*at most 8 per request.*--max-batch"),
    ({"queries": ["q"] * 5, "topk": 30}, r"150 passages.*at most 100 .*--max-results"),
    ({"questions": ["q"] * 9}, r"at most 8 per request"),
])
def test_limits_are_413_with_reason(overlap, body, reason):
    http = client_for(overlap, max_batch=8, max_topk=50, max_results=100)
    r = http.post("/retrieve" if "queries" in body else "/search", json=body)
    assert r.status_code == 413, r.text
    assert re.search(reason, r.json()["detail"]), r.json()


def test_oversized_bodies_are_413_before_parsing(overlap):
    http = client_for(overlap, max_body_bytes=1000)
    r = http.post("/retrieve", json={"queries": ["x" * 2000]})
    assert r.status_code == 413 and "at most 1000" in r.json()["detail"]

    def chunks():  # no content-length: the limit is enforced while reading
        yield b'{"queries": ["'
        for _ in range(20):
            yield b"y" * 100
        yield b'"]}'

    r = http.post("/retrieve", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "exceeds 1000 bytes" in r.json()["detail"]


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe"])
def test_non_json_bodies_are_400(overlap, raw):
    http = client_for(overlap)
    for path in ("/retrieve", "/search"):
        r = http.post(path, content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400, r.text
        [error] = r.json()["detail"]
        assert error["type"] == "json_invalid" and "not valid JSON" in error["msg"]


@pytest.mark.parametrize("body,kind", [
    ({"queries": ["q"]}, "missing"),
    ({"questions": ["q"], "N": -1}, "greater_than_equal"),
    ({"questions": ["q"], "N": 1001}, "less_than_equal"),
    ({"questions": [None]}, "string_type"),
])
def test_bad_search_requests_get_422(overlap, body, kind):
    r = client_for(overlap).post("/search", json=body)
    assert r.status_code == 422
    assert r.json()["detail"][0]["type"] == kind


class Broken(Retriever):
    name = "broken"

    def search_batch(self, queries, k):
        raise OSError("disk went away")


class WrongLength(Retriever):
    name = "short"

    def search_batch(self, queries, k):
        return [Hits(queries[0], [Passage("1", "t", "x")], [])]


@pytest.mark.parametrize("retriever_cls,reason", [
    (Broken, "OSError: disk went away"), (WrongLength, "returned 1 passages but 0 scores"),
])
def test_index_failures_are_500_with_reason(retriever_cls, reason):
    r = client_for(retriever_cls()).post("/retrieve", json={"queries": ["q"], "topk": 1})
    assert r.status_code == 500
    assert reason in r.json()["detail"]


def test_responses_are_plain_json(overlap):
    r = client_for(overlap).post("/retrieve", json={"queries": QUERIES[:1], "return_scores": True})
    assert r.headers["content-type"].startswith("application/json")
    json.loads(r.content)  # strict JSON: no NaN/Infinity tokens


class Recording(Retriever):
    """Wraps a retriever, records each search_batch call and holds it for ``delay`` seconds."""

    name = "recording"

    def __init__(self, inner: Retriever, delay: float = 0.0) -> None:
        self.inner, self.delay, self.batches = inner, delay, []

    def search_batch(self, queries, k):
        self.batches.append((list(queries), k))
        import time

        time.sleep(self.delay)
        return self.inner.search_batch(queries, k)

    async def search(self, queries, k):
        self.batches.append((list(queries), k))
        await asyncio.sleep(self.delay)
        return self.inner.search_batch(queries, k)


async def test_concurrent_requests_are_merged_into_shared_search_calls(overlap):
    from marag.retrieval.coalesce import Coalescer

    rec = Recording(overlap, delay=0.05)
    coalescer = Coalescer(rec.search, concurrency=1)
    asks = [([QUERIES[i % 4]], 2 + i % 2) for i in range(9)] + [(QUERIES[:3], 2)]
    results = await asyncio.gather(*(coalescer.submit(q, k) for q, k in asks))
    # everything was queued before the one worker started: one call per distinct k
    assert sorted(k for _, k in rec.batches) == [2, 3]
    assert sum(len(q) for q, _ in rec.batches) == 12
    for (queries, k), hits in zip(asks, results):
        assert [h.query for h in hits] == queries
        assert [h.ids for h in hits] == [h.ids for h in overlap.search_batch(queries, k)]


async def test_merged_batches_respect_max_batch_and_share_failures(overlap):
    from marag.retrieval.coalesce import Coalescer

    rec = Recording(overlap)
    coalescer = Coalescer(rec.search, concurrency=1, max_batch=4)
    results = await asyncio.gather(*(coalescer.submit(QUERIES[:3], 1) for _ in range(3)))
    assert [len(q) for q, _ in rec.batches] == [3, 3, 3]  # 3 + 3 > 4: no merge
    assert all(len(r) == 3 for r in results)

    coalescer = Coalescer(Broken().search, concurrency=1)
    outcomes = await asyncio.gather(*(coalescer.submit(["q"], 1) for _ in range(3)), return_exceptions=True)
    assert all(isinstance(o, OSError) for o in outcomes)
    assert coalescer.calls == 1


def test_server_merges_concurrent_http_requests(overlap):
    rec = Recording(overlap, delay=0.2)
    app = create_app(rec, concurrency=1)
    http = TestClient(app)

    async def fire():
        import httpx

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await asyncio.gather(*(
                client.post("/retrieve", json={"queries": [q], "topk": 2, "return_scores": True})
                for q in QUERIES * 2
            ))

    responses = asyncio.run(fire())
    assert all(r.status_code == 200 for r in responses)
    assert len(rec.batches) < len(responses)
    for r, q in zip(responses, QUERIES * 2):
        ids = [item["document"]["id"] for item in r.json()["result"][0]]
        assert ids == overlap.search_batch([q], 2)[0].ids
    # the app still retrieves on another event loop (the first one is closed by now)
    r = http.post("/retrieve", json={"queries": [QUERIES[0]], "topk": 2})
    assert r.status_code == 200 and len(r.json()["result"][0]) == 2


# ----------------------------------------------------------------------------- replayed clients


def search_r1_reference_block(result_for_one_query: list[dict]) -> str:
    """What Search-R1's rollout loop makes of one query's result list: it reads
    ``document.contents``, takes the first line as the title and the rest as the text."""
    lines = []
    for i, item in enumerate(result_for_one_query):
        title, _, text = item["document"]["contents"].partition("\n")
        lines.append(f"Doc {i + 1}(Title: {title}) {text}")
    return "\n".join(lines)


def search_r1_post(http: TestClient, queries: list[str], topk=3) -> list[str]:
    """One rollout turn: the whole batch in one POST with return_scores on; the loop indexes
    ``["result"]`` straight away, so anything but a 200 with that key crashes it."""
    r = http.post("/retrieve", json={"queries": queries, "topk": topk, "return_scores": True})
    assert r.status_code == 200, r.text
    return [search_r1_reference_block(items) for items in r.json()["result"]]


def test_search_r1_turn_where_no_sample_searched_gets_an_empty_result(bm25):
    http = client_for(bm25)
    r = http.post("/retrieve", json={"queries": [], "topk": 3, "return_scores": True})
    assert r.status_code == 200 and r.json() == {"result": []}
    assert search_r1_post(http, []) == []
    r = http.post("/search", json={"questions": [], "N": 5})
    assert r.status_code == 200 and r.json() == []


def test_search_r1_grpo_batch_of_2560_queries_is_one_request(bm25, qa_data):
    from marag.types import iter_jsonl

    questions = [q["question"] for _, q in iter_jsonl(qa_data / "nq_open.questions.jsonl")]
    queries = (questions * 43)[:2560]  # train batch 512 x 5 samples
    http = client_for(bm25)  # the default limits
    blocks = search_r1_post(http, queries)
    assert len(blocks) == 2560
    want = bm25.search_batch(queries[:5], 3)
    for block, hits in zip(blocks, want):
        assert block == "\n".join(f"Doc {i + 1}(Title: \"{p.title}\") {p.text}"
                                  for i, p in enumerate(hits.passages))


def test_no_match_queries_get_fewer_than_k_and_the_header_counts_them(bm25):
    http = client_for(bm25)
    queries = ["zzzzqqq", QUERIES[0], "the of and", "nobel prize"]
    r = http.post("/retrieve", json={"queries": queries, "topk": 3, "return_scores": True})
    assert r.status_code == 200
    result = r.json()["result"]
    assert result[0] == [] and result[2] == []  # nothing matches: no filler passages
    assert len(result[1]) == 3 and all(item["score"] > 0 for item in result[1])
    n_nobel = len(result[3])
    assert 0 < n_nobel <= 3 and all(item["score"] > 0 for item in result[3])
    assert r.headers["X-Marag-Short-Lists"] == str(2 + (n_nobel < 3))
    assert search_r1_post(http, ["zzzzqqq"]) == [""]


@pytest.mark.parametrize("topk,want", [(0, 4), (None, 4), ("3", 3), (3.0, 3), ("2", 2), (2, 2)])
def test_topk_is_as_lenient_as_search_r1(overlap, topk, want):
    http = client_for(overlap, default_topk=4)
    body = {"queries": [QUERIES[0]], "topk": topk, "return_scores": True,
            "session_id": "abc", "extra": {"ignored": True}}  # unknown fields are ignored
    r = http.post("/retrieve", json=body)
    assert r.status_code == 200, r.text
    assert len(r.json()["result"][0]) == want


def test_return_scores_takes_pydantic_booleans(overlap):
    http = client_for(overlap)
    for flag, scored in (("true", True), (1, True), ("false", False), (0, False)):
        [items] = http.post("/retrieve", json={"queries": [QUERIES[0]], "topk": 1,
                                               "return_scores": flag}).json()["result"]
        assert ("score" in items[0]) is scored


def test_contents_and_ids_come_back_as_stored_in_the_corpus(tmp_path):
    from marag.retrieval import build_index, open_index

    records = [
        {"id": 7, "contents": "Moon landing\nApollo 11 landed on the moon in 1969."},
        {"id": "b", "contents": '"Quoted title"\nThe moon orbits the earth.'},
        {"id": 9, "title": "Moon", "text": "The moon is a natural satellite."},
        {"id": "d", "contents": "moon without a text line"},
    ]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    index = open_index(build_index(corpus, tmp_path / "idx", show_progress=False))
    try:
        r = client_for(index).post("/retrieve", json={"queries": ["moon"], "topk": 10})
        got = {json.dumps(d["id"]): d for d in r.json()["result"][0]}
    finally:
        index.close()
    assert set(got) == {"7", '"b"', "9", '"d"'}
    assert got["7"] == records[0]  # integer id, unquoted title: byte for byte
    assert got['"b"'] == records[1]
    assert got["9"] == {"id": 9, "contents": '"Moon"\nThe moon is a natural satellite.'}
    assert got['"d"'] == records[3]


def test_mmoa_rag_search_protocol(bm25):
    """MMOA-RAG's trainer posts its questions with ``N`` and reads, per question in order, the
    ``top_k_docs`` strings (title line, then text)."""
    http = client_for(bm25)
    questions = [QUERIES[0], "zzzzqqq", QUERIES[1]]
    r = http.post("/search", json={"questions": questions, "N": 5})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    body = r.json()
    docs = [entry["top_k_docs"] for entry in body]
    assert [entry["question"] for entry in body] == questions
    assert docs[1] == []  # no filler for a query that matches nothing
    for got, hits in zip(docs, bm25.search_batch(questions, 5)):
        assert got == [f"{p.title}\n{p.text}" for p in hits.passages]
        assert all(isinstance(d, str) and "\n" in d for d in got)
    # N is as lenient as topk; a missing or 0 N is the flask server's default of 10
    assert len(http.post("/search", json={"questions": questions[:1], "N": "2"}).json()[0][
        "top_k_docs"]) == 2
    assert len(http.post("/search", json={"questions": questions[:1], "N": 0}).json()[0][
        "top_k_docs"]) == 10
