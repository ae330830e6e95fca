"""``device: cuda`` under a multi-process launcher means this process's GPU."""

from marag.llm.factory import process_device


def test_cuda_follows_local_rank(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert process_device("cuda") == "cuda"
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert process_device("cuda") == "cuda:3"
    assert process_device("cuda:1") == "cuda:1" and process_device("cpu") == "cpu"
