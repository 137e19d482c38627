"""Reads of saved tensors that no backward pass makes: ``grad_fn._saved_result`` and the like.

A retained graph is used not only by a later ``backward``/``grad`` (which the node pre-hooks
see) but by any unpack of a saved tensor. Outside a backward pass Python reaches them through
the getters of the generated node types (``_saved_<name>`` unpacks; ``_raw_saved_<name>``
gives the ``SavedTensor``, whose ``unpack()`` and ``register_hooks()`` raise once it is freed:
``SavedVariable::register_hooks``),
through a custom Function's ``ctx.saved_tensors`` / ``saved_variables``, and by calling a node
directly (``y.grad_fn(g)``: ``THPCppFunction_call`` runs ``Node::operator()``, which applies the
node without the engine, so no pre-hook runs). Every one ends in
``SavedVariable::unpack`` (``torch/csrc/autograd/saved_variable.cpp``), which raises
``Trying to backward through the graph a second time (or directly access saved tensors after
they have already been freed)`` once ``retain_graph=False`` freed the tensor.

None of these calls can be hooked: the node types are static C types whose attributes cannot be
replaced (``_initFunctionPyTypeObject`` in ``torch/csrc/autograd/python_cpp_function.cpp``
sets no heap-type flag), and a default
``saved_tensors_hooks`` pair, the one thing that sees every unpack, changes the program it
watches: with hooks ``SavedVariable::unpack`` skips its version check ("Only check version
counter in the case without hooks"), so an in-place error the program would raise becomes a
silent wrong gradient. So the code is read instead: the source of every file the audited
program ran is searched for these names: the program's file, the files on the stack of every
retaining call, every module of the user's own project in ``sys.modules`` (also one a test
imported before the audit began), and the installed modules imported while the audit ran
(under ``python -m retaincheck`` that is every module the script imports; torch and the
standard library are left out).
Code with no file (``exec``/``eval`` of a string, ``compile()``) is read from CPython's audit
events instead (``_hooks._audit_event``): a string compiled is searched the same way, and code
run whose source the audit did not see counts as a read.
Where one is found, no site can be proven not needed, and those that nothing else reused are
"could not tell: kept". The search errs toward a read: a call of any name bound from
``grad_fn``/``next_functions`` (or from a value built from one: a stack of nodes), any
``.__call__`` on one, and any string that could name a saved-tensor attribute
(``getattr(n, "saved_tensors")``) count. Only a custom Function's own
``backward``/``jvp``/``vjp`` (a method of a class whose base is named ``...Function``, or that
has ``setup_context``) reading ``ctx.saved_tensors`` runs inside a backward pass, where the
pre-hooks see it, and does not count.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import os
import re
import sys
import sysconfig
import tokenize

# (plain substrings, each found by `in`: a regex alternation of them took 80 ms over the
# 480 installed modules that torch's first optimizer imports into an audited run)
_PREFILTER = ("_saved", "saved_tensors", "saved_variables", "grad_fn", "next_functions",
              "get_gradient_edge", "GradientEdge")  # (and _get_grad_fn_or_grad_acc)
# In the program's own files (not installed packages, to keep the search cheap) a name may also
# be put together from pieces: getattr(node, "_sav" + "ed_result").
_PREFILTER_OWN = (*_PREFILTER, "getattr", "attrgetter")
# Public ways to a node other than grad_fn/next_functions: torch/autograd/graph.py,
# get_gradient_edge (and the GradientEdge it returns, whose .node is the C++ node) and
# _get_grad_fn_or_grad_acc.
_NODE_SOURCES = frozenset({"get_gradient_edge", "GradientEdge", "_get_grad_fn_or_grad_acc"})
_CTX_NAMES = frozenset({"saved_tensors", "saved_variables", "_raw_saved_tensors"})
_OWN_BACKWARD = frozenset({"backward", "jvp", "vjp", "backward_extended", "_backward"})
_SAVED_TEXT = ("_saved", "saved_tensors", "saved_variables")
# A string that may name an attribute or a dotted path to one (getattr(n, "saved_tensors"),
# attrgetter("grad_fn._saved_self"), "_saved_" + name); a file name or a sentence is not one.
_ATTRIBUTE_TEXT = re.compile(r"[A-Za-z0-9_.]*(?<!\.py)")
_NODE_ATTRS = frozenset({"grad_fn", "next_functions"})
_GETTERS = frozenset({"getattr", "attrgetter"})
_names: frozenset[str] | None = None
_cache: dict[tuple[str, float, int], tuple[int, ...]] = {}


def saved_attribute_names() -> frozenset[str]:
    """Every ``_saved_<name>`` and ``_raw_saved_<name>`` attribute of torch's node types."""
    global _names
    if _names is None:
        import torch

        found = set()
        functions = torch._C._functions
        for attr in dir(functions):
            node_type = getattr(functions, attr, None)
            if isinstance(node_type, type):
                found.update(a for a in dir(node_type) if a.startswith(("_saved_", "_raw_saved_")))
        _names = frozenset(found)
    return _names


def _is_function_class(node: ast.ClassDef) -> bool:
    """A ``torch.autograd.Function`` subclass (a base named ``...Function``) or a class with
    ``setup_context``: only its ``backward`` runs inside a backward pass."""
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if name.endswith("Function"):
            return True
    return any(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and
               b.name == "setup_context" for b in node.body)


def _bound_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _node_names(tree: ast.AST) -> set[str]:
    """Names that may hold a graph node: bound (anywhere in the file) from an expression that
    reads ``grad_fn``/``next_functions`` or such a name (``fn = y.grad_fn``,
    ``stack = [(loss.grad_fn, g)]``, ``n, g = stack.pop()``, ``for nxt, _ in
    n.next_functions``), and the parameters of a function of this file called with one.
    Conservative: any doubt makes a call of the name count as a read."""
    bindings: list[tuple[list[str], ast.AST]] = []
    functions: dict[str, list[str]] = {}
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            bindings.append(([n for t in node.targets for n in _bound_names(t)], node.value))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value:
            bindings.append((_bound_names(node.target), node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            bindings.append((_bound_names(node.target), node.iter))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            bindings.append((_bound_names(node.optional_vars), node.context_expr))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args,
                                      *node.args.kwonlyargs)]
            if not isinstance(node, ast.Lambda):
                functions.setdefault(node.name, []).extend(params)
        elif isinstance(node, ast.Call):
            calls.append(node)
    tainted: set[str] = set()

    def reads_node(expr: ast.AST) -> bool:
        return any(
            (isinstance(n, ast.Attribute) and n.attr in _NODE_ATTRS)
            or (isinstance(n, ast.Name) and n.id in tainted)
            or _names_a_node(n)
            for n in ast.walk(expr)
        )

    while True:
        before = len(tainted)
        for names, value in bindings:
            if not set(names) <= tainted and reads_node(value):
                tainted.update(names)
        for call in calls:
            if isinstance(call.func, ast.Name) and call.func.id in functions and any(
                reads_node(a) for a in (*call.args, *(k.value for k in call.keywords))
            ):
                tainted.update(functions[call.func.id])
        if len(tainted) == before:
            return tainted


_consts: dict[str, ast.AST] = {}  # the file's module-level names bound once (lines_reading_...)
_MAX_TEXTS = 64


def _texts(expr: ast.AST, depth: int = 0) -> frozenset[str] | None:
    """Every text a string put together from literal pieces can have: ``"_sav" + "ed_result"``,
    ``f"{'_saved'}_self"``, ``"".join([...])``, ``"%sed_self" % "_sav"``,
    ``"{}{}".format(...)``, ``a if c else b`` (both), a module-level name bound once to one of
    these (``PRE = "_sav"``); None when a piece is not literal."""
    if depth > 20:
        return None
    def sub(e):
        return _texts(e, depth + 1)

    def products(parts):
        """Every choice of one text per part, as tuples; None when too many or unknown."""
        if any(p is None for p in parts):
            return None
        out = [()]
        for part in parts:
            out = [(*a, b) for a in out for b in part]
            if len(out) > _MAX_TEXTS:
                return None
        return out

    def combine(parts, join):
        choices = products(parts)
        return None if choices is None else frozenset(join(c) for c in choices)

    if isinstance(expr, ast.Constant):
        return frozenset({expr.value}) if isinstance(expr.value, str) else None
    if isinstance(expr, ast.Name) and expr.id in _consts:
        return sub(_consts[expr.id])
    if isinstance(expr, ast.IfExp):
        a, b = sub(expr.body), sub(expr.orelse)
        return None if a is None or b is None else a | b
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return combine([sub(expr.left), sub(expr.right)], "".join)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
        args = expr.right.elts if isinstance(expr.right, ast.Tuple) else [expr.right]
        choices = products([sub(expr.left), *(sub(a) for a in args)])
        if choices is None:
            return None
        try:
            return frozenset(c[0] % c[1:] for c in choices)
        except (TypeError, ValueError):
            return None
    if isinstance(expr, ast.JoinedStr):
        return combine([sub(v.value if isinstance(v, ast.FormattedValue) else v)
                        for v in expr.values], "".join)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.keywords:
        if (expr.func.attr == "join" and len(expr.args) == 1
                and isinstance(expr.args[0], (ast.List, ast.Tuple))):
            choices = products([sub(expr.func.value), *(sub(e) for e in expr.args[0].elts)])
            return None if choices is None else frozenset(c[0].join(c[1:]) for c in choices)
        if expr.func.attr == "format":
            choices = products([sub(expr.func.value), *(sub(a) for a in expr.args)])
            if choices is None:
                return None
            try:
                return frozenset(c[0].format(*c[1:]) for c in choices)
            except (IndexError, KeyError, ValueError):
                return None
    return None


