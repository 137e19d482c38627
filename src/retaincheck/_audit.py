"""The ``audit`` context manager; the work is done by the modules next to it.

* ``_hooks``: wrapping ``backward``/``grad``, hooking the retained graph's nodes, the session.
* ``_verdicts``: needed, history leak, completed or stopped early.
* ``_sizes``: saved tensors of a node, bytes of distinct storages.
* ``_suggest``: one suggestion per call site, fitted to how its graph was reused.
* ``_report``: ``Report`` and ``CallRecord``, their text and JSON forms.
"""

from __future__ import annotations

import os
import sys
import types

from ._hooks import LOCK, Session, _class_module, _own_dict
from ._reads import usable_name
from ._report import CallRecord, Report
from ._sizes import human as _human  # noqa: F401  (kept for code that imported it from here)

__all__ = ["CallRecord", "Report", "audit"]

_ACTIVE: list[Session] = []


class audit:
    """Audit every ``retain_graph=True`` in a block of code.

    Use it as a context manager, `with retaincheck.audit() as report:`; the
    [`Report`][retaincheck.Report] it gives is complete once the block exits.

    Inside the block, every call to ``Tensor.backward``, ``torch.autograd.backward`` or
    ``torch.autograd.grad`` that passes ``retain_graph=True`` explicitly is recorded with its
    call site in your code. A call site is **needed** when another ``backward`` or ``grad``
    call inside the block (later, or while the retaining call was still running), or a later
    run of the same line, executed a node that a run of this line had executed and that held
    saved tensors: without the flag that pass would have failed. A node the call did not
    execute (the graph behind the ``inputs`` of ``autograd.grad``) is never freed by it and
    does not count. Otherwise the site is **not needed**, **not needed so far (run stopped
    early)** when the block raised, or **did not complete** when every call at that site
    raised. Put everything that may walk the graph again inside the block: uses after the
    block are not seen. ``python -m retaincheck script.py`` audits a whole script.

    ```python
    import torch
    import retaincheck

    w = torch.ones(3, requires_grad=True)
    with retaincheck.audit() as report:
        loss = torch.tanh(w).sum()
        loss.backward(retain_graph=True)  # nothing walks this graph again
        total = torch.sigmoid(w).sum()
        total.backward(retain_graph=True)
        total.backward()  # the second walk: the retain above was needed

    first, second = report.calls
    assert (first.needed, second.needed) == (False, True)
    assert first.retained_bytes == 12  # tanh's saved output: 3 float32 values
    ```

    The audit never changes results: the wrappers pass every argument through unchanged and
    the hooks return nothing. Everything is restored on exit, also when the block raises; the
    report then says the run did not complete (``report.completed``, ``report.stopped_by``).
    Importing ``retaincheck`` patches nothing. Audits cannot be nested.

    Every backward pass that Python starts is seen, whatever name the call went through
    (``from torch.autograd import grad`` in a module imported before the audit, ``g =
    torch.autograd.grad`` bound at import time): besides wrapping ``torch.autograd.backward``
    and ``grad``, the audit stands in front of the engine's entry point,
    ``Variable._execution_engine.run_backward`` (``torch/autograd/graph.py``,
    ``_engine_run_backward``). ``report.backward_calls`` counts them. Calls that torch makes
    internally (``torch.autograd.functional``) are not recorded as sites, and a call through
    an early-bound name that passes ``create_graph=True`` is not recorded either (the engine
    gets one flag for both), though all of them count as later uses of recorded graphs.

    Reads of saved tensors outside a backward pass (``grad_fn._saved_result``,
    ``ctx.saved_tensors``) cannot be hooked; where the program's code has one, a site that
    nothing else reused is "could not tell: kept", never "not needed".
    """

    def __init__(self):
        self._session: Session | None = None
        self._keep_tags = False  # (the pytest plugin: Session.uninstall)

    def __enter__(self) -> Report:
        with LOCK:
            if _ACTIVE:
                raise RuntimeError("retaincheck.audit() is already active; audits do not nest")
            self._session = Session()
            _ACTIVE.append(self._session)
        import sys

        frame = sys._getframe(1)
        caller = frame.f_code.co_filename  # the code that runs the block
        self._session.files.add(caller)
        self._session.block = (caller, frame.f_lineno)  # calls after the block are not seen
        self._session.base = frame  # (the frames below it are every call's: Session.run)
        self._session.below_base = False
        self._session.modules_before = set(sys.modules)
        try:
            self._session.install()
        except BaseException:
            self._session.uninstall()
            _ACTIVE.clear()
            raise
        return self._session.report

    def __exit__(self, exc_type, exc, tb) -> None:
        session = self._session
        session.base = None
        # (the sites whose kept graphs are alive as the block ends: _kept_past_its_function)
        session.kept_alive = {record for tag in (ref() for ref in list(session.live.values()))
                              if tag is not None for record in (tag.keepers or ())}
        try:
            session.uninstall(keep_tags=self._keep_tags)
            report = session.report
            report.calls.sort(key=lambda c: (c.file, c.line))
            from ._reads import one_reading

            with one_reading():  # (the files on disk looked at once each)
                _mark_forked_children(session)
                _mark_unseen_reads(session)
                _mark_untaken_calls(session)
                _mark_passed_through(session)
            if exc_type is not None:
                report.mark_stopped(exc if exc is not None else exc_type())
        finally:
            with LOCK:
                _ACTIVE.clear()
        return None


def _mark_unseen_reads(session: Session) -> None:
    """Sites nothing reused become "could not tell: kept" when the program's code reads saved
    tensors outside a backward pass (see ``_reads``)."""
    open_sites = [c for c in session.report.calls if not c.needed and not c.history_leak]
    if not open_sites:
        return
    from ._reads import reads_in

    files = set(session.files)
    files.update(site[3] for _, site in session.sites.values())
    reads = reads_in(files, session.modules_before) + session.dynamic_reads
    for record in open_sites:
        record.unseen_reads = list(reads)


