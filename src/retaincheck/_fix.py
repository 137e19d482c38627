"""``python -m retaincheck --fix``: remove the ``retain_graph=True`` a completed run proved
not needed, with libcst, so that formatting and comments stay as they were.

Only a site whose verdict is "not needed" in a run that completed is changed, and only when
its source line holds exactly one call with the keyword argument ``retain_graph=True``
(the literal ``True``). Every other site is kept, with a one-line reason. Each change is
checked before it is offered: the new source must parse to the same Python syntax tree as the
old one minus that one keyword argument, and keep every comment. Then the changes are proven
(``_proof``): the program is rerun with them applied, and ``--write`` writes only when that
rerun completed as the audited run did; otherwise every file stays byte for byte as it was.
``--skip-proof`` skips the rerun and marks the changes "unproven".
"""

from __future__ import annotations

import ast
import collections
import difflib
import io
import os
import shutil
import tokenize
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, PositionProvider

from ._hooks import _without_comment
from ._messages import message, reused_by
from ._places import _installed


@dataclass
class _Site:
    record: object
    reason: str | None = None  # None: to be changed
    path: str | None = None


def refusal(record, completed: bool, status: int = 0, lang: str = "en") -> str | None:
    """Why ``--fix`` must keep this site as it is (in ``lang``), or None when the audit proved
    it not needed in a completed run."""
    def m(key, **values):
        return message(key, lang, **values)

    if not completed:
        return m("k_incomplete_status", status=status) if status else m("k_incomplete_stopped")
    if record.executions == 0:
        return m("k_raised")
    if getattr(record, "history_leak", False):  # before "needed": the verdict says why
        return m("k_leak")
    reused = getattr(record, "reused_executions", 0)  # newer reports count reused runs
    if record.needed or reused:
        by = reused_by(record.reused_by, lang) or "?"
        if record.executions > 1:
            return m("k_needed_runs", reused=reused, runs=record.executions, by=by)
        return m("k_needed", by=by)
    reads = getattr(record, "unseen_reads", None)
    if reads:
        return m("k_could_not_tell", read=reads[0])
    if getattr(record, "running_children", None):
        return m("k_child", pids=", ".join(map(str, record.running_children)))
    if getattr(record, "unproven", ""):
        return m("k_unproven")
    if getattr(record, "partly_run", False):
        return m("k_part")
    if getattr(record, "compiled", False):
        return m("k_compiled")
    if getattr(record, "_observed", False):
        return m("k_watched" if record._observed == "watched" else "k_observed")
    if getattr(record, "_unread", False):
        return m("k_generated" if record._unread == "generated" else "k_unread")
    if getattr(record, "passed_through", False):
        source = getattr(record, "_source", None)
        try:  # retain_graph=keep: said as such, as --fix would say it
            with open(source, "rb") as f:
                _, why = remove_at(f.read(), record.line, lang)
        except (OSError, TypeError):
            why = None
        return why if why and why.startswith(m("k_not_literal", value="")[:14]) else m(
            "k_passed")
    untaken = getattr(record, "unseen_calls", None)
    if untaken:
        return m("k_untaken", call=untaken[0])
    if getattr(record, "ran_once_in_a_loop", False):
        return m("k_held" if getattr(record, "_held_in_loop", False) else "k_once")
    if getattr(record, "create_graph", False):
        return m("k_create")
    if record.verdict != "not needed":
        from ._report import VERDICT_KEYS

        key = VERDICT_KEYS.get(record.verdict)
        shown = m(key) if lang != "en" and key else repr(record.verdict)
        return m("k_verdict", verdict=shown)
    return None


def _code_line(source: bytes, line: int) -> str | None:
    """The line, stripped and without a trailing comment, as the audit records it."""
    try:  # as Python decodes it: a coding declaration, a byte-order mark (rev34a J7, J8)
        encoding = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
        text = source.decode(encoding, "replace")
    except (SyntaxError, LookupError):
        text = source.decode("utf-8", "replace")
    # Python ends lines at \r\n, \r or \n only; str.splitlines also at a form feed and
    # others, which shifted every line below one (rev34a K4)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return _without_comment(lines[line - 1]) if 0 < line <= len(lines) else None


