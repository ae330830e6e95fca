"""serve-llm's own limits are 4xx in OpenAI's error shape, never a failed decode: a body over
``max_body_bytes`` is a 413 before it is read; every integer field takes exactly what its
published schema allows (a seed any integer, taken modulo 2**64 as torch takes it)."""

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


@pytest.mark.parametrize("seed", [0, -5, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**30, -(10**30)])
def test_every_integer_seed_decodes(client, seed):
    r = client.post("/v1/chat/completions", json=chat(seed=seed, temperature=1.0))
    assert r.status_code == 200, r.text


def test_a_seed_draws_as_the_same_seed_modulo_2_64(client):
    """torch takes a seed modulo 2**64 (a negative one too); so does the server, beyond."""
    def sample(seed):
        r = client.post("/v1/completions", json={"model": "tiny", "prompt": "The capital",
                                                 "max_tokens": 8, "temperature": 1.0,
                                                 "seed": seed, "return_token_ids": True})
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["token_ids"]

    same = [sample(s) for s in (-5, 2**64 - 5, 3 * 2**64 - 5, -(2**64) - 5)]
    assert all(ids == same[0] for ids in same)
    assert any(sample(s) != same[0] for s in (1, 2, 3))  # the seed does matter


# ------------------------------------------------------------ integer bounds as published

ROUTES = {"/v1/chat/completions": chat(),
          "/v1/completions": {"model": "tiny", "prompt": "hi", "max_tokens": 2}}
# FastAPI publishes minimum/maximum as floats, and validators may compare as doubles:
# beyond 2**53 neighbouring integers read the same
DOUBLE_EXACT = 2**53


def integer_fields(doc, route):
    """{field: (minimum, maximum, enum)} for every integer property of the route's body."""
    ref = doc["paths"][route]["post"]["requestBody"]["content"]["application/json"]["schema"]
    name = ref["$ref"].rsplit("/", 1)[-1]
    props = doc["components"]["schemas"][name]["properties"]
    out = {}
    for field, prop in props.items():
        branches = prop.get("anyOf", [prop])
        ints = [b for b in branches if b.get("type") == "integer"]
        if not ints:
            continue
        (b,) = ints
        lo = b.get("minimum", prop.get("minimum"))  # FastAPI writes bounds as floats
        hi = b.get("maximum", prop.get("maximum"))
        lo, hi = (None if v is None else int(v) for v in (lo, hi))
        enum = [v for v in prop.get("enum", b.get("enum", [])) if isinstance(v, int)]
        out[field] = (lo, hi, enum)
    return out


def _body(route, field, value):
    body = {**ROUTES[route], field: value}
    if field == "top_logprobs":
        body["logprobs"] = True  # top_logprobs needs it (as the schema's if/then says)
    return body


def test_published_integer_bounds_are_exact_in_doubles_too(client):
    doc = client.get("/openapi.json").json()
    for route in ROUTES:
        fields = integer_fields(doc, route)
        assert {"seed", "max_tokens", "n"} <= set(fields), fields
        for field, (lo, hi, enum) in fields.items():
            for bound in (lo, hi, *enum):  # a double holds it exactly
                assert bound is None or abs(bound) <= DOUBLE_EXACT, (route, field, bound)
        assert fields["seed"] == (None, None, [])


@pytest.mark.parametrize("route", list(ROUTES))
def test_every_integer_field_takes_exactly_its_published_range(client, route):
    """At each published bound (and each enum value) a request is served; one past it is a
    400 naming the field. A field without an upper bound takes a huge value, or refuses it
    only with the documented domain error (max_tokens past the model's context)."""
    doc = client.get("/openapi.json").json()
    for field, (lo, hi, enum) in integer_fields(doc, route).items():
        inside = [v for v in (lo, hi, *enum) if v is not None]
        outside = ([lo - 1] if lo is not None else []) + ([hi + 1] if hi is not None else [])
        if enum:
            outside += [min(enum) - 1, max(enum) + 1]
        for value in inside:
            r = client.post(route, json=_body(route, field, value))
            assert r.status_code == 200, (field, value, r.text)
        for value in outside:
            r = client.post(route, json=_body(route, field, value))
            assert r.status_code == 400 and r.json()["error"]["param"] == field, (field, value)
        for value in ([10**30] if hi is None and not enum else []) + (
                [-(10**30)] if lo is None and not enum else []):
            r = client.post(route, json=_body(route, field, value))
            code = r.json().get("error", {}).get("code") if r.status_code != 200 else None
            assert r.status_code == 200 or code == "context_length_exceeded", (field, value,
                                                                                r.text)
