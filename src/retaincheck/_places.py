"""Where a file lies: the standard library's or an installed package's, or the user's own.
Apart from ``_fix`` so that the audited run's end (``__main__._end_like_python``) can ask
without importing libcst (0.4 s there, for nothing)."""

from __future__ import annotations

import functools
import os
import sysconfig


@functools.cache  # the interpreter's own folders do not change while it runs; once, not per file
def _protected_dirs() -> tuple[str, ...]:
    import site

    names = ("stdlib", "platstdlib", "purelib", "platlib")
    paths = {sysconfig.get_paths().get(n) for n in names}
    try:  # pip install --user (rev28a F6), and the interpreter's other site folders
        paths.update([site.getusersitepackages(), *site.getsitepackages()])
    except AttributeError:  # a virtualenv's old site module
        pass
    return tuple(os.path.realpath(p) + os.sep for p in paths if p)


def _installed(real: str) -> bool:
    """A file of the standard library or of an installed package: in one of this interpreter's
    folders for them, or in any ``site-packages`` or ``dist-packages`` folder (another
    environment's, a folder put on ``sys.path`` by hand)."""
    parts = real.split(os.sep)
    return ("site-packages" in parts or "dist-packages" in parts
            or real.startswith(_protected_dirs()) or _recorded(real))


def _recorded(real: str) -> bool:
    """Whether an installed distribution lists the file in its ``*.dist-info/RECORD``, in a
    folder above it: a package put in a folder of its own (``pip install --target DIR``,
    rev29a G1)."""
    import csv

    folder = os.path.dirname(real)
    for _ in range(8):
        try:
            infos = [e.path for e in os.scandir(folder)
                     if e.name.endswith(".dist-info") and e.is_dir()]
        except OSError:
            infos = []
        name = os.path.relpath(real, folder).replace(os.sep, "/")
        for info in infos:
            try:
                with open(os.path.join(info, "RECORD"), encoding="utf-8", newline="") as f:
                    if any(row and row[0] == name for row in csv.reader(f)):
                        return True
            except OSError:
                continue
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return False
