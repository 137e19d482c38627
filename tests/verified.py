"""``snippets/verified_with.json``: every torch that ran all the snippets and got their outputs.

The manifest is written only by a test run, never by hand: a run of the snippet tests with
``--record-verified`` (or ``--update-snippets``) in which every snippet passed adds the running
torch, with the date, and the site's stamp (``hooks/site_hooks.py``) names every version in it.
A run with ``--update-snippets`` that changed a stored output keeps only the running torch:
the others never produced the new outputs. Without either option, the suite fails when the
running torch is not in the manifest (``test_snippets.py``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import platform
import subprocess
import sys
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "snippets" / "verified_with.json"
HOW_TO_VERIFY = (
    "verify it with `python -m pytest tests/test_snippets.py --record-verified` "
    "(another torch: `.ci/other-torch --record VERSION`) and commit snippets/verified_with.json"
)


def entries(path: Path = MANIFEST) -> list[dict]:
    # A manifest of the older form ({"torch": "..."}, no date) names no verifying run.
    return json.loads(path.read_text(encoding="utf-8")).get("verified", [])


def versions(path: Path = MANIFEST) -> list[str]:
    return [entry["torch"] for entry in entries(path)]


def not_verified_message(version: str, path: Path = MANIFEST) -> str:
    """One line: which torch is missing, which ones are recorded, how to verify a new one."""
    return (
        f"torch {version} did not verify these snippets (snippets/verified_with.json: "
        f"{', '.join(versions(path))}); {HOW_TO_VERIFY}"
    )


def record(
    version: str,
    *,
    keep_others: bool,
    path: Path = MANIFEST,
    today: str | None = None,
    device: str | None = None,
) -> list[dict]:
    """Add ``version`` (or renew its date); drop the other versions unless ``keep_others``.

    ``device`` is where the snippets ran: "cpu", or "cuda" when the running torch saw a GPU
    (some snippets then use it); by default, the running torch's (``running_device``).
    """
    today = today or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    kept = [e for e in entries(path) if e["torch"] != version] if keep_others else []
    new = {
        "torch": version,
        "date": today,
        "python": platform.python_version(),
        "device": device or running_device(),
    }
    result = sorted([*kept, new], key=lambda e: Version(e["torch"]))
    path.write_text(json.dumps({"verified": result}, indent=2) + "\n", encoding="utf-8")
    return result


def outputs_digest(snippets_dir: Path = MANIFEST.parent) -> str:
    """One hash of every stored output, to tell whether ``--update-snippets`` changed one."""
    digest = hashlib.sha256()
    for out in sorted(snippets_dir.rglob("*.out")):
        digest.update(str(out.relative_to(snippets_dir)).encode() + b"\0" + out.read_bytes())
    return digest.hexdigest()


def running_torch() -> str:
    """The version of the torch this interpreter imports (the one the snippets run with)."""
    return subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()


def running_device() -> str:
    """Where the snippets ran: "cuda" if the running torch sees a GPU, else "cpu"."""
    return subprocess.run(
        [sys.executable, "-c",
         "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
