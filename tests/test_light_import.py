import subprocess
import sys

HEAVY = ["torch", "transformers", "faiss", "sentence_transformers", "bm25s", "fastapi", "matplotlib"]


def test_import_marag_and_cli_stay_light():
    code = (
        "import sys, marag, marag.cli, marag.types, marag.config, marag.api, marag.workflows,"
        " marag.retrieval, marag.retrieval.client, marag.llm.factory, marag.eval, marag.report,"
        " marag.metrics, marag.datasets, marag.roles; marag.cli.build_parser();"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
