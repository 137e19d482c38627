"""What the code does between a retaining ``backward()`` and the call that reuses its graph.

Summing the losses into one ``backward()`` gives the same gradients only when nothing between
the two calls reads, zeroes or steps with a gradient: an adversarial loop that reads the
input's ``.grad`` after the first call, a ``zero_grad()`` or an optimizer step between them,
each depends on the first call's gradient standing alone. This module reads the source
between the two call sites (the lines after the first call's statement and before the second
one; for a later run of the same line, or a reuse by a line above it, the rest of the
innermost loop around both) and looks for ``.grad`` (read, written or zeroed),
``zero_grad()``, ``.step()`` and the ``clip_grad_*`` helpers (a function called there that
does so out of sight is not seen; the optimizer steps the audit counts are). A gradient hook
registered anywhere in a file on either call's stack (``register_hook``, a module's
``register_full_backward_hook``, ``register_multi_grad_hook``, ...) counts as a read between
them: it sees each call's gradient on its own, and a sum would give it one.
Where it cannot tell (the calls are in different files or functions, no loop holds both, the
source is gone), it answers "touched": a suggestion to sum is then left out.
"""

from __future__ import annotations

import ast
import linecache
import os

_indexes: dict[tuple, _Index | None] = {}
_answers: dict[tuple, bool] = {}
_STEPPING = frozenset({"zero_grad", "step"})
# Registrations of hooks that see a gradient during a backward pass: on a tensor or node
# (register_hook, register_prehook, register_post_accumulate_grad_hook), on a module
# (register_full_backward_hook, register_full_backward_pre_hook, register_backward_hook,
# torch.nn.modules.module.register_module_full_backward_hook, ...), on several tensors
# (torch.autograd.graph.register_multi_grad_hook).
_HOOKS = ("register_hook", "register_prehook", "register_post_accumulate_grad_hook",
          "register_multi_grad_hook")


def _registers_a_gradient_hook(tree: ast.AST) -> bool:
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in _HOOKS or ("backward" in name and name.startswith("register_")
                                  and "hook" in name):
                return True
    return False


def _touches(node: ast.AST) -> bool:
    """Does this code read, write or zero a gradient, or step an optimizer?"""
    calls = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            if n.attr == "grad" and id(n) not in calls:  # x.grad, p.grad = None, x.grad.zero_()
                return True
            if n.attr in _STEPPING and id(n) in calls:
                return True
        name = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) else ""
        if name.startswith("clip_grad") or name == "zero_grad":
            return True
    return False


class _Index:
    """One file's statements, loops and functions by line, each simple statement (or compound
    statement's header) marked if it touches a gradient; built once per file version."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.hooks = _registers_a_gradient_hook(tree)  # a hook there sees each gradient
        self.stmts, self.loops, self.scopes, self.simple = [], [], [], []
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt):
                self.stmts.append(node)
                if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
                    self.loops.append(node)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.scopes.append(node)
                if not any(isinstance(c, ast.stmt) for c in ast.iter_child_nodes(node)):
                    self.simple.append((node.lineno, _touches(node)))
                else:  # a compound statement's header (a loop's iterable, a condition)
                    for part in ("iter", "test", "items", "target"):
                        value = getattr(node, part, None)
                        parts = value if isinstance(value, list) else [value]
                        for item in parts:
                            if isinstance(item, ast.AST):
                                self.simple.append((node.lineno, _touches(item)))

    @staticmethod
    def _innermost(nodes, lines):
        found = None
        for node in nodes:
            end = node.end_lineno or node.lineno
            if all(node.lineno <= line <= end for line in lines) and (
                found is None or end - node.lineno <= found[1] - found[0]
            ):
                found = (node.lineno, end, node)
        return found

    def scope(self, line: int):
        """(first, last line) of the innermost function around ``line``, or the module's."""
        found = self._innermost(self.scopes, [line])
        return (found[0], found[1]) if found else (1, 10**9)

    def stmt(self, line: int, within):
        found = self._innermost(
            [s for s in self.stmts if within[0] <= s.lineno and s is not None], [line]
        )
        return (found[0], found[1]) if found else None

    def loop(self, lines, within):
        found = self._innermost([n for n in self.loops if within[0] <= n.lineno <= within[1]],
                                lines)
        return (found[0], found[1]) if found else None

    def touched(self, first: int, last: int, skip=()) -> bool:
        """Does a statement starting on lines ``first``..``last`` (but ``skip``) touch one?"""
        return any(t for line, t in self.simple if first <= line <= last and line not in skip)