def _mark_passed_through(session: Session) -> None:
    """Sites nothing reused become "could not tell: kept" when the call at their line writes
    no ``retain_graph`` but passes ``*args``/``**kwargs`` on (rev30b F-x10: a mock of
    ``Tensor.backward`` was the site, proven by turning graph-keeping off there, while the
    line that writes the flag was another, and the test asserted the call's arguments)."""
    import ast

    from ._reads import _tree

    for record in session.report.calls:
        source = getattr(record, "_source", None)
        ran_codes = record.__dict__.pop("_ran_codes", None)  # (code objects do not pickle)
        if record.needed or record.history_leak:
            continue
        if getattr(record, "_unread", False):  # (its file could not be told: _hooks._resolve)
            record.passed_through = True
            continue
        if source and _written_since(source, session.started_at):
            # a file written while the audit ran: the program made it (a step module written
            # from a template, `retain_graph={keep}`, and imported: rev48a G2); its literal
            # True may be False on another run, and an edit of it is undone by the next
            record.passed_through, record._unread = True, "generated"
            continue
        if getattr(record, "_observed", False):
            # a __torch_function__ on the way saw the flag: the program may act on it
            # (rev36a F1, F2), which turning graph-keeping off at run time would not show
            record.passed_through = True
            continue
        # The site's file, or the one text compiled under its name during the audit (a
        # Markdown fence: _reads._compiled); else its text as Python had it while it ran (a
        # notebook cell's, a doctest example's). A file that is not what ran is read for
        # nothing: changed since the site first ran (rev35a A4, rev35b NEW-7: edited or put
        # back during the run), or a string compiled under its name (rev35b NEW-4: a fence in
        # a module's docstring, which pytest-markdown-docs runs under the module's name).
        disk = _tree(source, compiled=False) if source else None
        text = "".join(getattr(record, "_lines", None) or ())
        if source and disk is None and not text and not os.path.isfile(source):
            # code the program made and compiled from a string, in no file and not kept by
            # Python (an exec'd template's `retain_graph={keep}`): its literal True was
            # written by the program, from a value that may be False on another run (rev43c
            # S1: "remove retain_graph=True", a text that exists nowhere). A string with a
            # literal flag is no different to read; both are kept.
            record.passed_through = record._unread = True
            continue
        if disk is not None and _not_what_ran(source, text):
            tree = text = None
        else:
            tree = disk if disk is not None else _tree(source) if source else None
        if tree is None and text:
            try:
                tree = ast.parse(text)
            except (SyntaxError, ValueError):
                tree = None
        # every call whose text covers the line: a call split over lines runs on the line of
        # its ``.backward(`` while its node starts above it (rev33 H2: black's layout)
        calls = [] if tree is None else [
            n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and n.lineno <= record.line <= (n.end_lineno or n.lineno)]
        # the calls that ran, where Python said which (_hooks._position): those alone
        ran = getattr(record, "_calls_at", None) or set()
        exact = [c for c in calls if _call_positions(c) & ran]
        if not calls or not _compiles_to(tree, source, ran_codes, calls):
            # code compiled from a string (exec), a file gone or changed since it ran: what
            # the line writes cannot be seen, so whether the flag is the literal True cannot;
            # nor where the text read is not what ran there (rev37a G4: a launcher that
            # exec'd a patched copy of main.py under the name "main.py"; rev37b G2: a
            # function compiled again from its own text, patched, before the audit began)
            record.passed_through = record._unread = True
            continue
        if len(exact) != len(ran - {None}):
            # an instruction that ran is no call of the line: a for loop over a map of
            # methodcallers, a subscript of a defaultdict of partials (rev37a G1): what
            # it called, and with which flag, cannot be seen
            record.passed_through = True
            continue
        if exact and None not in ran:
            calls = exact
        elif not _plain_lines(tree, calls):
            # no positions (before 3.11, -X no_debug_ranges): what runs on the line besides
            # the calls (a for loop over a map, a subscript: rev38a H5) cannot be told apart
            record.passed_through = True
            continue
        splat = any(k.arg is None for c in calls for k in c.keywords) or any(
            isinstance(a, ast.Starred) for c in calls for a in c.args)
        named = any(k.arg == "retain_graph" and not (
            isinstance(k.value, ast.Constant) and k.value.value is True)
            for c in calls for k in c.keywords)
        # Each call that ran must start a pass and write retain_graph=True; else it is
        # positional (rev33 H1: loss.backward(None, retain_graph); rev37a G5: a True by
        # position) or bound elsewhere (rev33 H3: a partial's, also called with
        # create_graph=: rev34a J1, rev34b F1, F3); a literal True of another parameter does
        # not count (rev34a J2, J2b: out.norm(2, 1, True); autograd.grad's only_inputs).
        # Where Python does not say which call of the line ran (before 3.11, or under -X
        # no_debug_ranges), every call of the line must: one beside, inside or around the
        # literal call may be the one that kept the graph (rev35a A3, rev35b NEW-2, rev36a
        # F3: a partial or operator.methodcaller named otherwise; rev37a G2)
        implied = not all(_starts_a_pass(c) and _literal_flag(c) for c in calls)
        # a call that unpacks *args or **kwargs runs code at its own place before it starts
        # (a map of methodcallers consumed by the unpacking: rev38a H1); a decorator's
        # expression is also the place of its application to the function or class below
        # (rev38a H2: a decorator that returns a methodcaller, applied to a class)
        if (splat or named or implied or any(id(c) in _decorators(tree) for c in calls)
                or _parameter_read_elsewhere(tree, calls)):
            record.passed_through = True


def _written_since(name: str, start: float) -> bool:
    """Whether a file was written since ``start`` (``time.time()``): its modification time (a
    copy that keeps it, ``shutil.copy2`` of an example, is the text it was)."""
    try:
        return os.stat(name).st_mtime >= start
    except OSError:
        return False


def _plain_lines(tree, calls) -> bool:
    """Whether the lines of ``calls`` hold nothing but calls, names, attributes, constants
    and plain statements around them: no loop, subscript, operator or comprehension that
    may call code of its own."""
    import ast

    plain = (ast.Expr, ast.Assign, ast.Call, ast.Name, ast.Attribute, ast.Constant, ast.keyword,
             ast.expr_context, ast.Return)
    lines = _span(calls)
    return all(isinstance(n, plain) for n in ast.walk(tree)
               if getattr(n, "lineno", None) in lines and not isinstance(n, ast.Module))


