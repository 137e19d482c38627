"""snippets/verified_with.json's rules (tests/verified.py), on copies of the manifest."""

from __future__ import annotations

import json

import pytest
import verified
from packaging.version import Version


def manifest(tmp_path, entries):
    path = tmp_path / "verified_with.json"
    path.write_text(json.dumps({"verified": entries}))
    return path


OLD = {"torch": "2.14.1+cu130", "date": "2026-01-01", "python": "3.11.7"}


@pytest.fixture(autouse=True)
def _no_torch_import(monkeypatch):
    """running_device() imports torch in a new interpreter (2 s); a recording run calls it once."""
    monkeypatch.setattr(verified, "running_device", lambda: "cpu")


def test_the_committed_manifest_names_dated_versions_in_order():
    entries = verified.entries()
    assert entries and all(e["torch"] and e["date"] for e in entries)
    assert entries == sorted(entries, key=lambda e: Version(e["torch"]))


def test_a_run_adds_its_torch_and_keeps_the_others(tmp_path):
    path = manifest(tmp_path, [OLD])
    verified.record("2.13.0+cpu", keep_others=True, path=path, today="2026-12-04")
    assert verified.versions(path) == ["2.13.0+cpu", "2.14.1+cu130"]  # ordered by version
    assert verified.entries(path)[0]["date"] == "2026-12-04"


def test_a_run_records_where_it_ran(tmp_path, monkeypatch):
    monkeypatch.setattr(verified, "running_device", lambda: "cuda")
    path = manifest(tmp_path, [OLD])
    verified.record("2.13.0+cpu", keep_others=True, path=path, today="2026-12-04")
    assert verified.entries(path)[0]["device"] == "cuda"
    verified.record("2.13.0+cpu", keep_others=True, path=path, device="cpu")
    assert verified.entries(path)[0]["device"] == "cpu"


def test_a_rerun_renews_the_date_of_its_own_entry(tmp_path):
    path = manifest(tmp_path, [OLD])
    verified.record("2.14.1+cu130", keep_others=True, path=path, today="2026-12-04")
    assert [(e["torch"], e["date"]) for e in verified.entries(path)] == [
        ("2.14.1+cu130", "2026-12-04")
    ]


def test_changed_outputs_keep_only_the_torch_that_produced_them(tmp_path):
    path = manifest(tmp_path, [OLD])
    verified.record("2.13.0+cpu", keep_others=False, path=path, today="2026-12-04")
    assert verified.versions(path) == ["2.13.0+cpu"]


def test_the_older_manifest_form_names_no_verified_torch(tmp_path):
    path = tmp_path / "verified_with.json"
    path.write_text(json.dumps({"torch": "2.13.0+cpu"}))
    assert verified.versions(path) == []


def test_the_failure_is_one_line_that_says_how_to_verify(tmp_path):
    message = verified.not_verified_message("2.15.0", manifest(tmp_path, [OLD]))
    assert "\n" not in message
    assert "2.15.0" in message and "2.14.1+cu130" in message and "--record-verified" in message


def test_the_outputs_digest_sees_a_changed_output(tmp_path):
    (tmp_path / "page").mkdir()
    out = tmp_path / "page" / "idea.out"
    out.write_text("1.0\n")
    before = verified.outputs_digest(tmp_path)
    assert verified.outputs_digest(tmp_path) == before
    out.write_text("2.0\n")
    assert verified.outputs_digest(tmp_path) != before