def _module_constants(tree: ast.AST) -> dict[str, ast.AST]:
    """Names bound exactly once, at the top level of the file, by a plain assignment."""
    seen: dict[str, list] = {}
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = [t for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target,
                                                                            ast.Name):
            targets = [node.target]
        for t in targets:
            seen.setdefault(t.id, []).append(node)
    top = {id(n) for n in getattr(tree, "body", [])}
    return {name: nodes[0].value for name, nodes in seen.items()
            if len(nodes) == 1 and id(nodes[0]) in top and isinstance(nodes[0], ast.Assign)}


def _node_sources(tree: ast.AST) -> frozenset[str]:
    """``_NODE_SOURCES`` and the names they are imported under in this file
    (``from torch.autograd.graph import get_gradient_edge as edge_of``)."""
    names = set(_NODE_SOURCES)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname for a in node.names if a.asname and a.name in _NODE_SOURCES)
        elif (isinstance(node, ast.Assign) and isinstance(node.value, (ast.Attribute, ast.Name))
              and (node.value.attr if isinstance(node.value, ast.Attribute)
                   else node.value.id) in _NODE_SOURCES):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(names)


_sources: frozenset[str] = _NODE_SOURCES  # of the file being searched (lines_reading_...)


def _names_a_node(node: ast.AST) -> bool:
    """``get_gradient_edge(t)`` and the like, or ``getattr(t, "grad" + "_fn")``: a value
    that is (or holds) a graph node."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in _sources:
        return True
    if isinstance(func, ast.Call) and _names_a_node(func):
        return True  # getattr(graph, "get_gradient_edge")(y)
    if name in _GETTERS:
        for arg in node.args[1:2] if name == "getattr" else node.args:
            texts = _texts(arg)
            if texts is not None and any(part in _NODE_ATTRS or part in _NODE_SOURCES
                                         for text in texts for part in text.split(".")):
                return True
    return False


def lines_reading_saved_tensors(source: str, own: bool = True) -> tuple[int, ...]:
    """Line numbers where the code reads a saved tensor outside a backward pass; ``own``: the
    program's own code, where names put together from pieces are looked for too."""
    if not any(text in source for text in (_PREFILTER_OWN if own else _PREFILTER)):
        return ()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    names = saved_attribute_names()
    global _sources, _consts
    _sources = _node_sources(tree)
    _consts = _module_constants(tree)
    node_names = _node_names(tree)
    docstrings = {
        id(body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and (body := n.body) and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
    }
    found: set[int] = set()

    def visit(node, in_backward: bool, in_function_class: bool):
        for child in ast.iter_child_nodes(node):
            inside, function_class = in_backward, False
            if isinstance(child, ast.ClassDef):
                function_class = _is_function_class(child)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = in_function_class and child.name in _OWN_BACKWARD
            if isinstance(child, ast.Attribute):
                attr = child.attr
                if attr in names or attr.startswith("_raw_saved_"):
                    found.add(child.lineno)
                elif attr in _CTX_NAMES and not in_backward:
                    found.add(child.lineno)
            elif isinstance(child, ast.Call) and _calls_a_node(child.func, node_names):
                found.add(child.lineno)  # y.grad_fn(g): Node::operator() unpacks, no pre-hook
            elif (isinstance(child, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call,
                                     ast.IfExp, ast.Name))
                  and id(child) not in docstrings and not in_backward
                  and (texts := _texts(child)) is not None):
                if any(text in names or (_ATTRIBUTE_TEXT.fullmatch(text) and
                                         any(t in text for t in _SAVED_TEXT))
                       for text in texts):
                    found.add(child.lineno)  # getattr(node, "_saved_" + name) and the like
            visit(child, inside, function_class)

    visit(tree, False, False)
    return tuple(sorted(found))


def _calls_a_node(func: ast.AST, node_names: set[str] = frozenset()) -> bool:
    """A node called directly: ``y.grad_fn(...)``, ``y.grad_fn.next_functions[0][0](...)``,
    ``fn(...)`` or ``nodes[0](...)`` for a name that may hold a node, ``x.__call__(...)`` on
    one."""
    if isinstance(func, ast.Attribute) and func.attr == "grad_fn":
        return True
    if isinstance(func, ast.Attribute) and func.attr == "node" and any(
        _names_a_node(n) or (isinstance(n, ast.Name) and n.id in node_names)
        for n in ast.walk(func.value)
    ):
        return True  # get_gradient_edge(y).node(g), edge.node(g): the node itself
    if isinstance(func, ast.Attribute) and func.attr != "__call__":
        return False  # a method of the value (stack.pop(), node.name()): not the node itself
    return any(
        (isinstance(n, ast.Attribute) and n.attr in _NODE_ATTRS)
        or (isinstance(n, ast.Name) and n.id in node_names)
        or _names_a_node(n)
        for n in ast.walk(func)
    )


def _lines_in_file(path: str, fixed: bool, module=None) -> tuple[int, ...]:
    """The reads in a file; ``fixed``: an installed package's file, read once per process.
    A module's file that is no file on disk (imported from a zip: rev34a J5) is read through
    its loader; one of the program's own whose source cannot be had at all may read anywhere
    (line 0)."""
    if fixed and path in _fixed:
        return _fixed[path]
    try:
        stat = _stat(path)
    except OSError:
        loader = getattr(module, "__loader__", None)
        if loader is None or not hasattr(loader, "get_source"):
            return ()  # no module's file (torch.ops' namespaces name one that is not there)
        try:
            text = loader.get_source(module.__name__)
        except Exception:  # noqa: BLE001 (no source to be had: as None)
            text = None
        if text is None:
            return () if fixed else (0,)
        return lines_reading_saved_tensors(text, own=not fixed)
    key = (path, stat.st_mtime, stat.st_size)
    lines = _cache.get(key)
    if lines is None:
        try:
            lines = lines_reading_saved_tensors(_source_text(path), own=not fixed)
        except OSError:
            lines = ()
        _cache[key] = lines
    if fixed:
        _fixed[path] = lines
    return lines


_fixed: dict[str, tuple[int, ...]] = {}
_modules: dict[str, tuple] = {}  # module name -> (module, its file, its kind)
_kinds: dict[str, int] = {}  # file name as the module gives it -> 0 left out, 1 installed, 2 own
_dirs: tuple[tuple[str, ...], tuple[str, ...]] | None = None


def usable_name(name) -> bool:
    """Whether a string can name a file here: no NUL, and the file system's encoding takes it (a
    lone surrogate does not): a module's made-up ``__file__`` (rev78a D2, rev79a E3)."""
    if type(name) is not str or "\0" in name:
        return False
    try:
        os.fsencode(name)
    except (UnicodeError, ValueError):
        return False
    return True


def _kind(name: str) -> int:
    kind = _kinds.get(name)
    if kind is None:
        global _dirs
        if _dirs is None:
            import torch

            paths = sysconfig.get_paths()
            ours = {os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__))}
            installed = {paths[k] for k in ("purelib", "platlib") if paths.get(k)}
            # and every site-packages folder on the path: a venv made with
            # --system-site-packages reads the base Python's, which lies inside the base's
            # standard library folder and was taken for it (rev47a N4)
            installed.update(p for p in sys.path if isinstance(p, str) and os.path.basename(
                p.rstrip(os.sep)) in ("site-packages", "dist-packages"))
            stdlib = {paths[k] for k in ("stdlib", "platstdlib") if paths.get(k)}
            # in this order: site-packages often lies inside the standard library's folder
            # (pyenv, python.org's builds, the python Docker image: lib/python3.X/site-packages)
            # and was then taken for it, its packages never searched (a false "not needed")
            _dirs = tuple(
                tuple(os.path.realpath(d) + os.sep for d in group)
                for group in (ours, installed, stdlib)
            )
        if not usable_name(name):  # (no file has such a name: a module's made-up __file__)
            _kinds[name] = 0
            return 0
        real = _realpath(name)
        kind = (0 if real.startswith(_dirs[0]) else 1 if real.startswith(_dirs[1])
                else 0 if real.startswith(_dirs[2]) else 2)
        _kinds[name] = kind
    return kind


_real_dirs: dict[str, str] = {}


_MEMO: list = []  # while one reading is on (one_reading): {path: its stat, or the error}


@contextlib.contextmanager
def one_reading():
    """Within it, each file is looked at on disk once (``os.stat``, ``os.path.islink``): one
    reading (the loop search after a site's first run, the audit's end) asks of the same
    files many times, a system call each, and they do not change in between."""
    if _MEMO:
        yield
        return
    _MEMO.append({})
    try:
        yield
    finally:
        _MEMO.clear()


def _stat(path: str) -> os.stat_result:
    """``os.stat(path)``, once per reading (``one_reading``)."""
    if not _MEMO:
        try:
            return os.stat(path)
        except ValueError as error:  # (a NUL in the name: no such file, rev78a D2)
            raise OSError(0, str(error), path) from None
    memo = _MEMO[0]
    found = memo.get(path)
    if found is None:
        try:
            found = os.stat(path)
        except OSError as error:  # (kept as numbers, not the error: its traceback's frames
            found = (error.errno, error.strerror)  # hold the program's, and its graphs)
        except ValueError as error:  # (a NUL in the name, rev78a D2)
            found = (0, str(error))
        memo[path] = found
    if type(found) is tuple:
        raise OSError(found[0], found[1], path)
    return found


def _islink(name: str) -> bool:
    if not _MEMO:
        return os.path.islink(name)
    memo = _MEMO[0]
    found = memo.get(("link", name))
    if found is None:
        found = memo[("link", name)] = os.path.islink(name)
    return found