def _index(filename: str) -> _Index | None:
    try:
        stat = os.stat(filename)
        key = (filename, stat.st_mtime, stat.st_size)
    except OSError:
        key = (filename, None, None)
    if key not in _indexes:
        source = "".join(linecache.getlines(filename))
        try:
            _indexes[key] = _Index(ast.parse(source)) if source else None
        except (SyntaxError, ValueError):
            _indexes[key] = None
    return _indexes[key]


def _region_touched(index: _Index, scope, line_a: int, line_b: int) -> bool | None:
    """Does the code between a call on ``line_a`` and a later one on ``line_b``, in one run of
    the function ``scope`` spans, touch a gradient? None when it cannot tell."""
    stmt_a, stmt_b = index.stmt(line_a, scope), index.stmt(line_b, scope)
    if stmt_a is None or stmt_b is None:
        return None
    if stmt_b[0] > stmt_a[1]:  # straight-line: what lies between the two statements
        return index.touched(stmt_a[1] + 1, stmt_b[0] - 1)
    # a later run of the same line, or a reuse above it: the loop around both runs again
    loop = index.loop([line_a, line_b], scope)
    if loop is None:
        return None
    skip = set(range(stmt_a[0], stmt_a[1] + 1)) | set(range(stmt_b[0], stmt_b[1] + 1))
    return index.touched(loop[0], loop[1], skip)


def _rest_touched(frame) -> bool | None:
    """Does the rest of an inner frame's function (all but the call's statement) touch a
    gradient? None when it cannot tell."""
    filename, line, _ = frame
    index = _index(filename)
    if index is None:
        return None
    scope = index.scope(line)
    if scope == (1, 10**9):
        return None
    stmt = index.stmt(line, scope)
    skip = set(range(stmt[0], stmt[1] + 1)) if stmt else {line}
    return index.touched(scope[0] + 1, scope[1], skip)


def grads_touched_between(first: tuple, second: tuple) -> bool:
    """True unless the code run between a call and a later one that reuses its graph is known
    not to read, zero or step with a gradient. Each call is given by its stack of user
    frames, innermost first: ``((file name, line, first line of the function), ...)``."""
    stamps = []
    for filename in sorted({f[0] for f in (*first, *second)}):
        try:
            stat = os.stat(filename)
            stamps.append((stat.st_mtime, stat.st_size))
        except OSError:
            stamps.append(None)
    key = (first, second, tuple(stamps))  # a file rewritten since: asked again
    answer = _answers.get(key)
    if answer is None:
        answer = _answers[key] = _between(first, second)
    return answer


def _between(first: tuple, second: tuple) -> bool:
    for filename in {f[0] for f in (*first, *second)}:
        index = _index(filename)
        if index is None or index.hooks:
            return True
    a, b = list(reversed(first)), list(reversed(second))  # outermost first
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    if i == len(a) == len(b):
        # The same stack twice: a loop around one of its lines ran it again. The inner
        # frames run whole between the two (but for the call itself).
        for depth in range(len(a) - 1, -1, -1):
            filename, line, _ = a[depth]
            index = _index(filename)
            if index is None:
                return True
            scope = index.scope(line)
            if index.loop([line], scope) is not None:
                region = _region_touched(index, scope, line, line)
                inner = [_rest_touched(f) for f in a[depth + 1 :]]
                return region is not False or any(r is not False for r in inner)
        return True
    if i >= len(a) or i >= len(b):
        return True
    (file_a, line_a, first_a), (file_b, line_b, first_b) = a[i], b[i]
    if (file_a, first_a) != (file_b, first_b):
        return True
    index = _index(file_a)
    if index is None:
        return True
    scope = index.scope(line_a)
    if index.scope(line_b) != scope or _region_touched(index, scope, line_a, line_b) is not False:
        return True
    return any(_rest_touched(f) is not False for f in (*a[i + 1 :], *b[i + 1 :]))
