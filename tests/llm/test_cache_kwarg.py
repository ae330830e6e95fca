"""The KV cache's keyword is read from the model's own forward: ``cache`` where transformers
names it so, ``past_key_values`` before, through a PEFT-style wrapper; the decoder passes it
without transformers' deprecation warning."""

from __future__ import annotations

import warnings

from marag.llm.base import SamplingParams
from marag.llm.cache_kwarg import cache_kwarg
from marag.llm.hf_decode import BatchDecoder, Row


class New:
    def forward(self, input_ids=None, cache=None, use_cache=None, **kwargs):
        return None


class Old:
    def forward(self, input_ids=None, past_key_values=None, use_cache=None, **kwargs):
        return None


class Wrapper:  # as peft's PeftModel: forward(*args, **kwargs) over the model it wraps
    def __init__(self, base):
        self.base = base

    def get_base_model(self):
        return self.base

    def forward(self, *args, **kwargs):
        return None


def test_the_keyword_follows_the_models_signature():
    assert cache_kwarg(New()) == "cache"
    assert cache_kwarg(Old()) == "past_key_values"
    assert cache_kwarg(Wrapper(New())) == "cache"
    assert cache_kwarg(Wrapper(Old())) == "past_key_values"


def test_the_decoder_passes_the_cache_without_the_deprecation_warning(tiny):
    model, tok = tiny
    decoder = BatchDecoder(model, tok)
    rows = [Row(tok.encode("a question"), SamplingParams(max_tokens=4), tag=0)]
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decoder.run(lambda n: [rows.pop()] if rows else [],
                    lambda r, res: out.__setitem__(r.tag, res.token_ids), max_rows=2)
    assert out[0] and decoder.stats.steps >= 1  # a step read the cache it was given
    assert not [w for w in caught if "past_key_values" in str(w.message)]