def _realpath(name: str) -> str:
    """``os.path.realpath(name)``, its folder resolved once per folder: realpath() costs a
    stat per folder of the path, for each of the thousands of modules a torch program loads
    (torch._dynamo's 800, imported by the first optimizer: 140 ms of an audit's end). A file
    that is itself a link is resolved whole."""
    if _islink(name):
        return os.path.realpath(name)
    folder, base = os.path.split(os.path.abspath(name))
    real = _real_dirs.get(folder)
    if real is None:
        real = _real_dirs[folder] = os.path.realpath(folder)
    return os.path.join(real, base)


def _stdlib(name: str) -> bool:
    """A file of the standard library (not torch's, retaincheck's or an installed package's)."""
    _kind(name)  # sets _dirs
    real = os.path.realpath(name)
    return real.startswith(_dirs[2]) and not real.startswith(_dirs[0] + _dirs[1])


def reads_in(filenames, before=None) -> list[str]:
    """``file:line`` of each read of a saved tensor in the files given, in the files of every
    module of the user's own (outside the standard library and site-packages: a helper that
    a test imported before the audit began), and in those of the installed modules imported
    since ``before`` (a set of module names; None: every module imported now); torch,
    retaincheck and the standard library are left out."""
    from ._hooks import _own_dict

    files, modules = {}, {}
    for name in filenames:
        if name and not name.startswith("<"):
            kind = _kind(name)
            if kind:
                files[os.path.abspath(name)] = kind
    for module_name, module in list(sys.modules.items()):
        if type(module_name) is not str:
            continue  # (a key of the program's: its __eq__ and __hash__ are its code, rev82a)
        known = _modules.get(module_name)
        if known is None or known[0] is not module:
            # (from its own dict: a lazy module's import runs at the first attribute read,
            # rev77a A1)
            name = _own_dict(module).get("__file__")
            kind = _kind(name) if type(name) is str and name.endswith(".py") else 0
            known = _modules[module_name] = (module, os.path.abspath(name) if kind else "", kind)
        if before is not None and module_name in before and known[2] != 2:
            continue  # an installed package imported before the audit (pytest's own, ...)
        if known[2]:
            files[known[1]] = known[2]
            modules[known[1]] = known[0]
    found = []
    for path in sorted(files):
        found.extend(f"{_shown(path)}:{line}" for line in _lines_in_file(
            path, files[path] == 1, modules.get(path)))
    return found


def _shown(path: str) -> str:
    cwd = os.getcwd()
    return os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path


_trees: dict[tuple, ast.AST | None] = {}
# The text last compiled from a string under each file name, by the program's code or a
# runner's (the audit's compile events, _hooks.Session.dynamic_code): a Markdown fence that
# pytest-markdown-docs compiles under the .md file's name, with the lines before it blank
# (rev34b F8, F8b), exec'd code named "<config>". Read where the name is no Python file.
# None: two texts compiled under one name, which of them ran cannot be told (rev35a A2,
# rev35b NEW-3: the last one's line was read for the first one's site).
_compiled: dict[str, str | None] = {}


# Each relative file name compiled during the audit: the file it named then (from the folder
# at that time) -> the text compiled. runpy.run_path("main.py") after os.chdir("exp") ran
# exp/main.py, whichever folder the program is in when its calls run (rev38a H3, H4, H6).
_compiled_at: dict[str, dict[str, str]] = {}


def note_relative(filename, source) -> None:
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    if isinstance(filename, str) and isinstance(source, str):
        _compiled_at.setdefault(filename, {})[os.path.abspath(filename)] = source


def note_compiled(filename, source) -> None:
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    if isinstance(filename, str) and isinstance(source, str):
        known = _compiled.get(filename, source)
        _compiled[filename] = source if known == source else None


def _source_text(path: str) -> str:
    """A Python file's text as Python reads it: its coding declaration or UTF-8, a byte-order
    mark left out (rev34a J7, J8: a latin-1 file, a file saved with a BOM did not parse, and
    every check that reads the source let its sites through)."""
    try:
        with tokenize.open(path) as f:
            return f.read()
    except (SyntaxError, UnicodeDecodeError):  # no Python file: searched as text all the same
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()


def _tree(path: str, compiled: bool = True) -> ast.AST | None:
    """The syntax tree of the file ``path``; else, with ``compiled``, of the text last
    compiled under its name."""
    try:
        stat = _stat(path)
    except OSError:
        stat = None
    if stat is not None:
        key = (path, stat.st_mtime, stat.st_size)
        if key not in _trees:
            try:
                _trees[key] = ast.parse(_source_text(path))
            except (OSError, SyntaxError, ValueError):
                _trees[key] = None
        if _trees[key] is not None:
            return _trees[key]
    text = _compiled.get(path) if compiled else None
    if text is None and compiled and stat is None:
        import linecache

        # a module with no file of its own on disk (a zip's), which linecache read through
        # its loader when a site there was first met (_hooks: getlines with its globals)
        text = "".join(linecache.getlines(path)) or None
    if text is None:
        return None
    key = (path, text)
    if key not in _trees:
        try:
            _trees[key] = ast.parse(text)
        except (SyntaxError, ValueError):
            _trees[key] = None
    return _trees[key]


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_MADE = (ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Dict, ast.Constant)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _graph_walkers(tree: ast.AST, extra: frozenset[str] = frozenset()) -> frozenset[str]:
    """Names whose call may start a backward pass: ``backward`` and ``grad`` (a method,
    ``torch.autograd.grad``), ``extra`` (the walkers of the program's other files), the names
    they are imported or bound under (``from torch.autograd import backward as bw``,
    ``bw = torch.autograd.backward``, ``g = functools.partial(torch.autograd.grad, ...)``,
    ``step = lambda loss: loss.backward()``), and the functions and methods of this file whose
    body calls one of these (a helper ``smooth(out)`` that calls ``backward()``), found until
    nothing new is added."""
    names = {"backward", "grad", *extra}
    bodies: dict[str, list[ast.AST]] = {}
    assigned: list[ast.Assign] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names if a.name in names)
        elif isinstance(node, ast.Assign):
            assigned.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            bodies.setdefault(node.name, []).append(node)

    def mentions(expr: ast.AST) -> bool:
        # an alias (bw = torch.autograd.backward), functools.partial(torch.autograd.grad, ...),
        # a lambda whose body calls one: any name of ``names`` in the assigned value
        # (w.grad is a tensor, not torch.autograd.grad: "grad" counts only on autograd)
        # (an installed walker too, by the name it is bound by, =f or module.f: `chk = f`,
        # `recheck = staticmethod(f)`, rev49b B1)
        return any(isinstance(n, ast.Name) and (n.id in names or "=" + n.id in names)
                   or isinstance(n, ast.Attribute) and n.attr in names and (
                       n.attr != "grad"
                       or getattr(n.value, "attr", getattr(n.value, "id", "")) == "autograd")
                   or isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                   and f"{n.value.id}.{n.attr}" in names
                   for n in ast.walk(expr))

    # a parameter whose default is one (`def step(loss, pen=penalty)`: rev49a I4)
    defaults = []
    for f in (f for defs in bodies.values() for f in defs):
        positional = [*f.args.posonlyargs, *f.args.args]
        defaults += [(a.arg, d) for a, d in (
            *zip(positional[len(positional) - len(f.args.defaults):], f.args.defaults,
                 strict=True),
            *zip(f.args.kwonlyargs, f.args.kw_defaults, strict=True)) if d is not None]
    while True:
        before = len(names)
        for node in assigned:
            if mentions(node.value):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node.value, ast.Name):  # `reg = gradkit` of `gradkit.f` (I6)
                prefix = node.value.id + "."
                names.update(t.id + n[len(prefix) - 1:] for n in list(names)
                             if n.startswith(prefix) for t in node.targets
                             if isinstance(t, ast.Name))
        names.update(arg for arg, default in defaults if mentions(default))
        for name, defs in bodies.items():
            if name not in names and any(
                isinstance(n, ast.Call) and _walks_a_graph(n, names, strings=False)
                for d in defs for n in ast.walk(d)
            ):
                names.add(name)
        if len(names) == before:
            return frozenset(names)


def _walks_a_graph(call: ast.Call, names: frozenset[str] | set[str],
                   strings: bool = True) -> bool:
    """A call that may start a backward pass: one of ``names`` (``_graph_walkers``), a
    wrapper named ``..._backward`` (``manual_backward``), or a method reached by ``getattr``
    whose name may be one of them or is not known (``getattr(loss, AUX)()``,
    ``getattr(loss, name)()``: when in doubt, it may walk a graph)."""
    name = _called_name(call)
    if name in names or name.endswith("_backward"):
        return True
    func = call.func
    # an installed package's function, by the name the program calls it by: bare, for one
    # bound by `from pkg import f` ("=f": not `model.f()`), or on its module's name (`pkg.f`:
    # not `opt.f()`) (_audit._installed_walkers)
    if isinstance(func, ast.Name) and "=" + func.id in names or isinstance(
            func, ast.Attribute) and isinstance(func.value, ast.Name) and (
            f"{func.value.id}.{func.attr}" in names):
        return True
    if (isinstance(func, ast.Call) and getattr(func.func, "id", "") == "getattr"
            and len(func.args) >= 2):
        texts = _texts(func.args[1])
        owner = func.args[0].id + "." if isinstance(func.args[0], ast.Name) else "\0"
        return texts is None or any(t in names or t.endswith("_backward") or owner + t in names
                                    for t in texts)
    # code in a string (`eval("loss.backward()")`: rev49a V1): one that names a walk, or one
    # that cannot be read
    # (where it stands only, not making its function a walker by name: a launcher's
    # exec(program) made its `start()` one, and every thread's start() a walk)
    if strings and isinstance(func, ast.Name) and func.id in ("eval", "exec") and call.args:
        text = call.args[0]
        return not isinstance(text, ast.Constant) or not isinstance(text.value, str) or any(
            word in text.value for word in ("backward", "autograd", "grad("))
    # torch's walk handed on as a value (`map(torch.Tensor.backward, losses)`: rev49a V2)
    return any(isinstance(a, ast.Attribute) and (a.attr == "backward" or a.attr == "grad" and (
        getattr(a.value, "attr", getattr(a.value, "id", "")) == "autograd"))
        or isinstance(a, ast.Name) and a.id == "backward"
        for a in (*call.args, *(k.value for k in call.keywords)))