def _span(calls) -> range:
    """The lines ``calls`` cover, first to last."""
    return range(min(c.lineno for c in calls), max(c.end_lineno or c.lineno for c in calls) + 1)


def _call_positions(call) -> set:
    """The places Python gives a call's instructions (``co_positions``): the call's own span,
    or, for a method whose name is on a later line than the call's start (``(loss\n
    .backward(...))``, black's layout), from that name on, as CPython's compiler moves it
    (``update_start_location_to_match_attr`` in Python/compile.c; rev37a G6)."""
    import ast

    places = {(call.lineno, call.end_lineno, call.col_offset, call.end_col_offset)}
    func = call.func
    if isinstance(func, ast.Attribute) and func.end_lineno != call.lineno:
        start = func.end_col_offset - len(func.attr)
        places.add((func.end_lineno, max(func.end_lineno, call.end_lineno), start,
                    call.end_col_offset))
    return places


def _compiles_to(tree, source: str | None, codes: dict | None, calls) -> bool:
    """Whether the text read for a site compiles, on the lines of its calls, to the
    instructions of the code that ran there (``_hooks``: ``_ran_codes``). Only those lines
    are compared: pytest rewrites a test module's asserts, elsewhere in the same function."""
    if not codes or tree is None:
        return True  # (no frame, or a text that cannot be read: said otherwise)
    lines = _span(calls)
    compiled = _compiled_codes(tree, source)
    if compiled is None:
        return False
    for code in codes.values():
        mine = _line_ops(code, lines)
        key = (code.co_name, code.co_firstlineno)
        if any(_line_ops(other, lines) == mine for other in compiled.get(key, ())):
            continue
        if not any(name.startswith("@py_assert") for name in code.co_varnames) or not source:
            return False
        # a test module whose asserts pytest rewrote (rev41b A1: a grad() inside an assert):
        # its text, rewritten as pytest does it, must compile to what ran
        rewritten = _per_tree("pytest", tree, lambda t: _compile_rewritten(t, source)) or {}
        if not any(_line_ops(other, lines) == mine for other in rewritten.get(key, ())):
            return False
    return True


def _compile_rewritten(tree, source: str) -> dict | None:
    """``_compile_all`` of ``tree`` with its asserts rewritten by pytest's own rewriter
    (``_pytest.assertion.rewrite.rewrite_asserts``, default options); None if it cannot be."""
    import copy

    try:
        from _pytest.assertion.rewrite import rewrite_asserts

        with open(source, "rb") as file:
            data = file.read()
        tree = copy.deepcopy(tree)
        rewrite_asserts(tree, data, source)
    except Exception:  # (no pytest, another pytest's rewriter, a file gone): not read
        return None
    return _compile_all(tree, source)


_PER_TREE: dict = {}  # (what, id(tree)) -> (tree, what was found in it)


def _per_tree(what, tree, find):
    """``find(tree)``, once per tree (``_reads`` keeps each tree it parsed)."""
    cached = _PER_TREE.get((what, id(tree)))
    if cached is None or cached[0] is not tree:
        cached = _PER_TREE[(what, id(tree))] = (tree, find(tree))
    return cached[1]


def _decorators(tree) -> set:
    """The ids of the tree's decorator expressions."""
    import ast

    return _per_tree("decorators", tree, lambda t: {
        id(d) for n in ast.walk(t) if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for d in n.decorator_list})


def _compiled_codes(tree, source: str | None) -> dict | None:
    """Every code object the text of ``tree`` compiles to, by name and first line; None if it
    does not compile."""
    return _per_tree("codes", tree, lambda t: _compile_all(t, source))


def _compile_all(tree, source: str | None) -> dict | None:
    try:
        todo = [compile(tree, source or "<retaincheck>", "exec", dont_inherit=True)]
    except (SyntaxError, ValueError, TypeError):
        found = None
    else:
        found = {}
        while todo:
            code = todo.pop()
            found.setdefault((code.co_name, code.co_firstlineno), []).append(code)
            todo.extend(k for k in code.co_consts if hasattr(k, "co_code"))
    return found


def _line_ops(code, lines: range) -> list:
    """The instructions of ``code`` on ``lines``: name and argument (a jump's target left out,
    as code elsewhere moves it; a code object by its name)."""
    import dis

    ops, line = [], None
    for ins in dis.get_instructions(code):
        positions = getattr(ins, "positions", None)
        if positions is not None and positions.lineno is not None:
            line = positions.lineno
        elif isinstance(ins.starts_line, int) and not isinstance(ins.starts_line, bool):
            line = ins.starts_line  # (3.10: the first instruction of each line says it)
        if line not in lines:
            continue
        arg = ins.argval
        if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
            arg = None
        elif hasattr(arg, "co_code"):
            arg = arg.co_name
        ops.append((ins.opname, repr(arg)))
    return ops


def _starts_a_pass(call) -> bool:
    """A call that may start a backward pass: one that writes ``retain_graph=`` or
    ``create_graph=`` (also through an alias, ``g = torch.autograd.grad``), ``grad``, or one
    with "backward" in its name (``loss.backward``, ``accelerator.backward``)."""
    import ast

    if any(k.arg in ("retain_graph", "create_graph") for k in call.keywords):
        return True
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "grad" or "backward" in name


def _literal_flag(call) -> bool:
    """Whether the call writes ``retain_graph=True``, by keyword. Not ``create_graph=True``: a
    site is a call that gave retain_graph itself, and the flag it gave came from elsewhere
    (rev35a A1, rev35b NEW-1: a partial's, a positional name, with create_graph=True at the
    call). Not a True by position either: what is called may be a partial with arguments
    bound before it (rev36b F1: a bare name; rev37a G5, rev37b G1: ``obj.backward(keep,
    True)``, an attribute that is a partial of ``torch.autograd.backward``), which shifts
    the True to another parameter; a keyword is the same parameter whatever was bound."""
    import ast

    return any(k.arg == "retain_graph" and isinstance(k.value, ast.Constant)
               and k.value.value is True for k in call.keywords)


