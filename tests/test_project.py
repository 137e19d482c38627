"""The project's own promises: CI runs the README's command, torch is pinned, lint is clean."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import tomllib
from snippetcheck import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def readme_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_readme_gives_exactly_two_commands():
    commands = readme_commands()
    assert len(commands) == 2, commands
    assert commands[0] == "pip install -r requirements-docs.txt -c constraints.txt && mkdocs serve"
    assert "-c constraints.txt" in commands[1]


def test_the_readme_is_for_users_first():
    """Its first screen (before the first section): what this is, the two commands,
    retaincheck; what contributors need is in CONTRIBUTING.md, linked."""
    first_screen = README[: README.index("\n## ")]
    assert len(first_screen.splitlines()) <= 25
    for command in readme_commands():
        assert command in first_screen, command
    assert "retaincheck train.py" in first_screen
    assert "](CONTRIBUTING.md" in README
    contributing = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for section in ("## How the code is checked", "## Other torches", "## CI"):
        assert section in contributing and section not in README, section
    assert len(README.split()) < len(contributing.split()) / 2


def requirement_names(path) -> set[str]:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    reqs = [line.split("#")[0].strip() for line in lines]
    return {canonicalize_name(Requirement(r).name) for r in reqs if r}


def test_the_docs_tools_do_not_pull_torch():
    """The README's docs command installs requirements-docs.txt alone: its requirements and
    everything they depend on (as installed here, at constraints.txt's versions) include
    neither torch nor this package; the test extra is both requirement files."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    docs = requirement_names("requirements-docs.txt")
    seen, todo = set(), [Requirement(n) for n in docs | {"mkdocstrings-python"}]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        for spec in metadata.requires(name) or []:
            dep = Requirement(spec)
            extras = req.extras or {""}
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in extras):
                todo.append(dep)
    assert "mkdocs-material" in seen and "jieba" in seen, seen
    pulled = seen & {"torch", "retaincheck", "numpy", "libcst"}
    assert not pulled, pulled
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = pyproject["tool"]["setuptools"]["dynamic"]["optional-dependencies"]
    assert extras == {"test": {"file": ["requirements-docs.txt", "requirements-test.txt"]}}


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
    # Every tool either requirement file names is pinned.
    wanted = requirement_names("requirements-docs.txt") | requirement_names("requirements-test.txt")
    assert wanted <= {n.replace("_", "-").lower() for n in names}, wanted - names


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

    def runs(job):
        return [step.get("run", "") for step in job.get("steps", [])]

    def uses(job):
        return [str(step.get("uses", "")).split("@")[0] for step in job.get("steps", [])]

    assert "./.ci/run" in runs(jobs["test"]), "the workflow does not run the tests"
    deploy = next(job for job in jobs.values() if "actions/deploy-pages" in uses(job))
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert set(deploy["needs"]) == {"test", "other-torch", "build"}
    # The jobs that install and run third-party code cannot publish.
    for name in deploy["needs"]:
        assert ("pages", "write") not in jobs[name]["permissions"].items()
        assert "id-token" not in jobs[name]["permissions"]
    # The site is built by the README's docs command, without torch, at the published address.
    build = jobs["build"]
    assert "actions/upload-pages-artifact" in uses(build)
    others = [job for name, job in jobs.items() if name != "build"]
    assert not any("actions/upload-pages-artifact" in uses(job) for job in others)
    installs = [r for r in runs(build) if "pip install" in r]
    assert installs == ["python -m pip install -r requirements-docs.txt -c constraints.txt"]
    assert any("import torch" in r and "exit 1" in r for r in runs(build))
    site_urls = [s["env"]["SITE_URL"] for s in build["steps"] if "SITE_URL" in s.get("env", {})]
    assert site_urls and all("steps.pages.outputs.base_url" in u for u in site_urls)
    assert any(s.get("id") == "pages" and s["uses"].startswith("actions/configure-pages")
               for s in build["steps"])
    assert "!ENV [SITE_URL" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_ci_tests_every_verified_torch():
    """Each torch the stamp names is tested by CI: constraints.txt's by the README's command,
    the others by .ci/other-torch, in .ci/run and in the workflow's matrix alike."""
    import verified
    import yaml
    from packaging.version import Version

    stamped = {Version(v).base_version for v in verified.versions()}
    pinned = "2.13.0"
    assert f"torch=={pinned}" in (ROOT / "constraints.txt").read_text(encoding="utf-8")
    [loop] = re.findall(r"^\s*for torch in ([\d. ]+); do\n\s*PYTHON=python \.ci/other-torch "
                        r'"\$torch"$', CI, flags=re.M)
    in_ci_run = set(loop.split())
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    other = workflow["jobs"]["other-torch"]
    in_workflow = set(other["strategy"]["matrix"]["torch"])
    assert '.ci/other-torch "$TORCH"' in [s.get("run") for s in other["steps"]]
    assert in_ci_run == in_workflow == stamped - {pinned}, (in_ci_run, in_workflow, stamped)
    assert "2.15.0" in stamped  # the current release


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
