"""NVML's failures, by return code (nvml.h): which one an exception is, which mean that NVML
will not answer again or has no such query, and why NVML could not start, in one line. Compared
by value, or by the name of pynvml's error class, so that a fake module at the ``pynvml`` boundary
needs no class hierarchy. Torch-free, pynvml-free."""

from __future__ import annotations

NO_PERMISSION = 4
NOT_SUPPORTED = 3
DRIVER_NOT_LOADED = 9
LIBRARY_NOT_FOUND = 12
FUNCTION_NOT_FOUND = 13
_NAMES = {  # pynvml's class for each: NVMLError_<name>
    NOT_SUPPORTED: "NotSupported",
    NO_PERMISSION: "NoPermission",
    DRIVER_NOT_LOADED: "DriverNotLoaded",
    LIBRARY_NOT_FOUND: "LibraryNotFound",
    FUNCTION_NOT_FOUND: "FunctionNotFound",
}
# Failures after which no query will answer again (the GPU or the driver is gone): the sampler
# says so once, as an "error" event (what="nvml"), and stops; the workload keeps running.
GONE: dict[int, str] = {
    1: "NVML is no longer initialised",
    DRIVER_NOT_LOADED: "the NVIDIA driver is no longer loaded",
    15: "the GPU has fallen off the bus (GPU is lost)",
    16: "the GPU needs a reset",
    18: "the NVIDIA driver changed under NVML (driver/library version mismatch)",
    28: "the GPU is no longer found",
}


def error_code(exc: BaseException) -> int | None:
    """An NVML error's return code (None: not an NVMLError)."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def is_error(exc: BaseException, *codes: int) -> bool:
    """``exc`` is one of NVML's failures ``codes``: by its return code, or by pynvml's class name."""
    code, name = error_code(exc), type(exc).__name__
    return any(code == c or name == f"NVMLError_{_NAMES[c]}" for c in codes)


def gone_reason(exc: BaseException) -> str | None:
    """Why NVML will not answer again, when ``exc`` says it is gone (``GONE``); else None."""
    code = error_code(exc)
    return GONE.get(code) if code is not None else None


def is_unsupported(exc: BaseException) -> bool:
    """NVML says this GPU (or driver) has no such query: asking again will not help."""
    if isinstance(exc, AttributeError):  # an nvidia-ml-py without this query
        return True
    return is_error(exc, NOT_SUPPORTED, FUNCTION_NOT_FOUND)


def unavailable_reason(exc: BaseException) -> str:
    """One clear line for a failed ``nvmlInit``."""
    if isinstance(exc, ImportError):
        return "the nvidia-ml-py package (pynvml) is not installed"
    if is_error(exc, LIBRARY_NOT_FOUND):
        return "NVML library (libnvidia-ml) not found: no NVIDIA driver on this machine"
    if is_error(exc, DRIVER_NOT_LOADED):
        return "the NVIDIA driver is not loaded"
    return f"NVML failed to start: {exc}"