def _not_what_ran(source: str, lines: str) -> bool:
    """Whether the file ``source``, as it is now, may not be the code that ran: its text
    differs from what Python's line cache held when the site first ran, or from a string
    compiled under its name during the audit."""
    from ._reads import _compiled, _source_text

    try:
        now = _source_text(source)
    except OSError:  # gone since: nothing to compare
        return True
    # (linecache ends the last line with a newline where the file does not)
    return bool(lines and lines not in (now, now + "\n")) or _compiled.get(source, now) != now


def _parameter_read_elsewhere(tree, calls) -> bool:
    """Whether the flag at the site is a parameter of the function around it that the function
    also reads elsewhere (rev31a F5: ``def backward_step(loss, retain_graph=False)`` that steps
    only ``if not retain_graph``; rev31b F-x10b: a spy that records it): the caller writes the
    flag, and the program looks at it, which turning graph-keeping off at the call does not
    change. Positional arguments count when their name holds "retain"."""
    import ast

    names = set()
    for call in calls:
        for keyword in call.keywords:
            if keyword.arg == "retain_graph" and isinstance(keyword.value, ast.Name):
                names.add(keyword.value.id)
        names.update(a.id for a in call.args if isinstance(a, ast.Name) and "retain" in a.id)
    if not names:
        return False
    line = calls[0].lineno
    functions = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and f.lineno <= line <= (f.end_lineno or f.lineno)]
    if not functions:
        return False
    function = max(functions, key=lambda f: f.lineno)  # the innermost
    arguments = function.args
    parameters = {a.arg for a in (*arguments.posonlyargs, *arguments.args,
                                  *arguments.kwonlyargs)} & names
    if not parameters:
        return False
    inside = {id(n) for call in calls for n in ast.walk(call)}
    return any(isinstance(n, ast.Name) and n.id in parameters and isinstance(n.ctx, ast.Load)
               and id(n) not in inside for n in ast.walk(function))


def _mark_untaken_calls(session: Session) -> None:
    """Sites nothing reused become "could not tell: kept" when a ``backward()``/``grad()``
    call that could run after the site (``CallRecord.unseen_calls`` says where) did not run
    after the site's first run (``_reads.untaken_calls``): a verdict covers only
    the paths the run took, and this one may walk the graph on a path it did not take."""
    open_sites = [c for c in session.report.calls
                  if not c.needed and not c.history_leak and c.executions]
    if not open_sites:
        return
    from ._reads import _kind, _realpath, project_walkers, untaken_calls, untaken_in_functions

    # the program's own files: those it ran on the way to a site, the modules of its own that
    # it imported since the audit began (losses.py of a train.py), and those its files name
    # (a test module's `from helpers import walk`, a conftest's helper imported before a
    # test's audit began: rev27m S1). Not every module of the user's imported before: the
    # other test modules of a pytest session would make every same-named function a walker.
    before = session.modules_before or set()
    own = {name for name in set(session.files) | {site[3] for _, site in session.sites.values()}
           if name and not name.startswith("<") and _kind(name) == 2}
    own.update(name for module_name, module in list(sys.modules.items())
               if type(module_name) is str and module_name not in before
               and usable_name(name := _own_dict(module).get("__file__"))
               and name.endswith(".py") and _kind(name) == 2)
    # (and those a test runner runs for the test: its module, the conftest files, a plugin
    # module of the project's; a unittest.TestCase's module: a helper class a conftest
    # defines and a fixture hands to the test, rev48b F1; a helpers module that only the
    # conftest imports, W1)
    tests = [getattr(record, "_test_code", None) or ((), (), (), ()) for record in open_sites]
    own.update(name for name in set(session.code_files).union(*(t[3] for t in tests))
               if _kind(name) == 2)
    own.update(_named_from(own, session.code_modules))
    # (an installed plugin module's imports too: its hook's check from another installed
    # package, rev49b G1)
    extra = project_walkers(sorted(own)) | _installed_walkers(own | {
        name for name in session.code_files if _kind(name) == 1})
    # the functions of those files by the names the runner's code hands on as values (a
    # finalizer, request.addfinalizer(functools.partial(walk_again, kept)), rev48b P2; a
    # cleanup, self.addCleanup(check, loss), rev48a U2): searched whole
    from ._reads import defined_functions

    runner, stop = runner_stop(session)
    by_name: dict[str, set] = {}
    for name in own:
        for function, where in defined_functions(name):
            by_name.setdefault(function, set()).add(where)
    for record, test in zip(open_sites, tests, strict=True):
        source = getattr(record, "_source", None)
        # The site's own function, and each function of the program's own code on the way to
        # it (a wrapper's callers: optimize(loss, retain_graph=True) in a loop)
        # (a site in an installed package: its package's functions on the way too, rev34a
        # K3: trainlib/loop.py's aux(loss).backward() that this run did not take)
        kinds = (1, 2) if source and _kind(source) == 1 else (2,)
        # (a relative code file name is the file it is already: _hooks.Session.file_of)
        # (up to the test runner's frame: what called the runner, a test of pytest's own
        # plugin that runs pytest in its process, is not the program's code)
        frames = {frame for shape in getattr(record, "_shapes", ())
                  for frame in _up_to_runner(session.walked.get(shape, ()), stop)
                  if frame[0] == source or _kind(frame[0]) in kinds}
        if source:
            frames.add((source, record.line, None))
        found = []
        # what ran since the site first ran: a call that ran only before it (a warm-up's
        # aux backward()) is no sign that it runs after it (rev44a G3)
        ran_lines, ran_places, ran_unpacking = _ran_since(
            session, getattr(record, "_first_call", 0))
        for name, line, first in sorted(frames, key=lambda f: (f[0], f[1], f[2] or 0)):
            shown = session.display_path(name)
            found += [f"{shown}:{n}" for n in untaken_calls(name, line, ran_lines,
                                                           session.block, extra,
                                                           ran_places, ran_unpacking, first)]
        # Searched whole, as each of their calls may run after the site: the functions that
        # started a pass after the site first ran, in another invocation than those on the
        # way to it (their frames were on that pass's stack: a helper reached by any name,
        # rev43d H1, rev44b AL, INJ, rev45b K1, K3; the site's own helper called again,
        # rev44b SK), and those on the way that a loop of a caller's calls again (rev45b K2)
        # (an installed package's too: a helper in a pip-installed package that ran a pass
        # after the site, rev46a F3)
        after = {(name, first) for name, first in _called_after(session, record, stop)
                 if name == source or _kind(name) in (1, 2)
                 and not _realpath(name).startswith(runner or "\0")}
        after.update(where for name in session.handed | set(test[2])
                     if not name.startswith("test") for where in by_name.get(name, ()))
        found += [f"{session.display_path(name)}:{n}" for name, n in untaken_in_functions(
            after, ran_lines, extra, ran_places, ran_unpacking)]
        # A test case's other tests, where they run in this audit too (not one audit per test:
        # python -m retaincheck -m unittest): what they ran counts whenever it ran, before
        # the site too, as each test runs once; an untaken walk in one may be of a graph the
        # test case keeps (rev47a R2)
        others = test[1]
        if others and not session.per_test:
            every = _ran_since(session, 0)
            found += [f"{session.display_path(name)}:{n}" for name, n in untaken_in_functions(
                {f for f in others if _kind(f[0]) in (1, 2)}, every[0], extra, every[1],
                every[2])]
        record.unseen_calls = sorted(set(found), key=_by_file_and_line)
        if not found:
            # (in a loop: told only where _loopwatch saw it run in two iterations of one run
            # of its loop; what the code keeps is read as well, whatever the watch saw)
            if _kept_past_its_function(session, record):
                record._outlived = True
            unproven = _in_a_loop(session, record, stop)
            # (the reason said: its loop not seen twice, or a graph the code keeps from
            # before the loop though it was, rev58b A3; or a later run that walked a graph
            # built before an earlier run, _hooks.Session.fired, rev60b A1)
            record._held_in_loop = not unproven and bool(
                _loops_over_a_graph(session, record, stop) or (
                    getattr(record, "_walks_older", False)
                    or getattr(record, "_outlived", False)) and _looped(session, record, stop))
            record.ran_once_in_a_loop = unproven or record._held_in_loop


