"""Science models shipped with isokernel, written once with ``isokernel.numpy``."""
