"""serve-llm's own limits are 4xx in OpenAI's error shape, never a failed decode: a body over
``max_body_bytes`` is a 413 before it is read, a seed torch cannot take is a 400 naming it."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from marag.llm.hf_local import HFBackend
from marag.llm.server import create_app


@pytest.fixture(scope="module")
def client(tiny):
    model, tok = tiny
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0)
    with TestClient(create_app(backend, ["tiny"], max_body_bytes=4096)) as c:
        yield c


def chat(**kw):
    return {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
            **kw}


def test_a_body_over_the_limit_is_413_in_openai_shape(client):
    r = client.post("/v1/chat/completions", json=chat(stop=["x" * 5000]))
    assert r.status_code == 413
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and "4096" in err["message"]
    # chunked (no Content-Length): refused once the read passes the limit
    r = client.post("/v1/chat/completions", content=iter([b"{" + b" " * 3000, b" " * 3000]),
                    headers={"content-type": "application/json"})
    assert r.status_code == 413 and "error" in r.json()
    assert client.post("/v1/chat/completions", json=chat()).status_code == 200


@pytest.mark.parametrize("seed", [2**64, -(2**63) - 1, 10**30])
def test_a_seed_torch_cannot_take_is_a_400_naming_it(client, seed):
    r = client.post("/v1/chat/completions", json=chat(seed=seed, temperature=1.0))
    assert r.status_code == 400 and r.json()["error"]["param"] == "seed"


@pytest.mark.parametrize("seed", [0, -5, 2**63, 2**64 - 1])
def test_every_seed_in_range_decodes(client, seed):
    r = client.post("/v1/chat/completions", json=chat(seed=seed, temperature=1.0))
    assert r.status_code == 200, r.text