_RUNNERS = ("_pytest", "pluggy", "xdist", "execnet", "unittest.case", "unittest.suite",
            "unittest.runner", "unittest.main", "unittest.async_case", "unittest.loader")
_STOPS: dict = {}


def runner_stop(session: Session) -> tuple[tuple, tuple]:
    """(the test runner's folders, ``_up_to_runner``'s ``stop``) for this process now (kept
    per set of those modules: their files' real paths cost a stat per folder)."""
    key = (tuple(map(sys.modules.get, _RUNNERS)), frozenset(session.runner_dirs))
    found = _STOPS.get(key)
    if found is None:
        found = _STOPS[key] = _runner_stop(key[0], key[1])
    return found


def _runner_stop(modules: tuple, plugins: frozenset) -> tuple[tuple, tuple]:
    from ._reads import _realpath

    def folder(module):
        return os.path.dirname(_realpath(module.__file__)) + os.sep

    present = [module if isinstance(getattr(module, "__file__", None), str) else None
               for module in modules]
    # (not the test runner's own code, which calls the hooks by their names: a conftest's
    # hook that walks made pytest's call of that hook an untaken walker)
    runner = tuple(folder(module) for module in present[:2] if module is not None)
    # (unittest's runner, not its mock.py: a step wrapped in Mock(wraps=step) and called in
    # the program's loop, rev50b M1)
    stop = runner + tuple(folder(module) for module in present[2:4] if module is not None) + (
        tuple(_realpath(module.__file__) for module in present[4:] if module is not None))
    # (and an installed pytest plugin's hooks and test items' methods: not the functions it
    # hands the tests, a fixture's step loop, rev51b P1)
    return runner, (stop, plugins)


def _up_to_runner(lines, stop: tuple):
    """The frames of a stack shape (innermost first) up to the test runner's first one.
    ``stop``: (the runner's folders and files, the files of installed pytest plugins, whose
    hooks, ``pytest_*``, and test items' methods run the tests)."""
    from ._reads import _realpath, defined_functions

    prefixes, plugins = stop if len(stop) == 2 and isinstance(stop[1], frozenset) else (
        stop, frozenset())
    for frame in lines:
        if not frame[0].startswith("<"):
            real = _realpath(frame[0])
            if prefixes and real.startswith(prefixes):
                return
            if real in plugins and any(
                    where == (frame[0], frame[2]) and (name.startswith("pytest_") or name in (
                        "runtest", "setup", "teardown", "collect"))
                    for name, where in defined_functions(frame[0])):
                return
        yield frame


def _loops_over_a_graph(session: Session, record, stop: tuple = ()) -> bool:
    """Whether a loop on the way to the site walks, each iteration, a graph made before it:
    the site's own loop, where what it walks (`loss` of `loss.backward(...)`) is not assigned
    in the loop's body (rev50a M1: sizes in an outer loop, a repeat count in the inner); a
    caller's loop, where a call of it passes a tensor with a graph (``_hooks._graph_locals``)
    by a name its body does not assign (rev50a M2: `for _ in range(iters): bwd(loss)`, after
    a warm-up on another graph). Such a loop, run once per graph, walks one again with more
    iterations. Frames of the program's files and installed packages', up to a module's
    code (what runs it again makes graphs of its own)."""
    from ._reads import _kind, graph_roots, in_a_loop, loop_over_names

    for shape, names in getattr(record, "_graph_names", {}).items():
        roots = graph_roots  # (the site's line: in its frame, or in the code around the
        # comprehension it is in, which Python before 3.12 runs as a function of its own)
        # (up to the test runner's frames: its loops run each test once, rev53 own check:
        # a test class instance an item holds has a graph on it)
        for j, ((name, line, first), held) in enumerate(zip(
                _up_to_runner(session.walked.get(shape, ()), stop), names, strict=False)):
            if not name.startswith("<") and _kind(name) in (1, 2) and in_a_loop(
                    name, line, first) and loop_over_names(name, line, first, roots, held):
                return True
            if shape[2 * j].co_name not in ("<listcomp>", "<setcomp>", "<dictcomp>",
                                            "<genexpr>"):
                roots = None
    return False


