"""The table of one ``benchmarks/flashrag_side_by_side.sh OUT`` run: FlashRAG's standard RAG
and marag's ``vanilla`` per dataset (EM/F1/acc, AG format-valid, prompt tokens, wall).

    python benchmarks/side_by_side_table.py runs/sbs-dev [nq_open hotpotqa]

``--paired`` instead pairs the two systems question by question: every run of OUT (each
``flashrag-<name>/rag/predictions.jsonl`` with marag's ``marag-<name>`` traces, or the run
directory that ``--marag NAME=DIR`` names, e.g. an earlier ``marag eval`` on the same
questions) is pooled and split by each question's dataset, so one pooled-corpus run (name
``pooled``) gives a row per dataset. Per dataset and overall: n, EM/F1/acc of each, the paired
difference marag - FlashRAG in F1 and acc with its 95% percentile-bootstrap interval
(``benchmarks/paired_bootstrap.py``: 10,000 resamples over questions, seed 0), the paired-t
p-value (normal reference) and whether marag >= FlashRAG on F1 and acc (point estimates).
Both systems' predictions are rescored with ``marag.metrics`` as a check on the reported
scores (a mismatch is printed, not hidden).

    python benchmarks/side_by_side_table.py --paired runs/fr-own
    python benchmarks/side_by_side_table.py --paired runs/fr-pooled --marag pooled=runs/eval/X
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def rows(out: Path, dataset: str) -> list[str]:
    peer = json.loads((out / f"flashrag-{dataset}" / "rag" / "result.json").read_text())
    fm, ft = peer["flashrag_metrics"], peer["timing"]
    mine = json.loads((out / f"marag-{dataset}" / "metrics.json").read_text())
    wall = json.loads((out / f"marag-{dataset}.wall.json").read_text())["marag_wall_s"]
    ag = mine.get("roles", {}).get("AG", {})
    valid = f"{100 * ag['rate']:.0f}" if "rate" in ag else "-"
    return [
        (f"| {dataset} | FlashRAG 0.1.2 standard RAG | {peer['n']} | {100 * fm['em']:.1f} | "
        f"{100 * fm['f1']:.1f} | {100 * fm['acc']:.1f} | - | {fm['avg_input_tokens']:.0f} | "
        f"{ft['process_wall_s']:.1f} |"),
        (f"| {dataset} | marag `vanilla` | {mine['n']} | {100 * mine['em']:.1f} | "
        f"{100 * mine['f1']:.1f} | {100 * mine['acc']:.1f} | {valid} | "
        f"{mine['cost']['prompt_tokens']:.0f} | {wall:.1f} |"),
    ]


def main(argv: list[str]) -> str:
    if argv and argv[0] == "--paired":
        return paired(argv[1:])
    out = Path(argv[0])
    datasets = argv[1:] or ["nq_open", "hotpotqa"]
    lines = ["| dataset | system | n | EM | F1 | acc | AG valid % | prompt tok/q | wall s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for ds in datasets:
        if (out / f"marag-{ds}" / "metrics.json").exists():
            lines += rows(out, ds)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- --paired

def _bootstrap():
    spec = importlib.util.spec_from_file_location("paired_bootstrap",
                                                  _HERE / "paired_bootstrap.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _scores(pred: str | None, golds: list[str]) -> dict[str, float]:
    from marag.metrics import cover_em, exact_match, f1_score

    return {"em": exact_match(pred, golds), "f1": f1_score(pred, golds),
            "acc": cover_em(pred, golds)}


def load_pairs(out: Path, overrides: dict[str, Path]) -> tuple[list[dict], list[str]]:
    """One record per question of every run in OUT: dataset, FlashRAG's and marag's scores
    (as each reported them), plus the notes of any rescoring mismatch."""
    from marag.types import Trace, read_jsonl

    bs = _bootstrap()
    recs, notes = [], []
    names = sorted(p.name[len("flashrag-"):] for p in out.glob("flashrag-*")
                   if (p / "rag" / "predictions.jsonl").is_file())
    if not names:
        raise SystemExit(f"{out}: no flashrag-*/rag/predictions.jsonl")
    for name in names:
        peer = {}
        for line in (out / f"flashrag-{name}" / "rag" / "predictions.jsonl").open():
            if line.strip():
                r = json.loads(line)
                peer[r["id"]] = r
        run = overrides.get(name, out / f"marag-{name}")
        mine = {t.id: t for t in read_jsonl(bs.traces_file(run), Trace)}
        if set(peer) != set(mine):
            raise SystemExit(f"{name}: FlashRAG has {len(peer)} questions, {run} has "
                             f"{len(mine)}, {len(set(peer) & set(mine))} shared")
        for qid, p in peer.items():
            t = mine[qid]
            if sorted(p["golden_answers"]) != sorted(t.golden_answers):
                raise SystemExit(f"{name}/{qid}: the two runs have different golden answers")
            fr = {k: float(p[k]) for k in ("em", "f1", "acc")}
            ma = {k: float(t.metrics.get(k, 0.0)) for k in ("em", "f1", "acc")}
            for who, reported, pred in (("FlashRAG", fr, p["pred"]), ("marag", ma, t.answer)):
                again = _scores(pred, t.golden_answers)
                bad = [k for k in again if abs(again[k] - reported[k]) > 1e-9]
                if bad:
                    notes.append(f"{name}/{qid}: {who}'s reported {bad} differ from "
                                 f"marag.metrics on its prediction {pred!r}")
            recs.append({"run": name, "id": qid, "dataset": t.dataset, "flashrag": fr,
                         "marag": ma})
    return recs, notes


def _p_two_sided(diffs: list[float]) -> float:
    n = len(diffs)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    if sd == 0:
        return 1.0 if mean == 0 else 0.0
    return math.erfc(abs(mean / (sd / math.sqrt(n))) / math.sqrt(2))


def paired(argv: list[str]) -> str:
    overrides: dict[str, Path] = {}
    args = list(argv)
    while "--marag" in args:
        i = args.index("--marag")
        name, _, run = args[i + 1].partition("=")
        overrides[name] = Path(run)
        del args[i:i + 2]
    out = Path(args[0])
    recs, notes = load_pairs(out, overrides)
    bs = _bootstrap()
    order = ["nq_open", "hotpotqa", "2wikimultihopqa", "musique"]
    datasets = sorted({r["dataset"] for r in recs},
                      key=lambda d: (order.index(d) if d in order else len(order), d))
    lines = [("| dataset | n | FlashRAG EM | FlashRAG F1 | FlashRAG acc | marag EM | marag F1 | "
              "marag acc | ΔF1 [95% CI] | Δacc [95% CI] | p (ΔF1) | marag ≥ FlashRAG (F1 / acc) |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|"]
    for ds in datasets + ["overall"]:
        sub = [r for r in recs if ds == "overall" or r["dataset"] == ds]
        n = len(sub)
        mean = {(s, k): 100 * sum(r[s][k] for r in sub) / n
                for s in ("flashrag", "marag") for k in ("em", "f1", "acc")}
        cells, holds = [], []
        for k in ("f1", "acc"):
            diffs = [100 * (r["marag"][k] - r["flashrag"][k]) for r in sub]
            m, lo, hi = bs.paired_interval(diffs)
            cells.append(f"{m:+.1f} [{lo:+.1f}, {hi:+.1f}]")
            holds.append("yes" if mean["marag", k] >= mean["flashrag", k] else "**no**")
        p = _p_two_sided([100 * (r["marag"]["f1"] - r["flashrag"]["f1"]) for r in sub])
        name = "**overall**" if ds == "overall" else ds
        lines.append(f"| {name} | {n} | " + " | ".join(
            f"{mean[s, k]:.1f}" for s in ("flashrag", "marag") for k in ("em", "f1", "acc"))
            + f" | {cells[0]} | {cells[1]} | {p:.3f} | {holds[0]} / {holds[1]} |")
    text = "\n".join(lines) + "\n"
    if notes:
        text += "\nrescoring mismatches:\n" + "\n".join(notes) + "\n"
    return text


if __name__ == "__main__":
    sys.stdout.write(main(sys.argv[1:]))