def _is_site_call(call: ast.Call) -> bool:
    """The call that passes the flag (by keyword, or as backward's third argument)."""
    return any(k.arg == "retain_graph" or k.arg is None for k in call.keywords) or len(
        call.args) >= 3


def project_walkers(paths) -> frozenset[str]:
    """The names of the functions and methods in the program's own files (``paths``) whose
    body may start a backward pass (``_graph_walkers``): a call to ``losses.smoothness(out)``
    in one file is a backward() call when ``smoothness`` in another file calls one."""
    trees = [tree for tree in map(_tree, paths) if tree is not None]
    found: frozenset[str] = frozenset()
    while True:  # until nothing new: a helper of one file that calls another file's walker
        more = frozenset().union(*(_graph_walkers(tree, found) for tree in trees))
        if more == found:
            return found
        found = more


def in_a_loop(path: str, line: int, first: int | None) -> bool:
    """Whether ``line`` lies in a loop (``for``, ``while``, a comprehension) of the code that
    starts at ``first`` (0: the module's own code), not counting loops of functions inside it:
    the calls that code makes at ``line`` may be made again."""
    tree = _tree(path)  # (the file as it is now: a tree per text, kept in _trees)
    key = (id(tree), line, first)
    known = _loops.get(key)
    if known is None:
        scope = None if tree is None else _code_at(tree, line, first)
        known = False
        todo = list(ast.iter_child_nodes(scope)) if scope is not None else []
        while todo and not known:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
                continue
            if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp,
                                 ast.DictComp, ast.GeneratorExp)):
                # (not a loop whose body ends in a plain break: it runs once, a smoke
                # test's `for x, y in loader: ...; break`, rev50b C1)
                # (with no `continue` in it: a retry loop runs again, rev51b R1)
                known = node.lineno <= line <= (node.end_lineno or node.lineno) and not (
                    isinstance(node, _LOOPS) and isinstance(node.body[-1], ast.Break)
                    and not any(isinstance(n, ast.Continue) for n in ast.walk(node)))
            todo.extend(ast.iter_child_nodes(node))
        _loops[key] = known
    return known


_loops: dict[tuple, bool] = {}


def _code_at(tree, line: int, first: int | None):
    """The code of ``tree`` that starts at ``first`` (its first decorator's line, or its own)
    and holds ``line``: a function, lambda or class body; the module for 0; None if none."""
    return tree if not first else next((
        n for n in ast.walk(tree) if isinstance(n, _SCOPES) and first == min(
            [n.lineno, *(d.lineno for d in getattr(n, "decorator_list", ()))])
        and n.lineno <= line <= (n.end_lineno or n.lineno)), None)


def loop_over_names(path: str, line: int, first: int | None, roots=None,
                    held: frozenset | None = frozenset()) -> bool:
    """Whether the innermost loop (``for``, ``while``, a comprehension) around ``line`` in the
    code that starts at ``first`` (0: the module's own) walks, each iteration, a value made
    before it: a name ``roots(call)`` gives for a call on ``line`` (what it walks), or one of
    ``held`` (names holding a graph at run time) that the loop uses, which it does not assign
    (rev50a M1: `for size in sizes: loss = ...` / `for _ in range(iters):
    loss.backward(retain_graph=True)`; rev51a K1: features made once per epoch, inner steps on
    them). The loop's own target is no name its body makes (`for loss in [shared] * n`, K2).
    ``held`` None: names not read (``_hooks._read_locals``), any the code assigns outside
    the loop. ``held``'s ``name.attr`` (an object's attribute holding a graph) counts where the loop
    uses ``name`` and assigns neither, and the code around it assigns ``name.attr`` outside
    it (rev51a K1 lself: `self.feats = ...` per epoch, `for _ in ...: self.step()`); set
    elsewhere (a module's forward that the loop calls), it may be made anew each iteration."""
    tree = _tree(path)
    scope = None if tree is None else _code_at(tree, line, first)
    if scope is None:
        return False
    loops, todo = [], list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, _LOOPS) and node.lineno <= line <= (
                node.end_lineno or node.lineno) or isinstance(node, _COMPREHENSIONS) and any(
                isinstance(n, ast.Call) and n.lineno <= line <= (n.end_lineno or n.lineno)
                for part in _repeated(node) for n in ast.walk(part)):
            loops.append(node)
        todo.extend(ast.iter_child_nodes(node))
    if not loops:
        return False
    loop = max(loops, key=lambda n: (n.lineno, n.col_offset))  # the innermost
    targets = [loop.target] if isinstance(loop, (ast.For, ast.AsyncFor)) else [
        g.target for g in getattr(loop, "generators", ())]
    target = {id(n) for t in targets for n in ast.walk(t)}
    inside = {id(n) for n in ast.walk(loop)}
    own, todo = [], [scope]  # (the scope's own code: not the functions and classes in it)
    while todo:
        node = todo.pop()
        own.append(node)
        todo.extend(n for n in ast.iter_child_nodes(node) if not isinstance(n, _SCOPES))
    stored = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name) and id(n) not in target
              and isinstance(n.ctx, (ast.Store, ast.Del))}
    used = {n.id for n in ast.walk(loop) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}
    if held is None:  # (a function whose locals were not read: any name it assigns, or
        # is given, outside the loop may hold a graph made before it; when in doubt, kept)
        held = frozenset(
            n.id for n in ast.walk(scope) if isinstance(n, ast.Name) and id(n) not in inside
            and isinstance(n.ctx, ast.Store)) | frozenset(
            a.arg for a in ast.walk(scope) if isinstance(a, ast.arg)) | frozenset(
            n.name for n in ast.walk(scope) if isinstance(n, _SCOPES[:2] + (ast.ClassDef,))
            and id(n) not in inside and n is not scope)
    if isinstance(loop, _LOOPS):
        # (what every iteration assigns: not under an `if` one branch of which does not,
        # not in a loop inside it: `if feats is None: feats = make(epoch)` keeps the
        # features of an epoch, rev55a P8; not from a value that holds a graph of before
        # the iteration, through another name too: `h_new = cell(x, h); h = h_new`,
        # rev57a M1, M2, rev57b G1)
        stored &= _always_assigned(loop.body, frozenset(
            n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)) if isinstance(
            loop, (ast.For, ast.AsyncFor)) else frozenset(), frozenset(
            h for h in held if "." not in h and ":" not in h))
    names = used & held
    for dotted in held:
        # (the file and the name of the holder's class)
        dotted, _, where = dotted.partition("\0")
        where, _, holder = where.partition("\0")
        user, _, path = dotted.rpartition(":")  # (`fn:obj.attr`: what a function reads)
        base, _, attr = path.partition(".")
        if attr and (user or base) in used and (base not in stored or user):
            # (where the code around the loop, not the loop, assigns the attribute or puts
            # something in it (self.cache["h"] = ..., self.feats.append(...)); or other
            # functions of the file do, with a value but a constant, that the loop's calls
            # do not reach by name: a trainer's encode() before the loop, not its step()
            # that sets self.loss each batch, rev52a C1; not an __init__'s
            # `self.feats = None`; or, where no code of the file assigns it (a library's
            # object: a queue.Queue's items, rev53b K3), where the loop calls neither the
            # object nor a method of it)
            # (set anew each iteration only by what runs on every iteration and assigns it a
            # whole new value: in the loop, or in a function of the file (or of the holder's
            # class's file) that every iteration calls: a trainer's step() that sets
            # self.loss, a module's forward; not a memoizing getter's `if self.at != epoch:`,
            # a guard clause's early return, an item or an append, rev54a N1, rev55a P1-P8,
            # rev55b M1)
            sets = [n for n in own if _sets_attribute(n, attr)]
            trees = [tree]
            if where and os.path.realpath(where) != os.path.realpath(path):
                other = _tree(where)
                trees += [other] if other is not None else []
            setters = [f for t in trees for f in ast.walk(t) if isinstance(f, _SCOPES[:2])
                       and f is not scope and any(
                           _sets_attribute(n, attr, constants=False) for n in ast.walk(f))]
            every = _always_run(loop.body) if isinstance(loop, _LOOPS) else []
            if any(_refreshes(n, attr, {base}) for n in every):
                continue
            if sets or setters:
                # (a function every iteration reaches that assigns the attribute of what it
                # holds the object by; a method only of the holder's class, not another
                # class's of the same name, rev56a N3; not a value from a cache, rev56a N4)
                reached = _always_reached(trees, every, base)
                mine = {id(f) for t in trees for c in ast.walk(t) if isinstance(
                    c, ast.ClassDef) and c.name == holder for f in c.body}
                methods = {id(f) for t in trees for c in ast.walk(t)
                           if isinstance(c, ast.ClassDef) for f in c.body}
                # (a function that may hand back a value it keeps: a cache decorator, or a
                # return of an item or an attribute, a memo dict, rev57b G3; a callable
                # object's __call__ that does, for any call of an object)
                cached = {f.name for t in trees for f in ast.walk(t)
                          if isinstance(f, _SCOPES[:2]) and (any(
                              "cache" in ast.unparse(d) for d in f.decorator_list) or any(
                              isinstance(r, ast.Return) and isinstance(
                                  r.value, (ast.Subscript, ast.Attribute))
                              for r in _walk_own(f)))}
                if "__call__" in cached:
                    cached |= {None}  # (see _refreshes: a call of no function of the file)
                # (not an assignment after a read of the attribute in the same function: a
                # one-entry cache, `got = self.d.get(key, fresh); self.d = {key: got}`,
                # hands the old value on, rev61a A1)
                if not any(id(f) in reached and (id(f) in mine or id(f) not in methods or (
                        not holder)) and any(_refreshes(n, attr, reached[id(f)], cached)
                                             and not _read_before(f, attr, n.lineno)
                                             for n in _unconditional(f)) for f in setters):
                    names.add(user or base)
            elif where or any(isinstance(c, ast.ClassDef) and c.name == holder
                              for t in trees for c in ast.walk(t)) or not _calls_owner(
                    trees, loop, base):
                # (no code of the program's sets it: a class of the program's sets it some
                # other way, `self.__dict__.update(...)`, `setattr(self, k, v)`, rev55a P3,
                # P4; a library's object may set it when the loop calls it)
                names.add(user or base)
            continue
        if user and not attr and user in used and base not in stored:
            names.add(user)  # (a function the loop calls reads a global that holds one)
    if roots is not None:
        for call in ast.walk(loop):
            if isinstance(call, ast.Call) and call.lineno <= line <= (
                    call.end_lineno or call.lineno):
                names.update(roots(call))
    return bool(names - stored)