def _kept_past_its_function(session: Session, record) -> bool:
    """Whether a graph the site kept is alive at the audit's end though the function that ran
    its loop has returned (not the audit's block, not a module's code, whose names live on):
    something outside that function holds it, for a later run of it to walk (a cache the
    loop's last iteration filled, read by the next step, rev61b A1)."""
    if record not in getattr(session, "kept_alive", ()):
        return False
    loops = getattr(record, "_loops", {})
    for shape in getattr(record, "_shapes", ()):
        j = loops.get(shape, (None, None, False))[0]
        if j is not None and 2 * j + 2 < len(shape) and shape[2 * j].co_name != "<module>":
            return True
    return False


def _looped(session: Session, record, stop: tuple) -> set:
    """The site's stack shapes that ran it in a loop, watched or not (a loop no watch can
    see, ``_hooks.Session.hidden_loop``, or one ``loop_at`` finds)."""
    loops = getattr(record, "_loops", {})
    return {shape for shape in getattr(record, "_shapes", ()) if loops.get(
        shape, (None, None, False))[2] or loop_at(session, shape, stop) is not None}


def _in_a_loop(session: Session, record, stop: tuple) -> bool:
    """Whether one of the site's runs was in a loop (``loop_at``): run once per run of the
    loop, it may run again with more iterations, on the graph it kept, or on part of it (rev49a
    L1, rev50a M3, rev50b M1, M4), unless ``_loopwatch`` saw that loop run it in two
    iterations of one run of the loop on the same stack shape (each way on its own: rev58a
    A1, rev58b A2)."""
    return bool(_looped(session, record, stop) - getattr(record, "_shapes_iterated", set()))


_OURS: list = []  # this package's folder and torch's (loop_at)


def loop_at(session: Session, shape, stop: tuple) -> int | None:
    """The index of the frame, in a stack shape (innermost first), that runs the innermost
    loop around the site: of the program's, an installed package's, the standard library's
    (``sched.scheduler.run``); -1 where a loop may run it that no frame here shows (code
    compiled from a string, ``timeit``'s; a thread's target: a loop may start one per
    iteration; a loop that runs a module's code again, runpy, importlib.reload, exec); None
    for none. Not the test runner's loops (pytest's, unittest's), taken to call each test
    once."""
    from ._reads import _kind, _realpath, called_by_name, in_a_loop, loops_at

    lines = session.walked.get(shape, ())
    if not _OURS:
        _OURS.append(os.path.dirname(_realpath(__file__)) + os.sep)
        _OURS.append(os.path.dirname(_realpath(sys.modules["torch"].__file__)) + os.sep)
    here, torch_dir = _OURS
    def looping(name: str, frame, by_code: int | None = None) -> bool:
        """A loop of the program's, an installed package's or the standard library's (not
        this package's or torch's) runs this frame's line; ``by_code`` (the frame's index): a
        loop of the code that ran (``loops_at``), which its file's text may not show (code
        compiled from another text under the file's name)."""
        if name.startswith("<") or not (_kind(name) in (1, 2) or (
                not _realpath(name).startswith((here, torch_dir)))):
            return False
        if by_code is not None:
            return loops_at(shape[2 * by_code], shape[2 * by_code + 1])
        return in_a_loop(*frame)

    def string_loop(name: str, j: int) -> bool:
        """Code compiled from a string (no text to read; not a frozen module's, runpy's) whose
        own loop holds the frame's instruction: its top-level code's too (rev70a A1:
        exec("for _ in range(n):\n    step()\n") in the script)."""
        return name.startswith("<") and not name.startswith("<frozen") and loops_at(
            shape[2 * j], shape[2 * j + 1])

    past_module = False
    for j, frame in enumerate(_up_to_runner(lines, stop)):
        name = frame[0]
        if past_module:
            # (what runs a module's code, runpy, importlib.reload, exec of a file's text, in a
            # loop: each run makes the module's code anew, so no way to the site repeats, and
            # the module's code may walk a graph its runner made before the loop, rev65a A1,
            # A3: a loop no watch can prove)
            if looping(name, frame) or string_loop(name, j) or looping(name, frame, j):
                return -1
            continue
        if string_loop(name, j):
            return -1  # (a loop no watch can see: its lines cannot be read)
        if name.startswith("<"):  # (code from a string; not a frozen module's, runpy's)
            if not name.startswith(("<frozen", "<stdin>")) and j and (
                    shape[2 * j - 2].co_name != "<module>") and not called_by_name(
                    name, shape[2 * j], shape[2 * j + 1], shape[2 * j - 2].co_name):
                return -1
        elif looping(name, frame) or _kind(name) in (1, 2) and shape[2 * j].co_name in (
                "<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"):
            # (the program's loop, or an installed package's: what it walks may have been
            # made before the loop, in part, h of `(h * i).sum()`: rev50b M1; a comprehension
            # that runs in a frame of its own, a generator expression's, before 3.12 all)
            return j
        elif looping(name, frame, by_code=j):
            return -1  # (a loop the code has that its file's text does not show: not watched)
        elif _kind(name) == 0 and not _realpath(name).startswith((here, torch_dir)) and (
                shape[2 * j].co_name == "run" and os.path.basename(name) == "threading.py"):
            return -1  # (a thread's target: a loop may start one per iteration, rev50a M3)
        if shape[2 * j].co_name == "<module>":
            # (a module's code: what runs it again, an import, runpy, a launcher's loop over
            # experiments, may hand it a graph made before; only its runners' loops are
            # looked for from here on)
            past_module = True
    # The test runner's frame that called the program's outermost one (or the one that called
    # that through the runner's _call* helpers): where it did so in a loop of its own, the
    # loop runs functions the test handed it, as many as it handed (pytest's finalizers,
    # request.addfinalizer; unittest's cleanups, addCleanup: rev69b A1), not the test once:
    # a loop no watch here can prove. Pluggy's loop over a hook's implementations too: it
    # calls each once, but two instances of one class registered as plugins are two
    # implementations of one code (rev70b A1: a conftest's hook class registered K times).
    # (pytest's, pluggy's and unittest's own code: not a plugin's hook, whose retries are the
    # documented repeats of a test)
    prefixes = stop[0] if len(stop) == 2 and isinstance(stop[1], frozenset) else stop
    first = sum(1 for _ in _up_to_runner(lines, stop))
    for k in range(first, min(first + 3, len(lines))):
        name = lines[k][0]
        if name.startswith("<") or not (prefixes and _realpath(name).startswith(prefixes)):
            break
        if in_a_loop(*lines[k]):
            return -1
        if not shape[2 * k].co_name.startswith("_call"):
            break
    return None


