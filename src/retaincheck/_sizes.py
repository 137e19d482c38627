"""Saved tensors of a graph node, and the bytes of the storages they hold.

A node's saved tensors are what ``retain_graph=False`` frees: after a backward pass executes a
node, the engine calls its ``release_variables()`` unless the graph is kept
(``torch/csrc/autograd/engine.cpp``, ``Engine::evaluate_function``: after ``call_function``,
``if (!graph_task->keep_graph_) fn.release_variables();``).
A later pass that executes the node again unpacks them, and ``SavedVariable::unpack``
(``torch/csrc/autograd/saved_variable.cpp``) raises ``Trying to backward through the graph a
second time`` for a saved tensor that was defined and has been freed. A node without defined
saved tensors (``AddBackward0``, ``SumBackward0``, ...) runs again without error.
"""

from __future__ import annotations

import re

# Nodes generated from derivatives.yaml and custom Functions expose every saved tensor as a
# ``_raw_saved_<name>`` attribute. Any other node (``CopySlices``, a C++ custom function) may
# hold saved tensors that Python cannot see: it is treated as holding some ("opaque").
_GENERATED = re.compile(r"Backward\d*$")

_types: dict[type, tuple[tuple[str, ...], bool]] = {}


def saved_tensor_names(node_type: type) -> tuple[tuple[str, ...], bool]:
    """(the ``_raw_saved_*`` attributes of a node type, whether the type is opaque)."""
    known = _types.get(node_type)
    if known is None:
        names = tuple(a for a in dir(node_type) if a.startswith("_raw_saved_"))
        opaque = not names and not _GENERATED.search(node_type.__name__)
        known = _types[node_type] = (names, opaque)
    return known


def saved_tensors(node, tensor_type) -> tuple[list, bool]:
    """(the defined saved tensors of ``node``, whether the node may hold saved tensors Python
    cannot see). Reads the packed values: never calls an unpack hook."""
    names, opaque = saved_tensor_names(type(node))
    found = []
    for name in names:
        try:
            saved = getattr(node, name)
        except Exception:  # not available: assume it holds something
            opaque = True
            continue
        items = saved if isinstance(saved, (list, tuple)) else (saved,)
        for item in items:
            try:
                data = item.data  # None for a tensor that was never saved or is freed
            except Exception:
                opaque = True
                continue
            if isinstance(data, tensor_type):
                found.append(data)
            elif data is not None:
                opaque = True  # packed by a saved_tensors_hooks pack hook: not a tensor
        if isinstance(saved, (list, tuple)) and not found:
            opaque = True  # a released TensorList raises on unpack, even an empty one
    if not found and _python_function(node):
        # A custom Function's node (and torch.compile's CompiledFunctionBackward) is freed by
        # PyNode::release_variables whatever it saved (None, or nothing): a later
        # ctx.saved_tensors raises (torch/csrc/autograd/python_function.cpp,
        # THPFunction_saved_tensors -> unpack_saved_variables checks has_freed_buffers).
        opaque = True
    return found, opaque


def _python_function(node) -> bool:
    try:
        from torch.autograd.function import BackwardCFunction
    except Exception:  # pragma: no cover - an older torch: assume a Python node
        return hasattr(type(node), "_raw_saved_tensors")
    return isinstance(node, BackwardCFunction) or hasattr(type(node), "_raw_saved_tensors")


def storage_key(tensor):
    """((device, data_ptr), nbytes) of the tensor's storage, or None."""
    if tensor is None:
        return None
    try:
        storage = tensor.untyped_storage()
        return (str(tensor.device), storage.data_ptr()), storage.nbytes()
    except Exception:
        return None


def distinct_bytes(storage_lists) -> int:
    """Bytes of the distinct storages in an iterable of ``((key, nbytes), ...)`` tuples."""
    seen: dict = {}
    for storages in storage_lists:
        for key, nbytes in storages:
            seen[key] = nbytes
    return sum(seen.values())


def human(n: int, lang: str = "en") -> str:
    """``"232 bytes"`` (``"232 字节"`` in Chinese), ``"3.5 KiB"``, ``"1.2 MiB"``: KiB and larger
    with one decimal."""
    if n < 1024:
        from ._messages import message

        return message("bytes", lang, n=n)
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")
