"""The ``cuda-fused`` strategy: ``cuda-eager`` with a kernel per fused form.

The recording's fused forms (``transforms.fusion``: scaled product
exponential, affine exponential, Gaussian, logsumexp, reciprocal square
root) each run as one elementwise kernel: the form's body graph through
the shared C emitter, wrapped like a megakernel region and compiled with
``--fmad=false``. The body holds exactly the operations the form stands
for, in the same association, so the kernel performs the composition's
roundings with the intermediates in registers: bit-identical to
``cuda-eager``, which runs the same body one kernel per op. A form whose
body is not one row region (a logsumexp along the pixel axis) runs as its
composition, and the report counts both.
"""

from __future__ import annotations

from .cuda_eager import FORM_PROVIDER, PROVIDERS, CudaEagerExecutable, device_report_lines

PROFILE_PROVIDERS = (FORM_PROVIDER, *PROVIDERS)


class CudaFusedExecutable(CudaEagerExecutable):
    strategy = "cuda-fused"
    fused_kernels = True
    forms_run = ("cuda-fused runs each form as one kernel (its body in registers, "
                 "--fmad=false), or as its composition where the body is not one row region")

    def report_lines(self) -> list[tuple[str, str]]:
        ex = self.ex
        lines = device_report_lines(ex, len(ex._elementwise), "elementwise")
        lines.append(("forms", f"{ex.forms_as_kernels} form call(s) as one kernel, "
                               f"{ex.forms_as_composition} as their composition, so far"))
        return lines