def _ran_since(session: Session, first_call: int):
    """The calls that ran (``_reads.untaken_calls``'s ``lines_ran``, ``places`` and
    ``unpacking``) on the stacks of the passes from the ``first_call``-th on."""
    lines, places, unpacking = set(), {}, set()
    for shape, last in session.shape_last.items():
        if last >= first_call:
            shape_lines, shape_places, shape_unpacking = session.shape_ran[shape]
            lines.update(shape_lines)
            for name, at in shape_places:
                places.setdefault(name, set()).add(at)
            unpacking.update(shape_unpacking)
    return lines, places, unpacking


def _called_after(session: Session, record, stop: tuple = ()) -> set[tuple[str, int]]:
    """``(file, first line)`` of the functions whose code may run again after the record's
    site first ran (see ``_mark_untaken_calls``). An invocation is told by its code and the
    frames outside it, each at its instruction: they stay as they are while it runs, so a
    pass whose stack holds a function under other outer frames than the site's first run did
    ran it in another invocation."""
    from ._reads import _realpath, called_by_name, in_a_loop

    first_shape = getattr(record, "_first_shape", None)
    if first_shape is None:
        return set()
    # (each frame's code and the frames outside it; not its own instruction, which moves)
    on_the_way = {first_shape[i:i + 1] + first_shape[i + 2:]
                  for i in range(0, len(first_shape), 2)}
    found = set()
    for shape, last in session.shape_last.items():
        if last > record._first_call:  # (the frames up to the test runner's: _up_to_runner)
            for k, (name, _, first) in enumerate(_up_to_runner(session.walked[shape], stop)):
                if shape[2 * k:2 * k + 1] + shape[2 * k + 2:] not in on_the_way:
                    found.add((name, first))
    here = os.path.dirname(_realpath(__file__)) + os.sep
    for shape in record._shapes:  # a caller's loop calls those inside it again
        lines = list(_up_to_runner(session.walked[shape], stop))
        # (or a call through code with no frame, map(), reduce(), in any code but this
        # audit's: an installed trainer's list(map(step, batches)), torch's tree_map (rev47a
        # N1, N2), code compiled from a string (rev48a E1: an exec'd driver, whose text is
        # not read: not shown to call by name); not exec()'s or an import's of a module's
        # code)
        looping = max((j for j, frame in enumerate(lines) if in_a_loop(*frame) or (
            j and not _realpath(frame[0]).startswith(here)
            and shape[2 * j - 2].co_name != "<module>"
            and not called_by_name(frame[0], shape[2 * j], shape[2 * j + 1],
                                   shape[2 * j - 2].co_name))), default=0)
        found.update((name, first) for name, _, first in lines[:looping])
    # what a test runner runs besides (the pytest plugin; a unittest test case's setUp and
    # test method, _hooks._unittest_code): not the code on the way
    way = {(name, first) for name, _, first in session.walked.get(first_shape, ())}
    found.update(session.code_after - way)
    found.update(set((getattr(record, "_test_code", None) or ((),))[0]) - way)
    return found


def _installed_walkers(files) -> frozenset[str]:
    """The names by which the program's own ``files`` call functions of installed packages
    that may start a backward pass: a pip-installed helper called after a site, whose walk
    did not run this time and started no pass (rev47a N3, rev47b I1:
    ``second_order_penalty(loss, params, weight)`` returning at once when the weight is 0).
    Found from the files' imports, each module as this process has it: ``from gradtools import
    penalty as gp`` gives ``=gp`` (a bare call, not ``x.gp()``), ``import gradtools as gt``
    gives ``gt.penalty`` (not ``opt.penalty()``: rev48a K1, rev48b C1), a class's methods
    their own names (``GradPenalty().apply``: rev48a I1, rev48b I2); a decorated function
    as the function it wraps (``@torch.enable_grad()``: rev48a I3). Only the files of the
    functions whose code names a walk, or calls one that does, are read (``_may_walk``: a
    helper that hands on to another module, rev48a I2)."""
    import ast
    import inspect

    from ._reads import _kind, _tree, project_walkers

    named: dict[str, set] = {}  # an installed file -> (name called, function's own name)
    reached: set[str] = set()  # the files of the functions the walk was found through

    def note(name, value):
        try:
            function = inspect.unwrap(getattr(value, "__func__", value))
        except ValueError:
            return
        code = getattr(function, "__code__", None)
        if not isinstance(code, _CODE) or _kind(code.co_filename) != 1:
            return
        walks = _may_walk(function)
        if walks:
            named.setdefault(code.co_filename, set()).add((name, code.co_name))
            reached.update(walks)

    def note_class(cls):
        for klass in getattr(cls, "__mro__", ())[:-1]:
            if _kind(getattr(sys.modules.get(klass.__module__), "__file__", None) or "<") == 1:
                for attr, value in list(vars(klass).items()):
                    note(attr, value)

    def note_module(module, bound):
        if _kind(_own_dict(module).get("__file__") or "<") != 1:
            return
        for attr, value in list(vars(module).items()):
            if isinstance(value, type):
                note_class(value)
            else:  # (`import a.b`: called as a.b.f(), by its last name)
                note(f"{bound}.{attr}" if "." not in bound else attr, value)

    for tree in filter(None, map(_tree, sorted(files))):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                module = sys.modules.get(node.module)
                if module is not None and [a.name for a in node.names] == ["*"]:
                    # (`from gradkit import *`: each public name, bare, rev49a I5)
                    public = getattr(module, "__all__", None) or [
                        n for n in vars(module) if not n.startswith("_")]
                    for name in list(public):
                        value = getattr(module, name, None) if isinstance(name, str) else None
                        if isinstance(value, type):
                            note_class(value)
                        elif value is not None and not isinstance(value, type(sys)):
                            note("=" + name, value)
                    continue
                for alias in node.names:
                    value = getattr(module, alias.name, None) if module is not None else None
                    bound = alias.asname or alias.name
                    if isinstance(value, type(sys)):
                        note_module(value, bound)
                    elif isinstance(value, type):
                        note_class(value)
                    elif value is not None:
                        note("=" + bound, value)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    module = sys.modules.get(alias.name)
                    if module is not None:
                        note_module(module, alias.asname or alias.name)

    if not named:
        return frozenset()
    walkers = project_walkers(sorted(set(named) | reached))
    return frozenset(name for f in named for name, defined in named[f] if defined in walkers)


