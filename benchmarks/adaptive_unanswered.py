"""The training questions Adaptive-RAG's multi-step strategy still has to label.

Adaptive-RAG's silver label (marag.train.adaptive_labels) is the simplest strategy that
answers a question: ``A`` (llm-only) before ``B`` (vanilla) before ``C`` (ircot), and a
question none answers takes its dataset's bias (``B`` single-hop, ``C`` multi-hop). So C can
change a label only on a single-hop question that neither A nor B answered: one A or B
answers is labelled without C, and a multi-hop one is ``C`` whether C answers it or not. The
costly ``ircot`` run is needed on those single-hop questions alone, and gives the same labels.

    python benchmarks/adaptive_unanswered.py runs/qwen-adaptive/train.jsonl \\
        --a runs/qwen-adaptive/strategy-llm-only/traces.jsonl \\
        --b runs/qwen-adaptive/strategy-vanilla/traces.jsonl \\
        [--done C_TRACES ...] [--min-f1 1.0] --out runs/qwen-adaptive/unanswered.jsonl

writes the records (as in the questions file) of the single-hop questions A and B left
unanswered, less those a ``--done`` traces file already holds; prints how many.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence

from marag.train.adaptive_labels import silver_labels
from marag.types import Trace, read_jsonl


def unanswered(records: Sequence[dict], a: Iterable[Trace], b: Iterable[Trace],
               done: Iterable[str] = (), min_f1: float = 1.0) -> list[dict]:
    """``records`` whose silver label from A and B alone is the single-hop bias ``B``
    (neither answered them, and only C answering can make them ``C``), in their order, less
    the ids in ``done``. A question missing from A or B is an error: its label cannot be
    known."""
    a, b = list(a), list(b)
    for name, traces in (("A", a), ("B", b)):
        missing = {str(r["id"]) for r in records} - {t.id for t in traces}
        if missing:
            raise ValueError(f"{len(missing)} questions have no {name} trace, e.g. "
                             f"{min(missing)!r}")
    labels = silver_labels({"A": a, "B": b}, min_f1)
    skip = set(done)
    return [r for r in records
            if labels[str(r["id"])] == ("B", "dataset bias") and str(r["id"]) not in skip]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("questions", help="the training questions (JSONL, FlashRAG's format)")
    ap.add_argument("--a", required=True, help="llm-only traces")
    ap.add_argument("--b", required=True, help="vanilla traces")
    ap.add_argument("--done", nargs="*", default=[],
                    help="traces files whose questions need no new C run")
    ap.add_argument("--min-f1", type=float, default=1.0, help="as marag sft's sft.min_f1")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    with open(args.questions, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    done = {t.id for path in args.done for t in read_jsonl(path, Trace)}
    needed = unanswered(records, read_jsonl(args.a, Trace), read_jsonl(args.b, Trace),
                        min_f1=args.min_f1)
    rows = [r for r in needed if str(r["id"]) not in done]
    with open(args.out, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    print(f"{len(rows)} of {len(records)} questions left for C "
          f"({len(needed) - len(rows)} already done) -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
