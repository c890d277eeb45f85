"""Build models in code: :class:`ModelBuilder` (re-exported as ``jaxmbd.ModelBuilder``).

The builder sits above the types it builds (the :class:`~jaxmbd.Model` pytree, joints,
force elements, contact, sensors): they never import it."""

from .builder import ModelBuilder

__all__ = ["ModelBuilder"]