_WALK_WORDS = frozenset({"backward", "grad", "autograd", "run_backward"})
_CODE = type(_plain_lines.__code__)
_MAY_WALK: dict = {}  # (code, depth) -> files (installed code does not change in a run)


def _may_walk(function, depth: int = 2) -> frozenset[str]:
    """The files of a function (and of those it calls) when its code (its nested code too)
    names a backward pass (``backward``, ``grad``, ``autograd``, a ``..._backward``), or calls
    a function of its module's globals, or of a module there (``_impl.walk_again``), that
    does, ``depth`` calls deep; empty if not. A cheap test before a file is parsed
    (``numpy``'s hundreds of functions, bound by ``import numpy as np``, name none)."""
    code = function.__code__
    key = (code, depth)
    known = _MAY_WALK.get(key)
    if known is not None:
        return known
    _MAY_WALK[key] = frozenset()  # (a function that calls itself)
    todo, names = [code], set()
    while todo:
        inner = todo.pop()
        names.update(inner.co_names)
        todo.extend(k for k in inner.co_consts if hasattr(k, "co_names"))
    found: set[str] = set()
    if depth > 0:  # (each one it calls that walks: its file holds the walk, _impl.py)
        scope = getattr(function, "__globals__", {})
        for name in names:
            value = scope.get(name)
            called = [value] if isinstance(getattr(value, "__code__", None), _CODE) else [
                vars(value).get(n) for n in names] if isinstance(value, type(sys)) else []
            for other in called:
                if other is not function and isinstance(getattr(other, "__code__", None), _CODE):
                    found |= _may_walk(other, depth - 1)
    if found or names & _WALK_WORDS or any(n.endswith("_backward") for n in names):
        found.add(code.co_filename)
    _MAY_WALK[key] = frozenset(found)
    return _MAY_WALK[key]


def _named_from(files: set[str], modules=()) -> set[str]:
    """The user's own files that the modules of ``files`` name in their globals (a module
    bound by ``import helpers as h``, a function or class bound by ``from helpers import
    walk``), and those that these name in turn. ``modules``: modules besides those of
    ``sys.modules`` (the conftest modules pytest keeps under no name of their own there, as
    two folders' conftest.py cannot both be "conftest")."""
    from ._reads import _kind

    def file_key(name: str):
        # a file by its device and inode: one stat, where realpath() costs a stat per folder
        # of the path, for each of the thousands of modules a torch program has loaded
        # (100 ms an audit); a file with none (a module in a zip) by its resolved name
        try:
            found = os.stat(name)
        except OSError:
            return os.path.realpath(name)
        except ValueError:  # (a NUL in the name, rev78a D2)
            return name
        return (found.st_dev, found.st_ino)

    # (read from the modules' and the values' own dicts, by their types: no attribute read
    # through a class of the program's, and no lazy module's import run, rev77a A1)
    by_file = {}
    for module in [*modules, *list(sys.modules.values())]:
        name = _own_dict(module).get("__file__")
        if type(name) is str and name.endswith(".py"):
            by_file.setdefault(file_key(name), module)
    here = os.path.dirname(os.path.realpath(__file__)) + os.sep
    found: set[str] = set()
    todo = [os.path.realpath(f) for f in files if usable_name(f)]  # (rev78a D2, rev79a E3)
    while todo:
        module = by_file.get(file_key(todo.pop()))
        for value in list(_own_dict(module).values()) if module is not None else ():
            kind, name = type(value), None
            if kind in (types.MethodType, staticmethod, classmethod):
                value, kind = value.__func__, type(value.__func__)
            if issubclass(kind, types.ModuleType):
                name = _own_dict(value).get("__file__")
            elif kind is types.FunctionType:
                name = value.__code__.co_filename
            elif issubclass(kind, type):  # (a class with no __module__, or an odd one: rev79a E1)
                defined = _class_module(value)
                name = _own_dict(sys.modules.get(defined) if defined else None).get("__file__")
            if type(name) is not str or not name.endswith(".py") or _kind(name) != 2:
                continue
            real = os.path.realpath(name)
            if real.startswith(here):
                continue  # retaincheck's own files (an editable install is not site-packages)
            if real not in found and real not in files:
                found.add(real)
                todo.append(real)
    return found


def _mark_forked_children(session: Session) -> None:
    """A reuse in a child process forked during the audit makes its site needed; a forked
    child still running at the end may yet reuse any graph: each open site is then "could not
    tell: kept"."""
    if session.in_child:
        return  # a forked child reports only what it saw itself
    from ._messages import message

    reused, running = session.children()
    for record in session.report.calls:
        if (record.file, record.line) in reused:
            record.needed = True
            record.reused_executions = max(record.reused_executions, 1)
            if message("by_child") not in record.reused_by:
                record.reused_by.append(message("by_child"))  # English, as the JSON is
    for record in session.report.calls:
        if running and not record.needed and not record.history_leak:
            record.running_children = list(running)


def _by_file_and_line(where: str):
    """The program's own files first (shown relative to its folder), then by file and line."""
    name, _, line = where.rpartition(":")
    return (os.path.isabs(name), name, int(line))
