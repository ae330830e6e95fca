"""RetrieverClient against a real uvicorn server on 127.0.0.1, and against dead endpoints."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
import uvicorn
from overlap import WordOverlapRetriever, load_passages

from marag.retrieval.base import RetrievalError, Retriever
from marag.retrieval.client import RetrieverClient, parse_response, split_contents
from marag.retrieval.server import create_app
from marag.types import Hits, Passage

QUERIES = [
    "who got the first nobel prize in physics",
    "when was the last time anyone was on the moon",
    "who wrote the declaration of independence",
    "",
    "where is the bermuda triangle located",
    "what is the population of new york city",
]


@pytest.fixture(scope="module")
def passages(qa_data) -> list[Passage]:
    return load_passages(qa_data)


class Served:
    """A uvicorn server in a thread on a socket we bound first (no free-port race)."""

    def __init__(self, retriever: Retriever) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(create_app(retriever), log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self.url

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture(scope="module")
def overlap_server(passages):
    retriever = WordOverlapRetriever(passages)
    with Served(retriever) as url:
        yield retriever, url


@pytest.fixture(scope="module")
def bm25_server(qa_data, tmp_path_factory):
    from marag.retrieval import build_index, open_index

    out = tmp_path_factory.mktemp("bm25") / "nq"
    build_index(qa_data / "nq_open.corpus.jsonl", out, kind="bm25", show_progress=False)
    index = open_index(out)
    with Served(index) as url:
        yield index, url
    index.close()


@pytest.fixture(params=["overlap_server", "bm25_server"])
def served(request):
    return request.getfixturevalue(request.param)


def same(a: list[Hits], b: list[Hits]) -> None:
    assert [h.query for h in a] == [h.query for h in b]
    assert [h.ids for h in a] == [h.ids for h in b]
    assert [h.scores for h in a] == [h.scores for h in b]  # JSON round-trips floats exactly
    assert [[(p.title, p.text) for p in h.passages] for h in a] == [
        [(p.title, p.text) for p in h.passages] for h in b
    ]


def test_sync_client_returns_what_the_local_index_returns(served):
    retriever, url = served
    local = retriever.search_batch([q for q in QUERIES if q], 5)
    client = RetrieverClient(url, batch_size=2)  # 5 queries -> 3 requests
    try:
        remote = client.search_batch([q for q in QUERIES if q], 5)
    finally:
        client.close()
    same(remote, local)


async def test_async_client_returns_what_the_local_index_returns(served):
    retriever, url = served
    local = retriever.search_batch([q for q in QUERIES if q], 4)
    client = RetrieverClient(url + "/retrieve", batch_size=2)
    try:
        remote = await client.search([q for q in QUERIES if q], 4)
        again = await client.search(QUERIES[:1], 4)
    finally:
        await client.aclose()
    same(remote, local)
    same(again, local[:1])


def test_async_client_survives_separate_event_loops(overlap_server):
    _, url = overlap_server
    client = RetrieverClient(url)
    first = asyncio.run(client.search(QUERIES[:2], 3))
    second = asyncio.run(client.search(QUERIES[:2], 3))  # a new loop: the client must reconnect
    same(first, second)
    asyncio.run(client.aclose())


def test_blank_query_comes_back_empty(overlap_server):
    _, url = overlap_server
    with_blank = RetrieverClient(url).search_batch(QUERIES[2:5], 3)
    assert [len(h.passages) for h in with_blank] == [3, 0, 3]


def test_server_errors_are_retried_then_succeed(passages):
    flaky = WordOverlapRetriever(passages, fail_first=2)
    with Served(flaky) as url:
        client = RetrieverClient(url, retries=3, backoff=0.01)
        hits = client.search_batch(QUERIES[:1], 2)
        client.close()
    assert len(flaky.calls) == 3 and len(hits[0].passages) == 2


def test_server_errors_exhaust_retries_with_the_reason(passages):
    with Served(WordOverlapRetriever(passages, fail_first=100)) as url:
        client = RetrieverClient(url, retries=1, backoff=0.01)
        with pytest.raises(RetrievalError, match=r"failed after 2 attempt\(s\): HTTP 500: .*warming up"):
            client.search_batch(QUERIES[:1], 2)


def test_client_errors_fail_at_once_with_the_servers_reason(overlap_server):
    retriever, url = overlap_server
    before = len(retriever.calls)
    client = RetrieverClient(url, retries=5, backoff=5.0)  # a retry would take seconds
    start = time.monotonic()
    with pytest.raises(RetrievalError, match=r"rejected the request \(422\): topk: Input should be less than or equal to 1000"):
        client.search_batch(QUERIES[:1], 5000)
    assert time.monotonic() - start < 4.0
    assert len(retriever.calls) == before


def test_dead_endpoint_is_a_clear_error_after_retries():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens here now
    client = RetrieverClient(f"http://127.0.0.1:{port}", timeout=0.5, retries=2, backoff=0.01)
    with pytest.raises(RetrievalError, match=rf"127\.0\.0\.1:{port}/retrieve failed after 3 attempt\(s\): ConnectError"):
        client.search_batch(["q"], 3)
    with pytest.raises(RetrievalError, match="failed after 3 attempt"):
        asyncio.run(client.search(["q"], 3))


def test_silent_endpoint_times_out_instead_of_hanging():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # the kernel accepts connections; nobody ever answers
    try:
        client = RetrieverClient(f"http://127.0.0.1:{listener.getsockname()[1]}",
                                 timeout=0.3, retries=1, backoff=0.01)
        start = time.monotonic()
        with pytest.raises(RetrievalError, match="ReadTimeout"):
            client.search_batch(["q"], 3)
        assert time.monotonic() - start < 10
        client.close()
    finally:
        listener.close()


def test_split_contents_forms():
    assert split_contents('"Paris"\nCapital of France.\nSecond line') == ("Paris", "Capital of France.\nSecond line")
    assert split_contents('Paris\nCapital') == ("Paris", "Capital")
    assert split_contents('"Quoted "inner" title"\nx') == ('Quoted "inner" title', "x")
    assert split_contents("no title at all") == ("", "no title at all")
    assert split_contents('"Only"') == ("Only", "")


def test_malformed_responses_name_the_problem():
    url = "http://x/retrieve"
    with pytest.raises(RetrievalError, match="no 'result' list"):
        parse_response({"results": []}, ["q"], url)
    with pytest.raises(RetrievalError, match="sent 1 queries, got 2"):
        parse_response({"result": [[], []]}, ["q"], url)
    with pytest.raises(RetrievalError, match=r"result\[0\]\[0\]: expected .*return_scores"):
        parse_response({"result": [[{"id": "1", "contents": "x"}]]}, ["q"], url)
    with pytest.raises(RetrievalError, match="no usable 'id'"):
        parse_response({"result": [[{"document": {"contents": "x"}, "score": 1}]]}, ["q"], url)
    with pytest.raises(RetrievalError, match="score must be a number"):
        parse_response({"result": [[{"document": {"id": "1", "contents": "x"}, "score": "high"}]]}, ["q"], url)
    # Search-R1's BM25 server sends title/text beside contents, and ids may be numbers
    hits = parse_response(
        {"result": [[{"document": {"id": 7, "contents": '"T"\nbody', "title": "T", "text": "body"},
                      "score": "2.5"}]]}, ["q"], url)
    assert hits[0].passages == [Passage("7", "T", "body")] and hits[0].scores == [2.5]


async def test_concurrent_async_searches_share_requests(passages):
    retriever = WordOverlapRetriever(passages)
    with Served(retriever) as url:
        client = RetrieverClient(url, max_inflight=1)
        asks = [QUERIES[i % len(QUERIES)] for i in range(12)]
        results = await asyncio.gather(*(client.search([q], 3) for q in asks))
        merged_calls = len(retriever.calls)
        plain = RetrieverClient(url, coalesce=False)
        expected = [await plain.search([q], 3) for q in asks]
        await client.aclose()
        await plain.aclose()
    assert merged_calls < len(asks)
    for got, want in zip(results, expected):
        same(got, want)