_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add",
                       "__setitem__", "appendleft", "put", "put_nowait"})


def _sets_attribute(node, attr: str, constants: bool = True) -> bool:
    """Whether ``node`` assigns an attribute named ``attr`` (`x.attr = ...`), an item of it
    (`x.attr[k] = ...`) or puts a value in it (`x.attr.append(...)`); with ``constants``
    False, not an assignment of a constant (`self.feats = None`)."""
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        if not constants and isinstance(node.value, ast.Constant):
            return False
        todo = list(node.targets if isinstance(node, ast.Assign) else [node.target])
        while todo:  # (`self.feats, self.at = ...`: each of a tuple's targets)
            t = todo.pop()
            if isinstance(t, (ast.Tuple, ast.List)):
                todo.extend(t.elts)
                continue
            if isinstance(t, ast.Starred):
                t = t.value
            if isinstance(t, ast.Subscript):
                t = t.value
            if isinstance(t, ast.Attribute) and t.attr == attr:
                return True
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
            node.func.id == "setattr") and len(node.args) == 3:
        # `setattr(self, "feats", ...)` (rev54a N2)
        name, value = node.args[1], node.args[2]
        return isinstance(name, ast.Constant) and name.value == attr and (
            constants or not isinstance(value, ast.Constant))
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
        node.func.attr in _MUTATORS) and isinstance(node.func.value, ast.Attribute) and (
        node.func.value.attr == attr)


_LEAVE = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _always_run(stmts) -> list:
    """The nodes of a block of statements that run each time the block runs to its end or
    to the site: not under an ``if``, a loop, a ``try`` or a ``match``, not after a
    statement that may leave the block first (a guard clause's ``return``, rev55a P6), not
    an ``if``-expression's branches or a short-circuit's later operands, not in a function
    or a comprehension inside it."""
    found = []
    for stmt in stmts:
        found.extend(_runs_in(stmt))
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            found.extend(_always_run(stmt.body))
        if isinstance(stmt, _LEAVE) or not isinstance(stmt, _SCOPES) and any(
                isinstance(n, _LEAVE) for n in _walk_own(stmt)):
            break
    return found


def _runs_in(stmt) -> list:
    """The nodes of one statement that run whenever it does (its blocks left out)."""
    found, todo = [], [stmt]
    while todo:
        node = todo.pop()
        found.append(node)
        if isinstance(node, (*_SCOPES, *_COMPREHENSIONS)) and node is not stmt:
            continue
        if isinstance(node, ast.IfExp):
            todo.append(node.test)
            continue
        if isinstance(node, ast.BoolOp):
            todo.append(node.values[0])
            continue
        for field, value in ast.iter_fields(node):
            if field in ("body", "orelse", "handlers", "finalbody", "cases"):
                continue  # (a block: only _always_run's With bodies run whole)
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    todo.append(child)
    return found


def _walk_own(node):
    """``ast.walk`` without the functions and classes inside ``node``."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        todo.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, _SCOPES))


_ALL = frozenset({"\0all"})


def _always_assigned(stmts, fresh=frozenset(), held=frozenset()) -> set[str]:
    """The names a block of statements gives a new value on every way through it that goes
    on past it (an ``if`` whose branches both assign one; a ``try``'s, where each handler
    assigns it too or leaves the block), ``_ALL`` for a block that always leaves
    (``continue``). A value built from the name's own (`feats = feats.to(device)`,
    `state = 0.9 * state + x`, `x += y`, rev56b F1, F2), or from a name of ``held`` (names
    that held a graph at run time) by way of another name, is new only where those names
    already were (``fresh``: a loop's target) or are detached first (`h = h.detach()`)."""
    found: set[str] = set(fresh)
    tainted: set[str] = set()  # (names given a value built from a graph of before)
    for stmt in stmts:
        if isinstance(stmt, _LEAVE):
            return set(_ALL)
        if isinstance(stmt, (ast.If, ast.Try, *([ast.TryStar] if hasattr(ast, "TryStar")
                                                else []))):
            if isinstance(stmt, ast.If):
                ways = [_always_assigned(stmt.body, found, held),
                        _always_assigned(stmt.orelse, found, held)]
            else:
                ways = [_always_assigned(stmt.body + stmt.orelse, found, held), *(
                    _always_assigned(h.body, found, held) for h in stmt.handlers)]
                found |= _always_assigned(stmt.finalbody, found, held) - _ALL
            if all(_ALL <= way for way in ways):
                return set(_ALL)
            common = None
            for way in ways:
                if not _ALL <= way:
                    common = way if common is None else common & way
            found |= common or set()
            continue
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            found |= {n.id for i in stmt.items if i.optional_vars is not None
                      for n in ast.walk(i.optional_vars) if isinstance(n, ast.Name)}
            inner = _always_assigned(stmt.body, found, held)
            if _ALL <= inner:
                return set(_ALL)
            found |= inner
            continue
        if isinstance(stmt, (*_SCOPES[:2], ast.ClassDef)):
            found.add(stmt.name)
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).partition(".")[0] for a in stmt.names}
            continue
        if isinstance(stmt, (ast.For, ast.AsyncFor)):  # (its target, taken as bound: a
            # loop over the loss modules, style_transfer.py; not what its body assigns,
            # which may run no time)
            found |= {n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name)}
            continue
        if isinstance(stmt, (ast.While, *([ast.Match] if hasattr(ast, "Match") else []))):
            continue  # (it may run no time)
        names = {n.id for n in _runs_in(stmt) if isinstance(n, ast.Name) and isinstance(
            n.ctx, (ast.Store, ast.Del))}
        value = getattr(stmt, "value", None)
        if isinstance(stmt, ast.AugAssign):
            own = names
        elif isinstance(value, ast.AST):
            # (`feats = make(epoch) if feats is None else feats` keeps the old value too,
            # rev55a P7)
            cut = {id(n.value) for n in ast.walk(value) if isinstance(n, ast.Attribute)
                   and n.attr in ("detach", "detach_")}
            own = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)
                   and id(n) not in cut}
        else:
            own = set()
        stale = {r for r in own if r in held or r in names or r in tainted} - found
        tainted |= names if stale else set()
        tainted -= names if not stale else set()
        found |= {n for n in names if not stale}
    return found


def _unconditional(function) -> list:
    """The nodes of a function's own code that run on every call of it (``_always_run``)."""
    return _always_run(function.body)


def _read_before(function, attr: str, line: int) -> bool:
    """Whether ``function``'s own code reads an attribute named ``attr`` before ``line``."""
    return any(isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Load)
               and n.lineno < line for n in _walk_own(function))


def _refreshes(node, attr: str, owners, cached=frozenset()) -> bool:
    """Whether ``node`` assigns a new value to the attribute ``attr`` of one of ``owners``
    (`self.feats = encode(x)`): a whole value, not an item of it or an append (rev55b
    a_state, a_hist), not of another object (a_other), and not one chosen by a test or
    built from the attribute's own value (`self.feats if ... else encode()`, rev55a P7)."""
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None or isinstance(
            node.value, (ast.Constant, ast.IfExp, ast.BoolOp)) or any(
            isinstance(n, ast.Attribute) and n.attr == attr for n in ast.walk(node.value)) or (
            isinstance(node.value, ast.Call) and _called_name(node.value) in cached) or (
            None in cached and isinstance(node.value, ast.Call)):
        return False
    todo = list(node.targets if isinstance(node, ast.Assign) else [node.target])
    while todo:
        t = todo.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            todo.extend(t.elts)
        elif isinstance(t, ast.Attribute) and t.attr == attr and isinstance(
                t.value, ast.Name) and t.value.id in owners:
            return True
    return False


def _defined(trees) -> dict[str, list]:
    """The functions and methods of ``trees`` (a file, and the files of its objects'
    classes), by name."""
    defined: dict[str, list] = {}
    for tree in trees:
        for f in ast.walk(tree):
            if isinstance(f, _SCOPES[:2]):
                defined.setdefault(f.name, []).append(f)
    return defined


def _on_owner(func, aliases) -> bool:
    """Whether a call's function is the object (one of ``aliases``) or an attribute of it."""
    return isinstance(func, ast.Name) and func.id in aliases or (
        isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
        and func.value.id in aliases)


def _handed(f, call: ast.Call, aliases, keywords: bool) -> frozenset[str]:
    """The parameters of ``f`` that ``call`` hands one of ``aliases`` to (a method's self
    when called on it; by keyword too, with ``keywords``)."""
    params = [a.arg for a in (*f.args.posonlyargs, *f.args.args)]
    args = [call.func.value, *call.args] if isinstance(
        call.func, ast.Attribute) and params else list(call.args)
    passed = {p for p, a in zip(params, args, strict=False)
              if isinstance(a, ast.Name) and a.id in aliases}
    if keywords:
        passed |= {k.arg for k in call.keywords if k.arg and isinstance(
            k.value, ast.Name) and k.value.id in aliases}
    return frozenset(passed)


