"""Deprecated: the file runner moved to ``isokernel.scenes`` (files in, files
out). This module re-exports its names for one release and warns on import."""

import warnings

from ..scenes import *  # noqa: F403 - the old module's names, unchanged
from ..scenes import __all__  # noqa: F401

warnings.warn("isokernel.models.run moved to isokernel.scenes; import it from there "
              "(isokernel.models.run will be removed in the next release)",
              DeprecationWarning, stacklevel=2)
