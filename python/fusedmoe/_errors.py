"""The exception types (defined by the C++ core) and Python-side constructors for them.

Messages raised from Python follow the C++ library's format exactly:
``invalid argument '<name>': expected <what>, got <actual>``.
"""

from __future__ import annotations

from ._core import FusedMoEError, InvalidArgument, Unsupported

__all__ = ["FusedMoEError", "InvalidArgument", "Unsupported", "invalid_argument", "unsupported"]


def invalid_argument(argument: str, expected: str, actual: object) -> InvalidArgument:
    """An :class:`InvalidArgument` (a ``ValueError``) worded like the C++ one."""
    err = InvalidArgument("invalid argument '%s': expected %s, got %s" % (argument, expected, actual))
    err.argument = argument
    return err


def unsupported(message: str) -> Unsupported:
    """An :class:`Unsupported` (a ``NotImplementedError``): a valid request fusedmoe cannot do."""
    return Unsupported(message)
