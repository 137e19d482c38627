"""retaincheck: is the ``retain_graph=True`` in your PyTorch script needed, and what does it cost?

Importing this package patches nothing.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