def _always_reached(trees, nodes: list, owner: str) -> dict[int, set[str]]:
    """The functions of ``trees`` that the calls among ``nodes`` (what runs on every
    iteration) reach by name, and, in each function reached, its calls that run on every
    call of it (``_unconditional``): for each, by ``id``, the names it holds the object
    ``owner`` by (``self`` of a method called on it, a parameter it was handed to; rev56a
    N2: not every parameter). A call of the object, or of an attribute of it that is no
    function of the file (`loss_module(f)`, `self.model(x)`: an object's ``__call__``),
    reaches every ``forward`` and ``__call__``."""
    defined = _defined(trees)
    found: dict[int, set[str]] = {}
    seen: set[tuple] = set()
    todo = [(nodes, frozenset({owner}))]
    while todo:
        where, aliases = todo.pop()
        for call in where:
            if not isinstance(call, ast.Call):
                continue
            name = _called_name(call)
            more = {"forward", "__call__"} if name not in defined and _on_owner(
                call.func, aliases) else ({name} if name in defined else set())
            for callee in more:
                for f in defined.get(callee, ()):
                    passed = _handed(f, call, aliases, keywords=False)
                    params = [*f.args.posonlyargs, *f.args.args]
                    if callee in ("forward", "__call__") and params:
                        passed |= {params[0].arg}  # (the module called: its self)
                    found.setdefault(id(f), set()).update(passed)
                    if (id(f), passed) not in seen:
                        seen.add((id(f), passed))
                        todo.append((_unconditional(f), passed | {owner}))
    return found


def _calls_owner(trees, node, owner: str) -> bool:
    """Whether ``node``'s calls, or those of the functions of ``trees`` they reach by name,
    call the object ``owner`` or a method of it: by its name, or by the parameter a call of
    a function of the file hands it to (`train_step(model, x)` then `m(x)`, rev54a C1)."""
    defined = _defined(trees)
    seen: set[tuple] = set()
    todo = [(node, frozenset({owner}))]
    while todo:
        where, aliases = todo.pop()
        for call in ast.walk(where):
            if not isinstance(call, ast.Call):
                continue
            if _on_owner(call.func, aliases):
                return True
            name = _called_name(call)
            for f in defined.get(name, ()) if name in defined else ():
                key = (id(f), _handed(f, call, aliases, keywords=True))
                if key not in seen:
                    seen.add(key)
                    todo.append((f, key[1] | {owner}))
    return False


def _repeated(node) -> list:
    """The parts of a comprehension that run once per item: its element (key and value),
    its conditions, and the iterables of its inner ``for`` clauses."""
    parts = [getattr(node, a) for a in ("elt", "key", "value") if hasattr(node, a)]
    for k, g in enumerate(node.generators):
        parts.extend(g.ifs)
        if k:
            parts.append(g.iter)
    return parts


def graph_roots(call: ast.Call) -> set[str]:
    """The names a retaining call walks the graph of: `loss` of `loss.backward(...)`, the
    first argument's names of `torch.autograd.backward(loss)`, `grad([a, b], ...)`."""
    func = call.func
    if _is_site_call(call) and isinstance(func, ast.Attribute) and func.attr == "backward" and (
            isinstance(func.value, ast.Name)):
        return {func.value.id}
    if _is_site_call(call) and _called_name(call) in ("backward", "grad") and call.args:
        first = call.args[0]
        parts = first.elts if isinstance(first, (ast.List, ast.Tuple)) else [first]
        return {p.id for p in parts if isinstance(p, ast.Name)}
    return set()


def called_by_name(path: str, code, lasti: int, callee: str) -> bool:
    """Whether the call at instruction ``lasti`` of ``code`` (in ``path``) names ``callee``:
    if not, code with no frame of its own (``map``, ``functools.reduce``, ``sorted``'s key)
    called it, and may call it again (rev46b M1: ``list(map(self.train_step, batches))``).
    When in doubt (no place, no text), not."""
    tree = _tree(path)  # (the file as it is now: a tree per text, kept in _trees)
    key = (id(tree), code, lasti, callee)
    known = _by_name.get(key)
    if known is None:
        known = _by_name[key] = _called_by_name(tree, code, lasti, callee)
    return known


_by_name: dict[tuple, bool] = {}


def _called_by_name(tree, code, lasti: int, callee: str) -> bool:
    import itertools

    try:
        at = next(itertools.islice(code.co_positions(), lasti // 2, None), None)
    except AttributeError:
        return False
    if at is None or None in at or tree is None:
        return False
    from ._audit import _call_positions

    return any(isinstance(n, ast.Call) and at in _call_positions(n) and _called_name(n) == callee
               for n in ast.walk(tree))


def defined_functions(path: str) -> list[tuple[str, tuple[str, int]]]:
    """``(name, (file, first line))`` of the functions and methods a file defines at its top
    level and in its classes (a function defined inside another is searched with it)."""
    tree = _tree(path)
    known = _per_file.get(("defined", path))
    if known is not None and known[0] is tree:
        return known[1]
    found = []
    todo = list(getattr(tree, "body", ()))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ClassDef):
            todo.extend(node.body)
        elif isinstance(node, (ast.If, ast.Try, ast.ExceptHandler, ast.With)):  # (under an if)
            todo.extend(ast.iter_child_nodes(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((node.name, (path, min(
                [node.lineno, *(d.lineno for d in node.decorator_list)]))))
    _per_file[("defined", path)] = (tree, found)
    return found


_per_file: dict = {}  # (what, file) -> (its tree, what was found in it): once per text


def fixture_functions(path: str) -> set[int]:
    """The first lines (``defined_functions``'s) of a file's pytest fixtures: its functions
    decorated with ``fixture`` (``@pytest.fixture``, ``@pytest.fixture(scope=...)``)."""
    tree = _tree(path)
    found = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _called_name(ast.Call(func=d.func if isinstance(d, ast.Call) else d, args=[],
                                      keywords=[])) == "fixture" for d in node.decorator_list):
            found.add(min([node.lineno, *(d.lineno for d in node.decorator_list)]))
    return found


def referenced_names(path: str) -> dict[int, set[str]]:
    """The names a file uses as values, not (only) as what a call calls: a function handed on
    to be called later (``request.addfinalizer(check)``, ``map(step, batches)``,
    ``functools.partial(walk, loss)``), by the first line of the top-level function or method
    they are used in (0: outside any), as ``defined_functions`` gives it."""
    tree = _tree(path)
    if tree is None:
        return {}
    known = _per_file.get(("referenced", path))
    if known is None or known[0] is not tree:
        called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        found: dict[int, set[str]] = {}
        todo = [(node, 0) for node in tree.body]
        while todo:
            node, scope = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not scope:
                scope = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(
                    node.ctx, ast.Load) and id(node) not in called:
                found.setdefault(scope, set()).add(
                    node.id if isinstance(node, ast.Name) else node.attr)
            todo.extend((child, scope) for child in ast.iter_child_nodes(node))
        known = _per_file[("referenced", path)] = (tree, found)
    return known[1]


def untaken_in_functions(functions, lines_ran: set[tuple[str, int]],
                         extra: frozenset[str] = frozenset(),
                         places: dict[str, set[tuple]] | None = None,
                         unpacking: set[tuple[str, tuple | None, str]] = frozenset(),
                         ) -> list[tuple[str, int]]:
    """The ``(file, line)`` of the ``backward()``/``grad()`` calls that did not run in the
    whole bodies of ``functions``, ``(file, first line of the code)``: those of the program
    that started a backward pass after a site first ran, whatever name or value reached
    them (their frames were on that pass's stack). A helper called after the site may have
    run one pass and not another: rev43d H1, ``log_grads(model, loss, aux_weight)`` whose
    probe backward() ran and whose ``if aux_weight: (aux_weight * loss).backward()`` did not;
    rev44b AL, INJ: the same helper reached through an alias, a partial, an injected
    ``self.logger``. A module's own code (first line 1) is left out."""
    found: set[tuple[str, int]] = set()
    for path, first in sorted(functions):
        tree = _tree(path)
        if tree is None or not first:
            continue
        for node in ast.walk(tree):
            if isinstance(node, _SCOPES) and not isinstance(node, ast.ClassDef) and first == min(
                    [node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))]):
                # (line 0: every call of the body may run after the site)
                found.update((path, n) for n in _untaken_in(
                    path, 0, node, tree, lines_ran, 0, float("inf"), extra, places, unpacking))
    return sorted(found)


def _sole_calls(parts) -> list[ast.Call]:
    """The calls whose generator a loop or a call over ``parts`` drives for certain: the one
    part that is no constant, when it is a call, and so on down its own arguments. A
    generator that ran a pass may have come from elsewhere when another value stands beside
    the call, or around it: ``for v in (replay([loss]) if aux else probes)``,
    ``itertools.chain(probes, replay([loss]))`` (rev46a F1, rev47a R1: the untaken
    ``replay([loss])`` was credited with the pass that ``probes``, made by another
    ``replay(...)``, started)."""
    found: list[ast.Call] = []
    live = [p.value if isinstance(p, ast.keyword) else p for p in parts]
    while True:
        live = [p for p in live if not isinstance(p, ast.Constant)]
        if len(live) != 1 or not isinstance(live[0], ast.Call):
            return found
        found.append(live[0])
        # (on down only through the builtins that iterate what they are given: a function of
        # the program's may return another generator, rev48a G1: `pick(replay([loss]))`)
        if _called_name(live[0]) not in _PASSING_ON:
            return found
        live = [*live[0].args, *(k.value for k in live[0].keywords)]


