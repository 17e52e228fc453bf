"""Exceptions users can catch. Each message names the op, the user's source
line, the problem and the fix."""

from __future__ import annotations


class IsokernelError(Exception):
    """Base class of every error isokernel raises on purpose."""


class DTypeError(IsokernelError, TypeError):
    """Operands of different dtypes, or a dtype an op does not accept."""


class ShapeError(IsokernelError, ValueError):
    """Operand shapes that do not fit the op."""


class TracerError(IsokernelError, TypeError):
    """A traced value used where a concrete Python value is needed, or a
    tracer that escaped the function it was recorded in."""


class BackendUnavailableError(IsokernelError, RuntimeError):
    """A device or strategy that cannot run here; never answered by a run
    on another device."""


class PlanningError(IsokernelError, RuntimeError):
    """A graph with a node that no capsule of the chosen profile accepts."""


class GraphError(IsokernelError, ValueError):
    """A malformed graph, found by ``verify``."""


class DifferentiationError(IsokernelError, TypeError):
    """A function or value that a transform (grad, jacobian, vmap ...) cannot
    handle as used: integer outputs, a non-scalar output under grad, forward
    mode through a custom_vjp function."""
