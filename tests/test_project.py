"""The project's own promises: CI runs the README's command, torch is pinned, lint is clean."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

from snippetcheck import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_gives_exactly_two_commands():
    commands = readme_commands()
    assert len(commands) == 2, commands
    assert commands[0].endswith("mkdocs serve")
    assert "-c constraints.txt" in commands[0] and "-c constraints.txt" in commands[1]


def test_ci_runs_the_readme_test_command():
    test_command = readme_commands()[1]
    assert "pytest" in test_command
    ci_lines = [line.strip() for line in CI.splitlines()]
    assert test_command in ci_lines, f"{test_command!r} is not a line of .ci/run"


def test_torch_is_pinned_exactly():
    pins = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    assert "torch==2.13.0" in pins
    assert any(p.startswith("mkdocs==1.") for p in pins)
    assert any(p.startswith("mkdocs-material==9.") for p in pins)
    names = {p.split("==")[0] for p in pins if "==" in p}
    unpinned = [p for p in pins if p and not p.startswith("#") and "==" not in p]
    assert not unpinned, unpinned
    assert {"numpy", "jieba", "mkdocs-static-i18n", "pytest"} <= names


def test_ruff_lint_is_clean():
    ruff = shutil.which("ruff") or [sys.executable, "-m", "ruff"]
    cmd = [ruff] if isinstance(ruff, str) else ruff
    proc = subprocess.run([*cmd, "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ci_installs_chromium_before_running_the_tests():
    """On a fresh CI machine the browser tests run; they never skip there."""
    lines = [line.strip() for line in CI.splitlines()]
    test_line = lines.index(readme_commands()[1])
    installs = [i for i, line in enumerate(lines) if "apt-get install" in line]
    assert installs and "chromium" in lines[installs[0]], "CI does not install chromium"
    assert installs[0] < test_line
    assert 'export CI="${CI:-true}"' in lines[:test_line]


WORKFLOW = ROOT / ".github" / "workflows" / "site.yml"
ALLOWED = {("contents", "read"), ("pages", "read"), ("pages", "write"), ("id-token", "write")}


def test_pages_workflow_tests_then_publishes_with_least_privilege():
    import yaml

    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert workflow["permissions"] == {"contents": "read"}
    jobs = workflow["jobs"]
    for name, job in jobs.items():
        granted = set(job.get("permissions", {}).items())
        assert granted <= ALLOWED, (name, granted - ALLOWED)
    steps = [step for job in jobs.values() for step in job.get("steps", [])]
    runs = [step.get("run", "") for step in steps]
    assert "./.ci/run" in runs, "the workflow does not run the tests"
    deploy = next(job for job in jobs.values() if any(
        str(step.get("uses", "")).startswith("actions/deploy-pages") for step in job["steps"]))
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    needed = [jobs[name] for name in deploy["needs"]]  # the test and second-torch jobs
    # The jobs that install and run third-party code cannot publish.
    for job in needed:
        assert ("pages", "write") not in job["permissions"].items()
        assert "id-token" not in job["permissions"]
    builder = next(job for job in needed if "./.ci/run" in [s.get("run") for s in job["steps"]])
    site_urls = [s["env"]["SITE_URL"] for s in builder["steps"] if "SITE_URL" in s.get("env", {})]
    assert site_urls and all("steps.pages.outputs.base_url" in u for u in site_urls)
    assert any(s.get("id") == "pages" and s["uses"].startswith("actions/configure-pages")
               for s in builder["steps"])
    assert "!ENV [SITE_URL" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_changed_reruns_the_users_of_a_changed_helper(tmp_path):
    """``--changed`` reruns a snippet when a module beside it that it imports changed (the
    distributed snippets import ``launch.py``), through imports of imports, cycles included."""
    import snippetcheck

    import conftest

    users = [s for s in snippetcheck.discover() if "from launch import" in s.read_text("utf-8")]
    assert users
    for snippet in users:
        assert conftest.local_imports(snippet.resolve()) == {snippet.with_name("launch.py")}
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("import a\nfrom c import x\nimport os\n")
    (tmp_path / "c.py").write_text("x = 1\n")
    assert conftest.local_imports(tmp_path / "a.py") == {tmp_path / "b.py", tmp_path / "c.py"}