_BUILTINS = frozenset(dir(builtins))
_PASSING_ON = frozenset({"enumerate", "iter", "list", "tuple", "sorted", "reversed", "set",
                         "sum", "islice", "any", "all", "max", "min"})


def untaken_calls(path: str, line: int, lines_ran: set[tuple[str, int]],
                  block: tuple[str, int] | None = None,
                  extra: frozenset[str] = frozenset(),
                  places: dict[str, set[tuple]] | None = None,
                  unpacking: set[tuple[str, tuple | None, str]] = frozenset(),
                  first: int | None = None) -> list[int]:
    """Lines of the ``backward()``/``grad()`` calls that could run after the call at ``line``
    (below it, or above it in a loop around both), in the same function as it (or at the top
    level of the file, when it is there; nested functions and classes are other functions),
    that no backward pass of this run came from: none of their lines is in ``lines_ran``, the
    ``(file, line)`` of the frames on the stack of every call the audit saw. ``extra``: the
    walkers of the program's other files (``project_walkers``). ``places``: file -> the
    places of the same frames in it (Python 3.11 on), which tell apart two calls on one line.
    ``unpacking``: ``(file, place, name of the frame above)`` of frames at a call that unpacks
    ``*args``/``**kwargs`` (their lines are not in ``lines_ran``): such a call ran only if
    the frame above was its callee, by name (``"*"``: the audit's wrapper of torch's).
    ``first``: the first line of the code that ran ``line`` (``co_firstlineno``): of the
    functions, lambdas and class bodies that hold the line, the one that ran it (a loop's
    ``retry(lambda: step(x))``, a ``filter(lambda p: ...)`` in a site's own line: rev43a G1,
    G1b); without it, the innermost.
    ``block``: the ``(file, line)`` of a ``with retaincheck.audit()`` statement; when ``line``
    is inside that block, only the calls inside it count (what runs after it is not audited).
    """
    tree = _tree(path)
    if tree is None:
        return []
    low, high = 0, float("inf")
    if block is not None and block[0] == path:
        with_node = next((n for n in ast.walk(tree) if isinstance(n, (ast.With, ast.AsyncWith))
                          and n.lineno <= block[1] <= (n.end_lineno or n.lineno)
                          and n.body and block[1] < n.body[0].lineno), None)
        if with_node is not None and with_node.lineno <= line <= (with_node.end_lineno or 0):
            low, high = with_node.lineno, with_node.end_lineno or with_node.lineno
    holding = [n for n in ast.walk(tree) if isinstance(n, _SCOPES)
               and n.lineno <= line <= (n.end_lineno or n.lineno)]
    # the code that ran the line starts on its first decorator's line, or its own
    ran_it = [n for n in holding if first is not None and first == min(
        [n.lineno, *(d.lineno for d in getattr(n, "decorator_list", ()))])]
    if ran_it:
        if len(ran_it) > 1:  # (two lambdas on one line: which ran cannot be told, so both)
            return sorted({n for s in ran_it for n in _untaken_in(
                path, line, s, tree, lines_ran, low, high, extra, places, unpacking)})
        scope = ran_it[0]
    elif first == 0 or not holding:
        scope = tree  # the module's own code
    else:  # the innermost function (or class body) holding the line
        scope = max(holding, key=lambda n: (n.lineno, n.col_offset))
    return _untaken_in(path, line, scope, tree, lines_ran, low, high, extra, places, unpacking)


def _torch_made(tree) -> frozenset[str]:
    """Names that a file binds, wherever it binds them, only to what a call of torch's
    returns (`opt = torch.optim.SGD(...)`, `model = nn.Linear(3, 1)`): their methods are
    torch's, not a method of the program's of the same name (`opt.step()` is no
    `Runner.step`). A parameter, a loop's target, a `with` target is not known to be."""
    known = _made_by_torch.get(id(tree))
    if known is not None and known[0] is tree:
        return known[1]
    roots = {"torch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.asname for a in node.names if a.asname and (
                a.name == "torch" or a.name.startswith("torch.")))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (
                node.module == "torch" or (node.module or "").startswith("torch.")):
            roots.update(a.asname or a.name for a in node.names)
    values: dict[str, list] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        values.setdefault(n.id, []).append(
                            node.value if isinstance(target, ast.Name)
                            and not isinstance(node, ast.AugAssign) else None)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            for n in ast.walk(node.target if hasattr(node, "target") else ast.Tuple(
                    [i.optional_vars for i in node.items if i.optional_vars], ast.Load())):
                if isinstance(n, ast.Name):
                    values.setdefault(n.id, []).append(None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                values.setdefault(a.arg, []).append(None)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                values.setdefault((a.asname or a.name).partition(".")[0], []).append(None)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            values.setdefault(node.name, []).append(None)

    def torch_call(value) -> bool:
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        while isinstance(func, ast.Attribute):
            func = func.value
        return isinstance(func, ast.Name) and func.id in roots

    known = frozenset(name for name, made in values.items() if all(map(torch_call, made)))
    _made_by_torch[id(tree)] = (tree, known)
    return known


_made_by_torch: dict[int, tuple] = {}


def _untaken_in(path, line, scope, tree, lines_ran, low, high, extra, places, unpacking):
    """``untaken_calls`` in one ``scope`` (a function, lambda, class body or the module)."""
    # Where Python keeps places, a call ran only if its own place was on a stack: a line on
    # a stack may be another call's of that line, one that is no walker by its name (rev43d
    # L1: `opt.step(closure) if lbfgs else (loss.backward(), opt.step())`; rev43b G2:
    # `if all(c(aux) for c in checks): loss.backward()`)
    placed = (places or {}).get(path, ())
    global _consts
    _consts = _module_constants(tree)  # for getattr(loss, AUX)() (_walks_a_graph, _texts)
    names = _graph_walkers(tree, extra)
    # a line with two walking calls: that it ran does not tell which of them did (rev27s N7:
    # `a.backward() if s % 50 else (a + b).backward()`)
    per_line: dict[int, int] = {}  # each line a call spans (rev27u R12: `(a + b` / `).backward()`)
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and _walks_a_graph(node, names):
            for n in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                per_line[n] = per_line.get(n, 0) + 1
    from ._audit import _call_positions

    # the places of the loops, comprehensions and calls that may drive a generator made by
    # a call inside them (`for i, loss in enumerate(fit(...))`, `[l for l in fit(...)]`,
    # `list(fit(...))`: rev43b G1, rev45b Q1, rev44a C1), for each call inside them
    driving: dict[int, list[tuple]] = {}
    for node in ast.walk(scope):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            inside, at = [node.iter], [(node.lineno, node.end_lineno, node.col_offset,
                                        node.end_col_offset)]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            inside, at = [node.generators[0].iter], [(
                node.lineno, node.end_lineno, node.col_offset, node.end_col_offset)]
        elif isinstance(node, ast.Call):
            inside, at = [*node.args, *node.keywords], sorted(_call_positions(node))
        else:
            continue
        calls = _sole_calls(inside)
        called = [_called_name(c) for c in calls]
        for call, name in zip(calls, called, strict=True):
            if called.count(name) == 1:  # (two of one name: which made it cannot be told,
                driving.setdefault(id(call), []).extend(at)  # rev46a F1: a ternary's two)
    awaits = {id(n.value): n for n in ast.walk(scope) if isinstance(n, ast.Await)}

    def ran(call) -> bool:  # a backward pass came from this call (it was on the stack)
        at_places = _call_positions(call)
        if any(at in placed for at in at_places):
            return True
        if any((path, at, "for " + _called_name(call)) in unpacking
               for at in driving.get(id(call), ())):
            return True  # `for loss in fit(...)`: the generator it made ran a pass
        held = awaits.get(id(call))
        if held is not None and (path, (held.lineno, held.end_lineno, held.col_offset,
                                        held.end_col_offset), "await " + _called_name(call)
                                 ) in unpacking:
            return True  # `await train_step(x)`: the coroutine it made ran a pass
        # f(*args) / f(**kwargs): only where what it unpacks is a value already made (a
        # name, an attribute, an item, a literal), whose unpacking runs no code of the
        # program's (rev43a G2: *map(methodcaller("backward"), ...) that raised midway)
        unpacked = [a.value for a in call.args if isinstance(a, ast.Starred)] + [
            k.value for k in call.keywords if k.arg is None]
        if not all(isinstance(v, _MADE) for v in unpacked):
            return False
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        callees = {name, "*"} if name in ("backward", "grad") else {name}
        return any((path, at, callee) in unpacking for at in at_places for callee in callees)

    # a name a pass came from here walks a graph, whatever it is bound to: the same name
    # called again (a parameter, `fn(loss)`: a decorator's debug replay, rev49a L2)
    # (not on the frame's own line, whose walking calls are told apart below)
    # (a bare name, not a builtin's or a method's: `sum(...)`, `coro.send(None)`,
    # `opt.step(closure)` start a pass through what they are given, not by what they are)
    ran_names = {c.func.id for c in ast.walk(scope) if isinstance(c, ast.Call)
                 and isinstance(c.func, ast.Name) and c.func.id not in _BUILTINS and ran(c)}
    torch_made = _torch_made(tree)
    found, on_the_line = [], []
    todo = [(child, (), False) for child in ast.iter_child_nodes(scope)]
    while todo:
        node, loops, nested = todo.pop()
        if isinstance(node, ast.ClassDef):
            continue  # a class body's methods run only when called: other functions
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            nested = True  # defined here, callable later: its calls may run after the site
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            loops = (*loops, node)
        todo.extend((child, loops, nested) for child in ast.iter_child_nodes(node))
        if not (isinstance(node, ast.Call) and low <= node.lineno <= high):
            continue
        lines = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        own_line = line in lines and not nested
        if not _walks_a_graph(node, names) and (own_line or _called_name(node) not in ran_names):
            continue
        func = node.func
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id in torch_made and func.attr not in ("backward", "grad")
                and not func.attr.endswith("_backward") and not any(
                    isinstance(a, ast.Lambda) or isinstance(a, ast.Name) and a.id in names
                    for a in (*node.args, *(k.value for k in node.keywords)))):
            continue  # torch's `opt.step()`, not the program's `Runner.step` (rev49b C1)
        if own_line:
            on_the_line.append(node)  # the site itself, or another call on its line
            continue
        # It could run after the site: below it, above it in a loop around both, or in a
        # function defined here that may be called later.
        after = nested or node.lineno > line or any(
            loop.lineno <= line <= (loop.end_lineno or loop.lineno) for loop in loops)
        if ran(node) or not placed and any((path, n) in lines_ran and per_line.get(n) == 1
                                           for n in lines):
            continue  # a call that ran (its place, or, with no places, a line of its own)
        if after:
            found.append(node.lineno)
    # Several calls on the site's line: which ran, only their places tell; each that did not
    # may run on another path, however much it looks like the site (rev42b T1: the ternary
    # `a.backward(retain_graph=True) if first else b.backward(retain_graph=True)`, T1b). With
    # no place known (before 3.11), every call but one that may be the site is counted.
    if any(ran(c) for c in on_the_line):
        found.extend(c.lineno for c in on_the_line if not ran(c))
    else:
        site = next((c for c in on_the_line if _is_site_call(c)), on_the_line[0] if on_the_line
                    else None)
        found.extend(c.lineno for c in on_the_line if c is not site)
    return sorted(set(found))


