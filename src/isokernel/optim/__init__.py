"""``isokernel.optim``: optax's optimizers as pure functions over pytrees.

``opt = optim.adam(1e-3)``; ``state = opt.init(params)``; ``updates, state =
opt.update(grads, state, params)``; ``params = optim.apply_updates(params,
updates)``. Each update follows optax's operation order, so in float64 on
the CPU it gives optax's bits (``docs/training.md`` lists the exceptions),
eagerly and under ``isokernel.jit`` on every CPU strategy.
"""

from ._alias import adam, adamw, lbfgs, rmsprop, sgd
from ._base import (
    EmptyState,
    GradientTransformation,
    MaskedNode,
    apply_updates,
    chain,
    identity,
)
from ._lbfgs import (
    ScaleByLBFGSState,
    ScaleByZoomLinesearchState,
    ZoomLinesearchInfo,
    scale_by_lbfgs,
    scale_by_zoom_linesearch,
    value_and_grad_from_state,
)
from ._schedules import (
    constant_schedule,
    cosine_decay_schedule,
    exponential_decay,
    join_schedules,
    linear_schedule,
    piecewise_constant_schedule,
    polynomial_schedule,
    warmup_cosine_decay_schedule,
)
from ._transform import (
    MaskedState,
    ScaleByAdamState,
    ScaleByRmsState,
    ScaleByRStdDevState,
    ScaleByScheduleState,
    TraceState,
    add_decayed_weights,
    clip_by_global_norm,
    global_norm,
    masked,
    scale,
    scale_by_adam,
    scale_by_learning_rate,
    scale_by_rms,
    scale_by_schedule,
    scale_by_stddev,
    trace,
)

__all__ = [
    "EmptyState", "GradientTransformation", "MaskedNode", "MaskedState", "ScaleByAdamState",
    "ScaleByRStdDevState", "ScaleByRmsState", "ScaleByScheduleState", "TraceState", "adam",
    "adamw", "add_decayed_weights", "apply_updates", "chain", "clip_by_global_norm",
    "constant_schedule", "cosine_decay_schedule", "exponential_decay", "global_norm",
    "identity", "join_schedules", "linear_schedule", "masked", "piecewise_constant_schedule",
    "polynomial_schedule", "rmsprop", "scale", "scale_by_adam", "scale_by_learning_rate",
    "scale_by_rms", "scale_by_schedule", "scale_by_stddev", "sgd", "trace",
    "warmup_cosine_decay_schedule", "lbfgs", "scale_by_lbfgs", "scale_by_zoom_linesearch",
    "value_and_grad_from_state", "ScaleByLBFGSState", "ScaleByZoomLinesearchState",
    "ZoomLinesearchInfo",
]
