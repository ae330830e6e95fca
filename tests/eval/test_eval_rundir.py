"""Run-directory bookkeeping: torn lines from crashes, identity checks, retrying failures."""

from __future__ import annotations

import json

import pytest

from marag.eval import RunDirError, open_run_dir, recover_traces
from marag.types import Trace, write_jsonl


def _traces(n, status="ok"):
    return [Trace(id=f"q{i}", question=f"question {i}", method="m", answer="a", status=status)
            for i in range(n)]


def test_torn_last_line_is_cut_and_rest_kept(tmp_path):
    path = tmp_path / "traces.jsonl"
    write_jsonl(path, _traces(3))
    whole = path.read_bytes()
    with open(path, "ab") as f:
        f.write(b'{"id": "q3", "question": "quest')  # a crash mid-write
    traces = recover_traces(path)
    assert [t.id for t in traces] == ["q0", "q1", "q2"]
    assert path.read_bytes() == whole  # the torn bytes are gone, so appends start clean


def test_read_only_recovery_leaves_the_file(tmp_path):
    path = tmp_path / "traces.jsonl"
    write_jsonl(path, _traces(2))
    with open(path, "ab") as f:
        f.write(b'{"id": "q2"')
    size = path.stat().st_size
    assert len(recover_traces(path, repair=False)) == 2
    assert path.stat().st_size == size


def test_garbled_complete_last_line_is_dropped(tmp_path):
    path = tmp_path / "traces.jsonl"
    write_jsonl(path, _traces(2))
    with open(path, "ab") as f:
        f.write(b'{"id": "q2", "quest\n')
    assert [t.id for t in recover_traces(path)] == ["q0", "q1"]
    assert path.read_bytes().count(b"\n") == 2


def test_damage_before_the_last_line_names_the_line(tmp_path):
    path = tmp_path / "traces.jsonl"
    lines = [json.dumps(t.to_dict()) for t in _traces(3)]
    lines[1] = lines[1][:20]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunDirError, match=r"traces.jsonl:2: not a valid trace"):
        recover_traces(path)


def test_resume_needs_the_same_identity(tmp_path):
    run = open_run_dir(tmp_path, {"method": "jade", "seed": 0}, {"command": ["a"]})
    run.append(_traces(1)[0])
    again = open_run_dir(tmp_path, {"method": "jade", "seed": 0}, {"command": ["b"]})
    assert list(again.done) == ["q0"]
    assert [r["command"] for r in again.manifest["resumes"]] == [["b"]]
    with pytest.raises(RunDirError, match=r"method: 'jade' -> 'vanilla'.*--force"):
        open_run_dir(tmp_path, {"method": "vanilla", "seed": 0})
    forced = open_run_dir(tmp_path, {"method": "vanilla", "seed": 0}, force=True)
    assert forced.done == {}
    moved = list(tmp_path.glob("traces.replaced-*.jsonl"))
    assert len(moved) == 1 and "q0" in moved[0].read_text()  # moved aside, not deleted
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["identity"] == {"method": "vanilla", "seed": 0}


def test_traces_without_manifest_are_not_adopted(tmp_path):
    write_jsonl(tmp_path / "traces.jsonl", _traces(1))
    with pytest.raises(RunDirError, match="no run.json"):
        open_run_dir(tmp_path, {"method": "jade"})


def test_retry_failed_drops_failed_traces(tmp_path):
    run = open_run_dir(tmp_path, {"method": "m"})
    for t in _traces(2) + [Trace(id="q9", question="x", method="m", status="failed")]:
        run.append(t)
    assert set(open_run_dir(tmp_path, {"method": "m"}).done) == {"q0", "q1", "q9"}
    again = open_run_dir(tmp_path, {"method": "m"}, retry_failed=True)
    assert set(again.done) == {"q0", "q1"}
    assert "q9" not in (tmp_path / "traces.jsonl").read_text()
