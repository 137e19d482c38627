"""What the code does between a retaining ``backward()`` and the call that reuses its graph.

Summing the losses into one ``backward()`` gives the same gradients only when nothing between
the two calls reads, zeroes or steps with a gradient: an adversarial loop that reads the
input's ``.grad`` after the first call, a ``zero_grad()`` or an optimizer step between them,
each depends on the first call's gradient standing alone. This module reads the source
between the two call sites (the lines after the first call's statement and before the second
one; for a later run of the same line, or a reuse by a line above it, the rest of the
innermost loop around both) and looks for ``.grad`` (read, written or zeroed),
``zero_grad()``, ``.step()`` and the ``clip_grad_*`` helpers (a function called there that
does so out of sight is not seen; the optimizer steps the audit counts are).
Where it cannot tell (the calls are in different files or functions, no loop holds both, the
source is gone), it answers "touched": a suggestion to sum is then left out.
"""

from __future__ import annotations

import ast
import linecache

_trees: dict[str, ast.Module | None] = {}
_STEPPING = frozenset({"zero_grad", "step"})


def _tree(filename: str) -> ast.Module | None:
    if filename not in _trees:
        source = "".join(linecache.getlines(filename))
        try:
            _trees[filename] = ast.parse(source) if source else None
        except (SyntaxError, ValueError):
            _trees[filename] = None
    return _trees[filename]


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


def _span(stmt: ast.stmt) -> range:
    return range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)


def _innermost(tree: ast.AST, kinds, lines) -> ast.AST | None:
    """The innermost node of one of ``kinds`` whose lines hold all ``lines``."""
    found = None
    for node in ast.walk(tree):
        if isinstance(node, kinds) and all(line in _span(node) for line in lines):
            if found is None or len(_span(node)) <= len(_span(found)):
                found = node
    return found


def _simple_statements(node: ast.AST):
    """Every statement under ``node`` that holds no other statement."""
    for child in ast.walk(node):
        if isinstance(child, ast.stmt) and not any(
            isinstance(c, ast.stmt) for c in ast.iter_child_nodes(child)
        ):
            yield child
        elif isinstance(child, (ast.For, ast.While, ast.If, ast.With, ast.Try)):
            # their headers (the loop's iterable, the condition) run too
            for part in ("iter", "test", "items"):
                value = getattr(child, part, None)
                if isinstance(value, ast.AST):
                    yield value
                elif isinstance(value, list):
                    yield from value


def _function(tree: ast.Module, line: int, first: int) -> ast.AST | None:
    """The function whose code starts at ``first`` (the module for module-level code)."""
    scope_kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    scope = _innermost(tree, scope_kinds, [line])
    if scope is None:
        return tree if first <= 1 or line >= first else None
    return scope


def _region(scope: ast.AST, line_a: int, line_b: int) -> list | None:
    """The code that runs between a call on ``line_a`` and a later one on ``line_b`` of one
    run of ``scope``, or None when it cannot tell."""
    stmt_a = _innermost(scope, ast.stmt, [line_a])
    stmt_b = _innermost(scope, ast.stmt, [line_b])
    if stmt_a is None or stmt_b is None:
        return None
    end_a = stmt_a.end_lineno or line_a
    if stmt_b.lineno > end_a:  # straight-line: what lies between the two statements
        return [s for s in _simple_statements(scope) if end_a < s.lineno < stmt_b.lineno]
    # a later run of the same line, or a reuse above it: the loop around both runs again
    loop = _innermost(scope, (ast.For, ast.While, ast.AsyncFor), [line_a, line_b])
    if loop is None:
        return None
    skip = set(_span(stmt_a)) | set(_span(stmt_b))
    return [s for s in _simple_statements(loop) if s.lineno not in skip]


def _rest(frame) -> bool | None:
    """Does the rest of an inner frame's function (all but the call's statement) touch a
    gradient? None when it cannot tell."""
    filename, line, first = frame
    tree = _tree(filename)
    scope = _function(tree, line, first) if tree is not None else None
    if scope is None or scope is tree:
        return None
    stmt = _innermost(scope, ast.stmt, [line])
    skip = set(_span(stmt)) if stmt is not None else {line}
    return any(_touches(s) for s in _simple_statements(scope) if s.lineno not in skip)


def grads_touched_between(first: tuple, second: tuple) -> bool:
    """True unless the code run between a call and a later one that reuses its graph is known
    not to read, zero or step with a gradient. Each call is given by its stack of user
    frames, innermost first: ``((file name, line, first line of the function), ...)``."""
    a, b = list(reversed(first)), list(reversed(second))  # outermost first
    i = 0
    while i < len(a) and i < len(b) and a[i] == b[i]:
        i += 1
    if i == len(a) == len(b):
        # The same stack twice: a loop around one of its lines ran it again. The inner
        # frames run whole between the two (but for the call itself).
        for depth in range(len(a) - 1, -1, -1):
            filename, line, first_line = a[depth]
            tree = _tree(filename)
            scope = _function(tree, line, first_line) if tree is not None else None
            if scope is None:
                return True
            loop = _innermost(scope, (ast.For, ast.While, ast.AsyncFor), [line])
            if loop is not None:
                region = _region(scope, line, line)
                if region is None:
                    return True
                inner = [_rest(f) for f in a[depth + 1 :]]
                return any(_touches(s) for s in region) or any(r is not False for r in inner)
        return True
    if i >= len(a) or i >= len(b):
        return True
    (file_a, line_a, first_a), (file_b, line_b, first_b) = a[i], b[i]
    if (file_a, first_a) != (file_b, first_b):
        return True
    tree = _tree(file_a)
    scope = _function(tree, line_a, first_a) if tree is not None else None
    if scope is None:
        return True
    region = _region(scope, line_a, line_b)
    if region is None or any(_touches(s) for s in region):
        return True
    return any(_rest(f) is not False for f in (*a[i + 1 :], *b[i + 1 :]))