def _locate(record, dirs: list[str], lang: str = "en") -> tuple[str | None, str | None]:
    """(path, None) of the file the record's line is in, or (None, reason in ``lang``)."""
    if record.file.startswith("<"):
        return None, message("k_not_file", lang, file=record.file)
    source = getattr(record, "_source", None)  # the code's own file name, as Python had it
    if isinstance(source, str) and os.path.isabs(source):
        candidates = [source]
    elif os.path.isabs(record.file):
        candidates = [record.file]
    else:  # relative to the working directory at the time of the call
        candidates = [os.path.join(d, record.file) for d in [*dirs, os.getcwd()]]
    found: dict[str, str] = {}
    for path in candidates:
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError:
            continue
        if _code_line(source, record.line) == record.code:
            found.setdefault(os.path.realpath(path), path)
    if not found:
        return None, message("k_gone", lang)
    if len(found) > 1:
        return None, message("k_ambiguous", lang, file=record.file, n=len(found))
    real, path = next(iter(found.items()))
    if _installed(real):
        return None, message("k_installed", lang)
    return path, None


def _comments(source: bytes) -> collections.Counter:
    tokens = tokenize.tokenize(io.BytesIO(source).readline)
    return collections.Counter(t.string for t in tokens if t.type == tokenize.COMMENT)


