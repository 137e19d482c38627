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
retaining call, and the modules imported while the audit ran (under ``python -m retaincheck``
that is every module the script imports; torch and the standard library are left out).
Where one is found, no site can be proven not needed, and those that nothing else reused are
"could not tell: kept". A custom Function's own
``backward``/``jvp``/``vjp`` reading ``ctx.saved_tensors`` runs inside a backward pass, where
the pre-hooks see it, and does not count.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import sysconfig

_PREFILTER = re.compile(r"_saved|saved_tensors|saved_variables|grad_fn\s*\(|next_functions")
_CTX_NAMES = frozenset({"saved_tensors", "saved_variables", "_raw_saved_tensors"})
_OWN_BACKWARD = frozenset({"backward", "jvp", "vjp", "backward_extended", "_backward"})
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


def lines_reading_saved_tensors(source: str) -> tuple[int, ...]:
    """Line numbers where the code reads a saved tensor outside a backward pass."""
    if not _PREFILTER.search(source):
        return ()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    names = saved_attribute_names()
    found: set[int] = set()

    def visit(node, in_backward: bool):
        for child in ast.iter_child_nodes(node):
            inside = in_backward
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = child.name in _OWN_BACKWARD
            if isinstance(child, ast.Attribute):
                attr = child.attr
                if attr in names or attr.startswith("_raw_saved_"):
                    found.add(child.lineno)
                elif attr in _CTX_NAMES and not in_backward:
                    found.add(child.lineno)
            elif isinstance(child, ast.Call) and _calls_a_node(child.func):
                found.add(child.lineno)  # y.grad_fn(g): Node::operator() unpacks, no pre-hook
            elif isinstance(child, ast.Constant) and isinstance(child.value, str):
                text = child.value
                if text in names or text in ("_saved", "_saved_", "_raw_saved", "_raw_saved_"):
                    found.add(child.lineno)  # getattr(node, "_saved_" + name) and the like
            visit(child, inside)

    visit(tree, False)
    return tuple(sorted(found))


def _calls_a_node(func: ast.AST) -> bool:
    """``y.grad_fn(...)`` or ``y.grad_fn.next_functions[0][0](...)``: a node called directly."""
    if isinstance(func, ast.Attribute) and func.attr == "grad_fn":
        return True
    return any(
        isinstance(n, ast.Attribute) and n.attr == "next_functions" for n in ast.walk(func)
    )


def _lines_in_file(path: str, fixed: bool) -> tuple[int, ...]:
    """The reads in a file; ``fixed``: an installed package's file, read once per process."""
    if fixed and path in _fixed:
        return _fixed[path]
    try:
        stat = os.stat(path)
    except OSError:
        return ()
    key = (path, stat.st_mtime, stat.st_size)
    lines = _cache.get(key)
    if lines is None:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = lines_reading_saved_tensors(f.read())
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


def _kind(name: str) -> int:
    kind = _kinds.get(name)
    if kind is None:
        global _dirs
        if _dirs is None:
            import torch

            paths = sysconfig.get_paths()
            left_out = {os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__))}
            left_out.update(paths[k] for k in ("stdlib", "platstdlib") if paths.get(k))
            installed = {paths[k] for k in ("purelib", "platlib") if paths.get(k)}
            _dirs = tuple(
                tuple(os.path.realpath(d) + os.sep for d in group)
                for group in (left_out, installed)
            )
        real = os.path.realpath(name)
        kind = 0 if real.startswith(_dirs[0]) else 1 if real.startswith(_dirs[1]) else 2
        _kinds[name] = kind
    return kind


def reads_in(filenames, before=None) -> list[str]:
    """``file:line`` of each read of a saved tensor in the files given and in the files of the
    modules imported since ``before`` (a set of module names; None: every module imported
    now); torch, retaincheck and the standard library are left out."""
    files = {}
    for name in filenames:
        if name and not name.startswith("<"):
            kind = _kind(name)
            if kind:
                files[os.path.abspath(name)] = kind
    for module_name, module in list(sys.modules.items()):
        if before is not None and module_name in before:
            continue
        known = _modules.get(module_name)
        if known is None or known[0] is not module:
            name = getattr(module, "__file__", None)
            kind = _kind(name) if name.__class__ is str and name.endswith(".py") else 0
            known = _modules[module_name] = (module, os.path.abspath(name) if kind else "", kind)
        if known[2]:
            files[known[1]] = known[2]
    found = []
    for path in sorted(files):
        found.extend(f"{_shown(path)}:{line}" for line in _lines_in_file(path, files[path] == 1))
    return found


def _shown(path: str) -> str:
    cwd = os.getcwd()
    return os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path
