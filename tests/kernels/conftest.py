"""The kernel tests run on both paths of the attention kernels: numpy (the
reference) and compiled (numba, skipped where it is not installed)."""

import pytest

from skattn._kernels import compiled


@pytest.fixture(autouse=True, params=["numpy", "compiled", "short"])
def kernel_path(request, monkeypatch):
    """The path of the attention kernels this test runs on: numpy, compiled
    (the blocked kernels) or short (the short kernels), the compiled ones at
    every size; tests marked
    ``numpy_path`` (the numpy path's own tiles, or what the compiled kernels
    leave to it, given as the marker's ``reason``) run on numpy only, tests
    marked ``compiled_path`` (the switch between the paths) once."""
    if request.param != "compiled" and request.node.get_closest_marker("compiled_path"):
        pytest.skip("a test of the switch between the paths, run once")
    if request.param != "numpy":
        numpy_path = request.node.get_closest_marker("numpy_path")
        if numpy_path:
            pytest.skip(
                numpy_path.kwargs.get("reason", "a test of the numpy path's own tiles")
            )
        if compiled.kernels() is None and not request.node.get_closest_marker(
            "compiled_path"
        ):
            pytest.skip("numba is not installed (the [fast] extra)")
    monkeypatch.setattr(compiled, "_DISABLED", request.param == "numpy")
    # the compiled kernels at every size, not only where they pay off
    monkeypatch.setattr(compiled, "MIN_KEYS_PER_SQUARED_DIM", 0)
    kernel = {"compiled": "blocked", "short": "short"}.get(request.param)
    monkeypatch.setattr(compiled, "_FORWARD_KERNEL", kernel)
    monkeypatch.setattr(compiled, "_BACKWARD_KERNEL", kernel)
    return request.param