def loop_lines(path: str, line: int, first: int | None) -> tuple[frozenset, frozenset] | None:
    """The innermost loop around ``line`` that ``in_a_loop`` counts, in the code that starts
    at ``first``: (its head's lines, the lines of its head and body), for ``_loopwatch``; None
    for a comprehension (before Python 3.12 it runs in a frame of its own) or no loop. A
    ``for`` loop's head: from its line to its iterable's end; a ``while`` loop's: to its
    test's end. Its ``else:`` block is outside it (it runs once the loop has ended)."""
    tree = _tree(path)
    key = (id(tree), line, first)
    if key not in _spans:
        _spans[key] = _loop_lines(tree, line, first)
    return _spans[key]


_spans: dict[tuple, tuple | None] = {}


def _loop_lines(tree, line: int, first: int | None) -> tuple[frozenset, frozenset] | None:
    best = _innermost_loop(tree, line, first)
    if best is None or isinstance(best, _COMPREHENSIONS):
        return None
    end = (best.iter if isinstance(best, (ast.For, ast.AsyncFor)) else best.test).end_lineno
    head = frozenset(range(best.lineno, (end or best.lineno) + 1))
    body = frozenset(range(best.body[0].lineno, (best.body[-1].end_lineno or line) + 1))
    return head, head | body


def _innermost_loop(tree, line: int, first: int | None):
    scope = None if tree is None else _code_at(tree, line, first)
    best, todo = None, list(ast.iter_child_nodes(scope)) if scope is not None else []
    while todo:
        node = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, _LOOPS + _COMPREHENSIONS) and (
                node.lineno <= line <= (node.end_lineno or node.lineno)) and not (
                isinstance(node, _LOOPS) and isinstance(node.body[-1], ast.Break)
                and not any(isinstance(n, ast.Continue) for n in ast.walk(node))):
            # (not a loop whose iterations do not run the line: a for loop's iterable, its
            # else block; a loop inside that block still is one, rev63a A1)
            if (not isinstance(node, _LOOPS) or _each_iteration(node, line)) and (
                    best is None or node.lineno >= best.lineno and (
                        node.end_lineno or node.lineno) <= (best.end_lineno or best.lineno)):
                best = node
        todo.extend(ast.iter_child_nodes(node))
    return best


def _each_iteration(node, line: int) -> bool:
    """Whether code on ``line`` may run in each iteration of the loop ``node``: its body, a
    ``while`` loop's test, a ``for`` loop's target (a property's setter); not a ``for`` loop's
    iterable alone, which runs once before its first iteration, nor its ``else:`` block."""
    def on(part) -> bool:
        return part.lineno <= line <= (part.end_lineno or part.lineno)

    if any(on(part) for part in node.body):
        return True
    if isinstance(node, ast.While):
        return node.lineno <= line <= (node.test.end_lineno or node.lineno)
    return on(node.target) or line == node.lineno and not on(node.iter)


def comprehension_lines(path: str, code) -> tuple[frozenset, frozenset] | None:
    """For ``_loopwatch``, a comprehension's code that runs in a frame of its own: its lines
    as both head and span (a jump back to its loop is a line event on one of them); None
    where it has more than one ``for`` (which loop a jump goes back to is not told by its
    line) or is not found alone on its line."""
    kind = {"<listcomp>": ast.ListComp, "<setcomp>": ast.SetComp, "<dictcomp>": ast.DictComp,
            "<genexpr>": ast.GeneratorExp}.get(code.co_name)
    tree = _tree(path)
    key = (id(tree), code.co_firstlineno, code.co_name)
    if key not in _spans:
        _spans[key] = None if kind is None or tree is None else _comprehension_lines(
            tree, code, kind)
    return _spans[key]


def _comprehension_lines(tree, code, kind) -> tuple[frozenset, frozenset] | None:
    found = [n for n in ast.walk(tree) if type(n) is kind and n.lineno == code.co_firstlineno]
    if len(found) != 1 or len(found[0].generators) != 1:
        return None
    node = found[0]
    lines = frozenset(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines, lines


def ran_as_written(path: str, code) -> bool:
    """Whether ``code``'s loops are those the file ``path`` compiles to now: its code object of
    that name and first line has its jumps back at the same lines, to the same lines (the
    loop read from the file for ``_loopwatch`` is the loop that runs; not that of code
    compiled from another text under the file's name, ``exec(compile(text, "train.py",
    "exec"))``, or of a file changed since). Only the loops: pytest rewrites a test module's
    asserts, which adds code but no loop."""
    try:
        stat = _stat(path)
        key = (path, stat.st_mtime, stat.st_size, code)
        text = None
    except OSError:  # (a module with no file of its own: a zip's, read through its loader)
        text = _compiled.get(path)
        if text is None:
            import linecache

            text = "".join(linecache.getlines(path))
        key = (path, text, code)
    known = _as_written.get(key)
    if known is None:
        known = False
        try:
            todo = [compile(_source_text(path) if text is None else text, path, "exec",
                            dont_inherit=True)]
        except (OSError, SyntaxError, ValueError):
            todo = []
        jumps = _jumps_back(code)
        while todo and not known:
            made = todo.pop()
            known = (made.co_name == code.co_name
                     and made.co_firstlineno == code.co_firstlineno
                     and _jumps_back(made) == jumps)
            todo.extend(c for c in made.co_consts if hasattr(c, "co_code"))
        _as_written[key] = known
    return known


_BACK_JUMPS: dict = {}  # id(code) -> (code, ((offset, target, opname), ...)): _back_jumps


def _back_jumps(code) -> tuple:
    """(offset, target offset, opname) of each jump back in ``code`` itself, read once per
    code object (``_jumps_back``, ``loops_at``)."""
    known = _BACK_JUMPS.get(id(code))
    if known is None or known[0] is not code:
        import dis

        jumps = set(dis.hasjrel) | set(dis.hasjabs)
        known = _BACK_JUMPS[id(code)] = (code, tuple(
            (ins.offset, ins.argval, ins.opname) for ins in dis.get_instructions(code)
            if ins.opcode in jumps and isinstance(ins.argval, int)
            and ins.argval <= ins.offset))
    return known[1]


def _jumps_back(code) -> tuple:
    """(line of the jump, line it goes back to) for each jump back in ``code`` itself, each
    counted (two loops on one line are not one: an AST transform that wraps a file's one-line
    loop in another, rev64a A1)."""
    lines = [(start, end, line) for start, end, line in code.co_lines()]

    def line_at(offset):
        return next((line for start, end, line in lines if start <= offset < end), None)

    return tuple(sorted(((line_at(offset), line_at(target))
                         for offset, target, _ in _back_jumps(code)), key=repr))


def loops_at(code, lasti: int) -> bool:
    """Whether a loop of ``code`` itself holds the instruction at ``lasti``: a jump back from
    at or after it to at or before it, read from the code (for code with no text to read,
    compiled from a string, rev70a A1; or whose text shows no loop there). Not the jump back
    of an ``await``'s or ``yield from``'s send loop (``JUMP_BACKWARD_NO_INTERRUPT``), which
    resumes one call."""
    return any(target <= lasti <= offset for offset, target, opname in _back_jumps(code)
               if opname != "JUMP_BACKWARD_NO_INTERRUPT")


_as_written: dict[tuple, bool] = {}


def called_expression(path: str, code, lasti: int):
    """The expression a call at instruction ``lasti`` of ``code`` calls (``f`` of ``f(x)``,
    ``self.step`` of ``self.step(x)``), from the file's text; None where no one call of the
    text is at that place."""
    import itertools

    try:
        at = next(itertools.islice(code.co_positions(), lasti // 2, None), None)
    except AttributeError:  # (Python 3.10: no places)
        return None
    tree = _tree(path)
    if at is None or None in at or tree is None:
        return None
    key = (id(tree), at)
    if key not in _called_at:
        from ._audit import _call_positions

        found = [n.func for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and at in _call_positions(n)]
        _called_at[key] = found[0] if len(found) == 1 else None
    return _called_at[key]


_called_at: dict[tuple, ast.AST | None] = {}
