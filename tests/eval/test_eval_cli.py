"""marag eval: every option documented; flags map to config keys; directory checks."""

from __future__ import annotations

import argparse

from marag.cli import build_parser
from marag.commands.eval import default_out, flag_overrides
from marag.config import load_config


def _eval_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["eval"]


def test_help_documents_every_option():
    p = _eval_parser()
    text = p.format_help()
    options = [a for a in p._actions if a.option_strings and a.dest != "help"]
    wanted = {"--method", "--dataset", "--index", "--limit", "--seed", "--concurrency",
              "--config", "--set", "--llm", "--model", "--out", "--force"}
    assert wanted <= {s for a in options for s in a.option_strings}
    for action in options:
        assert action.help and len(action.help) > 10, action.option_strings
        assert action.option_strings[0] in text


def test_flags_become_config_overrides():
    p = _eval_parser()
    args = p.parse_args(["--dataset", "nq_open", "--method", "vanilla", "--index", "idx",
                         "--limit", "5", "--seed", "3", "--concurrency", "2",
                         "--llm", "http://127.0.0.1:9/v1", "--model", "tiny",
                         "--set", "method.top_k=2"])
    cfg = load_config(None, flag_overrides(args))
    assert cfg.method.name == "vanilla" and cfg.method.top_k == 2
    assert cfg.retrieval.index == "idx"
    assert (cfg.eval.limit, cfg.eval.seed, cfg.eval.concurrency) == (5, 3, 2)
    llm = cfg.llms["default"]
    assert (llm.backend, llm.base_url, llm.model) == ("openai", "http://127.0.0.1:9/v1", "tiny")
    assert str(default_out("jade", "/data/hotpotqa.questions.jsonl")) == "runs/jade-hotpotqa"


def test_a_different_run_in_out_is_refused_before_models_load(tmp_path, qa_data, capsys):
    from marag.cli import main
    from marag.eval import open_run_dir

    out = tmp_path / "run"
    open_run_dir(out, {"method": "jade", "dataset": "elsewhere"})
    rc = main(["eval", "--dataset", str(qa_data / "nq_open.questions.jsonl"), "--limit", "3",
               "--method", "vanilla", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "holds a different run" in err and "method: 'jade' -> 'vanilla'" in err


def test_missing_dataset_file_is_a_clear_error(tmp_path, capsys):
    from marag.cli import main

    rc = main(["eval", "--dataset", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "r")])
    assert rc == 2 and "nope.jsonl" in capsys.readouterr().err


def test_the_manifest_and_report_record_what_each_backend_loaded(tmp_path):
    import json

    import torch

    from marag.commands.eval import record_llms
    from marag.eval.run_markdown import run_markdown
    from marag.eval.rundir import open_run_dir
    from marag.eval.summary import summarize
    from marag.llm.hf_local import HFBackend
    from marag.llm.openai_http import OpenAIBackend
    from marag.llm.tiny import build_tiny_model

    model, tok = build_tiny_model()
    local = HFBackend("tiny", model=model.to(torch.bfloat16), tokenizer=tok)
    api = OpenAIBackend("http://127.0.0.1:9/v1", "gpt-4o-mini")
    run = open_run_dir(tmp_path / "run", {"method": "vanilla"})
    record_llms(run, {"default": local, "judge": api})
    saved = json.loads((tmp_path / "run" / "run.json").read_text())
    assert saved["llms"]["default"]["dtype"] == "bfloat16"
    assert saved["llms"]["default"]["device"] == "cpu"
    assert saved["llms"]["judge"] == {"backend": "openai", "model": "gpt-4o-mini"}
    text = run_markdown(saved, summarize([]))
    assert "- models: default: hf tiny (cpu, bfloat16); judge: openai gpt-4o-mini" in text