class _Calls(cst.CSTVisitor):
    """Every call with a ``retain_graph=`` keyword argument whose lines include ``line``."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, line: int):
        self.line = line
        self.found: list[tuple[cst.Call, cst.Arg, object]] = []

    def visit_Call(self, node: cst.Call) -> None:
        pos = self.get_metadata(PositionProvider, node)
        if not pos.start.line <= self.line <= pos.end.line:
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "retain_graph":
                self.found.append((node, arg, pos.start))


def _without_arg(call: cst.Call, i: int) -> cst.Call:
    """The call without its argument ``i``, its comma and the spacing around it handled."""
    args = list(call.args)
    removed = args.pop(i)
    if not args:  # f(retain_graph=True) and f(\n    retain_graph=True,\n) -> f()
        return call.with_changes(args=(), whitespace_before_args=cst.SimpleWhitespace(""))
    if i == len(args):  # it was the last argument
        last = args[-1]
        if isinstance(removed.comma, cst.Comma) and isinstance(last.comma, cst.Comma):
            # A trailing comma stays, and the closing bracket keeps its own line and indent;
            # comment lines between the last kept argument and the removed one stay too.
            kept, gone = last.comma.whitespace_after, removed.comma.whitespace_after
            if isinstance(kept, cst.ParenthesizedWhitespace) and isinstance(
                gone, cst.ParenthesizedWhitespace
            ):
                gone = kept.with_changes(indent=gone.indent, last_line=gone.last_line)
            args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=gone))
        else:
            args[-1] = last.with_changes(
                comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=removed.whitespace_after_arg
            )
    return call.with_changes(args=args)


class _Remove(cst.CSTTransformer):
    def __init__(self, call: cst.Call, arg: cst.Arg):
        self.call, self.arg = call, arg

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if original is self.call:
            i = next(j for j, a in enumerate(original.args) if a is self.arg)
            return _without_arg(updated, i)
        return updated


class _DropKeyword(ast.NodeTransformer):
    def __init__(self, line: int, col: int):
        self.line, self.col, self.dropped = line, col, 0

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        if (node.lineno, node.col_offset) == (self.line, self.col):
            before = len(node.keywords)
            node.keywords = [k for k in node.keywords if k.arg != "retain_graph"]
            self.dropped += before - len(node.keywords)
        return node


def remove_at(source: bytes, line: int, lang: str = "en") -> tuple[bytes | None, str | None]:
    """``source`` without the ``retain_graph=True`` of the one call on ``line``, or
    (None, reason in ``lang``)."""
    try:
        wrapper = MetadataWrapper(cst.parse_module(source))
    except cst.ParserSyntaxError:
        return None, message("k_no_parse", lang)
    finder = _Calls(line)
    wrapper.visit(finder)
    if not finder.found:
        return None, message("k_no_keyword", lang)
    if len(finder.found) > 1:
        return None, message("k_two_calls", lang, n=len(finder.found))
    call, arg, start = finder.found[0]
    if not m.matches(arg.value, m.Name("True")):
        value = wrapper.module.code_for_node(arg.value)
        return None, message("k_not_literal", lang, value=value)
    new = wrapper.module.visit(_Remove(call, arg)).bytes
    # The change must be exactly that keyword argument, and lose no comment.
    expected_tree = ast.parse(source)
    dropper = _DropKeyword(start.line, start.column)
    dropper.visit(expected_tree)
    try:
        same = dropper.dropped == 1 and ast.dump(ast.parse(new)) == ast.dump(expected_tree)
    except SyntaxError:
        same = False
    if not same or _comments(new) != _comments(source):
        return None, message("k_comment", lang)
    return new, None


def _diff(old: bytes, new: bytes, name: str) -> str:
    a = old.decode("utf-8", "replace").splitlines(keepends=True)
    b = new.decode("utf-8", "replace").splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"a/{name}", f"b/{name}"))


def _refuted(record, changed: int, proof=None) -> None:
    """The proof's rerun without this flag failed: the verdict "not needed" was wrong, so the
    record now says needed (for the report, the JSON and --fail-on-unneeded alike). With
    several changes the one to blame is unknown: each is kept as needed. A rerun that only
    printed something else (or could not be watched) proves nothing either way: the site is
    then "could not tell: kept" (``unproven``), not needed."""
    if proof is not None and not proof.refutes:
        record.unproven = proof.reason
        return
    record.needed = True
    record.reused_executions = record.executions
    record.reused_by = [  # English, as the JSON is: the report shows it in its language
        message("by_rerun_one") if changed == 1 else message("by_rerun_many", n=changed)
    ]


def _plan(report, completed: bool, status: int, dirs, lang: str):
    """(sites, diffs, number of changes, edits: real path -> (new source, its sites))."""
    def msg(key, **values):
        return message(key, lang, **values)

    dirs = list(dirs or [])
    sites = [_Site(record, refusal(record, completed, status, lang)) for record in report.calls]
    for site in sites:
        if site.reason is None:
            site.path, site.reason = _locate(site.record, dirs, lang)
    by_file: dict[str, list[_Site]] = {}
    for site in sites:
        if site.reason is None:
            by_file.setdefault(os.path.realpath(site.path), []).append(site)
    diffs, changed, edits = [], 0, {}
    for path, file_sites in by_file.items():
        with open(path, "rb") as f:
            old = f.read()
        new = old
        for site in sorted(file_sites, key=lambda s: -s.record.line):  # bottom up: lines hold
            try:
                result, reason = remove_at(new, site.record.line, lang)
            except Exception as exc:  # never lose the report over a rewrite
                result, reason = None, msg("k_rewrite", error=type(exc).__name__)
            if result is None:
                site.reason = reason
            else:
                new = result
                changed += 1
        if new != old:
            diffs.append(_diff(old, new, file_sites[0].record.file))
            edits[path] = (new, [s for s in file_sites if s.reason is None])
    return sites, diffs, changed, edits


def _line_map(old: bytes, new: bytes):
    """old line number -> the line it is on in ``new`` (a changed block: its first line, or
    the same offset into it)."""
    a, b = old.splitlines(), new.splitlines()
    blocks = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()

    def where(line: int) -> int:
        for _, i1, i2, j1, j2 in blocks:
            if i1 < line <= i2:
                return j1 + min(line - i1, max(j2 - j1, 1))
        return line

    return where


def _prove(edits: dict, changed: int, program, lang: str, originals: dict):
    """Rerun ``program`` with the edits (``originals``: each file's text before them); a
    failed proof turns each changed site to needed."""
    from ._proof import prove, real_line

    sites = [site for _, changed_sites in edits.values() for site in changed_sites]
    forced = [line for site in sites if (line := real_line(site.record, site.path))]
    # the rerun runs the edited files: a removal that spanned lines (a formatter's
    # `x.backward(\n    retain_graph=True,\n)`) moves the lines below it up (rev28a F4)
    moved = {os.path.realpath(path): _line_map(originals[path], new)
             for path, (new, _) in edits.items() if originals.get(path) is not None}
    forced = [(path, moved[path](line)) if path in moved else (path, line)
              for path, line in forced]
    proof = prove({path: new for path, (new, _) in edits.items()}, program, lang, forced)
    if proof.proven:
        for site in sites:
            site.record._proven = True  # the gate (prove_unneeded) need not rerun these
    if not proof.proven and proof.ran:  # a rerun that did not happen refutes nothing
        for site in sites:
            _refuted(site.record, changed, proof)
            if not proof.refutes:
                site.reason = message("k_unproven", lang)
            elif changed == 1:
                site.reason = message("k_refuted_one", lang)
            else:
                site.reason = message("k_refuted_many", lang, n=changed)
    return proof


def prove_unneeded(report, completed: bool, status: int, *, dirs, program, skip_proof: bool,
                   lang: str = "en") -> str | None:
    """For ``--fail-on-unneeded`` without ``--fix``: prove the "not needed" verdicts as
    ``--fix`` would (a rerun with the flags removed, nothing written) before the gate answers;
    a failed proof turns those sites to needed. Every such site is rerun without keeping its
    graph: the flag is removed from a copy of its file where ``--fix`` would remove it, and
    forced off at run time (``_proof_site``) in every case; no file is written. The one line
    to print, or None when there is no such site."""
    from ._proof import prove, real_line

    # --fix --fail-on-unneeded: the sites --fix proved (its rerun, _prove) are not rerun for
    # their own sake
    records = [r for r in report.calls
               if r.verdict == "not needed" and not getattr(r, "_proven", False)]
    if not records:
        return None
    if skip_proof or program is None:
        return message("gate_skipped", lang)
    # the flag removed from the text where --fix would remove it, in copies the rerun runs
    # (nothing written): a profiler or a __torch_function__ that reads the flag then sees it
    # gone, which forcing graph-keeping off below the call does not show (rev37a G7); the
    # other sites are forced off at run time
    import types

    _, _, _, edits = _plan(types.SimpleNamespace(calls=records), completed, status, dirs, lang)
    originals = {path: _read(path) for path in edits}
    edits = {path: edit for path, edit in edits.items() if originals[path] is not None}
    moved = {path: _line_map(originals[path], new) for path, (new, _) in edits.items()}
    forced, lines = [], []
    for record in records:
        line = real_line(record)
        if line is not None and line[0] in moved:  # (its line in the edited copy)
            line = (line[0], moved[line[0]](line[1]))
        if line is None:
            path, _ = _locate(record, list(dirs or []), lang)
            line = real_line(record, path)
        if line is None:
            # a site with no file to point at (exec'd code) cannot be rerun without its
            # flag: "could not tell: kept", never an unproven 6
            record.unproven = message("proof_no_file", lang)
        else:
            forced.append(record)
            lines.append(line)
    n = len(records)
    if not forced:
        how = message("f_not_proven", lang, reason=message("proof_no_file", lang))
        return message("gate_proof_one" if n == 1 else "gate_proof_many", lang, n=n, how=how)
    # the sites --fix proved stay forced off too: the 6 claims them all together, and each
    # may be unneeded only while the other keeps its graph (rev27l X1)
    for record in report.calls:
        if record.verdict == "not needed" and getattr(record, "_proven", False):
            line = real_line(record)
            if line is not None:
                lines.append(line)
    proof = prove({path: new for path, (new, _) in edits.items()}, program, lang, lines,
                  gate=True)
    how = message("f_proven" if proof.proven else "f_not_proven", lang, reason=proof.reason)
    if not proof.proven and proof.ran:
        for record in forced:
            _refuted(record, len(forced), proof)
    return message("gate_proof_one" if n == 1 else "gate_proof_many", lang, n=n, how=how)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _write(edits: dict, originals: dict, lang: str) -> str | None:
    """Write every edited file, or none: a file changed since the plan read it (an edit saved
    while the proof ran: rev28a F9) or one that cannot be written (a read-only folder: rev28a
    F11) leaves them all as they are. The reason in ``lang``, or None when all were written."""
    for path in edits:
        if _read(path) != originals[path]:
            return message("f_changed_meanwhile", lang, path=path)
    made = []
    try:
        for path, (new, _) in edits.items():
            tmp = f"{path}.retaincheck-tmp"
            with open(tmp, "wb") as f:
                made.append(tmp)
                f.write(new)
            try:
                shutil.copymode(path, tmp)
            except OSError:
                pass
        for path in edits:
            if _read(path) != originals[path]:  # (changed while the copies were written)
                raise InterruptedError(message("f_changed_meanwhile", lang, path=path))
            os.replace(f"{path}.retaincheck-tmp", path)
            made.remove(f"{path}.retaincheck-tmp")
    except InterruptedError as exc:
        return str(exc)
    except OSError as exc:
        return message("f_write_failed", lang, path=path, error=exc.strerror or exc)
    finally:
        for tmp in made:
            try:
                os.remove(tmp)
            except OSError:
                pass
    return None


def fix(report, completed: bool, status: int = 0, *, write: bool = False,
        dirs: list[str] | None = None, program=None, skip_proof: bool = False,
        lang: str = "en") -> str:
    """Plan, prove (rerun ``program``, a ``_proof.Program``, with the changes) and with
    ``write`` apply the removals; the text ``--fix`` prints, in ``lang``. Without a
    ``program`` or with ``skip_proof`` the changes are "unproven"."""
    def msg(key, **values):
        return message(key, lang, **values)

    sites, diffs, changed, edits = _plan(report, completed, status, dirs, lang)
    if not sites:
        return msg("f_nothing_to_fix") + "\n"
    originals = {path: _read(path) for path in edits}  # what the plan and the proof edited
    proof = None
    if edits and program is not None and not skip_proof:
        proof = _prove(edits, changed, program, lang, originals)
    problem = None
    if write and (proof is None or proof.proven):
        problem = _write(edits, originals, lang)
    written = write and problem is None and (proof is None or proof.proven)
    files = sum(1 for d in diffs if d)
    what = msg("f_what", changes=msg("f_changes_one" if changed == 1 else "f_changes_many",
                                     n=changed),
               files=msg("f_files_one" if files == 1 else "f_files_many", n=files))
    if proof is None:
        how = msg("f_unproven_skip") if skip_proof else msg("f_unproven")
    else:
        how = msg("f_proven" if proof.proven else "f_not_proven", reason=proof.reason)
    if changed and proof is not None and not proof.proven:
        head = msg("f_head_refuted", what=what, how=how)  # nothing written
    elif changed and problem is not None:
        head = msg("f_head_unwritten", what=what, how=how, problem=problem)
    elif changed and write:
        head = msg("f_head_wrote", what=what, how=how)
    elif changed:
        head = msg("f_head_plan", what=what, how=how)
    else:
        head = msg("f_nothing_to_change")
    width = max(len(s.record.site) for s in sites)
    lines = [head]
    for site in sites:
        done = "f_removed" if written else "f_remove"
        tail = "" if proof is not None else "_unproven"
        action = site.reason or msg(done + tail)
        lines.append(f"  {site.record.site:<{width}}  {action}")
    text = "\n".join(lines) + "\n"
    if diffs:
        text += "\n" + "".join(diffs)
    return text
