"""Every snippet runs, asserts what its page claims, and prints exactly what its page shows.

Collected automatically: a new file in ``snippets/`` is tested with no list to edit.
Regenerate stored outputs after a deliberate change with ``pytest --update-snippets``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import snippetcheck
import verified

SNIPPETS = snippetcheck.discover()


def test_there_are_snippets():
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize(
    "snippet", SNIPPETS, ids=[str(p.relative_to(snippetcheck.SNIPPETS_DIR)) for p in SNIPPETS]
)
def test_snippet(snippet, update_snippets):
    problems = snippetcheck.check_once(snippet, update=update_snippets)
    assert not problems, f"{snippet.relative_to(snippetcheck.ROOT)}: " + "\n".join(problems)


@pytest.mark.cpu_variants
@pytest.mark.parametrize("variant", list(snippetcheck.CPU_VARIANTS))
@pytest.mark.parametrize(
    "snippet", SNIPPETS, ids=[str(p.relative_to(snippetcheck.SNIPPETS_DIR)) for p in SNIPPETS]
)
def test_snippet_on_other_cpu_paths(snippet, variant):
    """The stored output holds on the other kernel paths and thread counts (``--cpu-variants``)."""
    problems = snippetcheck.check(snippet, variant=variant)
    assert not problems, f"{snippet.relative_to(snippetcheck.ROOT)}: " + "\n".join(problems)


# What each variant must show from inside torch, so that a setting that stopped working (a
# renamed variable, a torch that ignores it) fails here instead of testing nothing.
PROBE = """
import torch
print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())
"""
EXPECTED_PROBE = {
    "default-isa": ("DEFAULT", 1),
    "avx2": ("AVX2", 1),
    "2-threads": (None, 2),  # the native capability, whatever this CPU offers
}


@pytest.mark.cpu_variants
@pytest.mark.parametrize("variant", list(snippetcheck.CPU_VARIANTS))
def test_cpu_variant_takes_effect(variant):
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=snippetcheck.snippet_env(variant),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    capability, threads = EXPECTED_PROBE[variant]
    assert int(out[1]) == threads
    if capability is not None:
        assert out[0] == capability


@pytest.mark.cpu_variants
def test_mkl_takes_the_compatible_path():
    """MKL_CBWR=COMPATIBLE reaches MKL: its verbose log names the mode of each call."""
    env = {**snippetcheck.snippet_env("default-isa"), "MKL_VERBOSE": "1"}
    code = "import torch; a = torch.randn(64, 64); torch.mm(a, a)"
    log = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert "CNR:COMPATIBLE" in log.stdout + log.stderr


def running_torch_version() -> str:
    """The torch the snippets run with (asked of the snippets' own warm interpreter)."""
    run = snippetcheck.run_code("import torch; print(torch.__version__)")
    assert run.returncode == 0 and not run.stderr, run.stderr
    return run.stdout.strip()


def test_pages_name_the_torch_that_ran_the_snippets(request):
    """The running torch is one of those that verified the snippets, which every page names.

    With ``--record-verified`` or ``--update-snippets`` the run records it instead, at its end,
    if every snippet passed (``conftest.pytest_sessionfinish``).
    """
    version = running_torch_version()
    if request.config.getoption("--update-snippets") or request.config.getoption(
        "--record-verified"
    ):
        assert version == verified.running_torch()  # the torch the end of the run records
        return
    assert version in verified.versions(), verified.not_verified_message(version)
