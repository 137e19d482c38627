"""retaincheck: is the ``retain_graph=True`` in your PyTorch script needed, and what does it cost?

Wrap the code in [`audit`][retaincheck.audit], or run a whole script with
``python -m retaincheck train.py``. Importing this package patches nothing; only an active
[`audit`][retaincheck.audit] does.
"""

from ._audit import audit
from ._report import CallRecord, Report

__version__ = "0.1.0"
__all__ = ["CallRecord", "Report", "__version__", "audit"]
