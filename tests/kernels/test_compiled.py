"""The switch between the numpy and the compiled attention kernels, the
compiled kernels' own pieces, and the compiled layer norm against its numpy
path. Their results against the reference are the
tests of test_attention.py and test_attention_gradients.py, which run on both
paths (conftest.py)."""

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import shared_maps_on_two_cpus
from numpy.testing import assert_allclose, assert_array_equal
from threadpoolctl import threadpool_limits

import skattn
from skattn import AttentionClassifier, AttentionTransformer, _parallel
from skattn._kernels import compiled
from skattn._kernels.attention import attention_forward
from skattn._kernels.attention_backward import attention_backward
from skattn._model.units import layer_norm_backward, layer_norm_forward

pytestmark = pytest.mark.compiled_path

needs_numba = pytest.mark.skipif(
    compiled.kernels() is None, reason="numba is not installed (the [fast] extra)"
)
# the rule of the package (conftest.py sets it to 0 for the other tests)
MIN_KEYS_PER_SQUARED_DIM = compiled.MIN_KEYS_PER_SQUARED_DIM


def test_import_skattn_imports_no_numba():
    code = (
        "import sys, numpy, skattn\n"
        "skattn.multi_head_attention(numpy.ones((2, 3, 4)), *[numpy.eye(4)] * 3,"
        " n_heads=2)\n"
        "assert 'numba' not in sys.modules, 'import skattn imported numba'\n"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        env={"SKATTN_COMPILED": "0", "PATH": ""},
    )


def read_only_copy(tmp_path):
    """A copy of the package in which nobody, root included, can write a
    cache: read-only, and a file where the compiled kernels' ``__pycache__``
    would be (root writes through permissions, not into a file)."""
    site = tmp_path / "site"
    shutil.copytree(
        Path(skattn.__file__).parent,
        site / "skattn",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (site / "skattn" / "_kernels" / "__pycache__").touch()
    for path in [site, *site.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    return site


# Sequences of 4 tokens: the attention (heads of 16 features) is below the
# compiled kernels' crossovers, forward and backward, and takes the numpy path,
# so that the fit compiles one of the kernels, the layer norm's forward and
# backward passes (compiling the attention's passes, all JIT-compiled with the
# same options, took most of a minute more).
N_TOKENS = 4

FIT_READ_ONLY = f"""
import json, sys, warnings
import numpy as np
import skattn
from skattn import AttentionClassifier
from skattn._kernels import compiled

assert skattn.__file__.startswith(sys.argv[1]), skattn.__file__
rng = np.random.default_rng(0)
X = rng.standard_normal((4, {N_TOKENS}, 16)).astype(np.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    est = AttentionClassifier(max_iter=3, random_state=0).fit(X, [0, 1, 0, 1])
    proba = est.predict_proba(X)
from skattn._kernels import _numba_layer_norm

assert compiled.enabled()
assert _numba_layer_norm.forward.signatures and _numba_layer_norm.backward.signatures
json.dump(
    dict(
        loss=est.loss_curve_,
        proba=proba.tolist(),
        warnings=[str(w.message) for w in caught if "compiled" in str(w.message)],
    ),
    sys.stdout,
)
"""


def padded_pair(n_tokens, head_dim, n_arrays):
    """``n_arrays`` float32 arrays of two sequences of one head, and a key
    padding mask: the first sequence whole, the second of 150 keys."""
    rng = np.random.default_rng(0)
    shape = (2, 1, n_tokens, head_dim)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(n_arrays)]
    valid = np.array([n_tokens, 150])[:, None]
    return arrays, (np.arange(n_tokens) < valid)[:, None, None, :]


@needs_numba
@pytest.mark.parametrize("loops", [True, False], ids=["loops", "blas"])
@pytest.mark.parametrize("head_dim", [16, 32, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_compiled_forward_equals_the_numpy_path_at_each_head_width(
    monkeypatch, head_dim, causal, loops
):
    """The forward pass's products, in compiled loops or by BLAS, at heads of
    16, 32 and 64 features: 301 queries (a block of 256 rows and a padded one;
    blocks of 32 for BLAS), 301 and 150 valid keys (key blocks of 32 and a
    last one of no multiple of 4) equal the numpy path to float rounding."""
    (q, k, v), padding = padded_pair(301, head_dim, n_arrays=3)
    monkeypatch.setattr(compiled, "_PRODUCTS_IN_LOOPS", loops)
    results = []
    for disabled in (False, True):
        monkeypatch.setattr(compiled, "_DISABLED", disabled)
        monkeypatch.setattr(compiled, "MIN_KEYS_PER_SQUARED_DIM", 0)
        out, lse, _ = attention_forward(q, k, v, mask=padding, causal=causal)
        results.append((out, lse))
    (out, lse), (expected_out, expected_lse) = results
    assert_allclose(out, expected_out, rtol=1e-4, atol=1e-5)
    assert_allclose(lse, expected_lse, rtol=1e-5, atol=1e-5)


@needs_numba
@pytest.mark.parametrize("loops", [True, False], ids=["loops", "blas"])
@pytest.mark.parametrize("head_dim", [16, 32, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_compiled_backward_equals_the_numpy_path_at_each_head_width(
    monkeypatch, head_dim, causal, loops
):
    """The backward pass's products, in compiled loops or by BLAS, at heads of
    16, 32 and 64 features: 601 queries (blocks of 64 and a last one of 25;
    of 32 for BLAS), 601 and 150 valid keys (a block of 512 and one of 89,
    or one of 150: no multiple of 4; blocks of 256 for BLAS) give the numpy
    path's gradients to float rounding, from the same forward outputs."""
    (q, k, v, d_out), padding = padded_pair(601, head_dim, n_arrays=4)
    monkeypatch.setattr(compiled, "_PRODUCTS_IN_LOOPS", loops)
    monkeypatch.setattr(compiled, "MIN_KEYS_PER_SQUARED_DIM", 0)
    monkeypatch.setattr(compiled, "_DISABLED", True)
    out, lse, _ = attention_forward(q, k, v, mask=padding, causal=causal)
    results = []
    for disabled in (False, True):
        monkeypatch.setattr(compiled, "_DISABLED", disabled)
        results.append(
            attention_backward(d_out, q, k, v, out, lse, mask=padding, causal=causal)
        )
    for grad, expected in zip(*results, strict=True):
        assert_allclose(grad, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


@needs_numba
@pytest.mark.parametrize("n_tokens", [40, 300], ids=["short", "blocked"])
def test_compiled_outputs_and_gradients_keep_the_memory_order_of_their_inputs(
    monkeypatch, n_tokens
):
    """Heads split from the tokens' features (``(N, H, T, D)`` views of
    ``(N, T, H * D)`` memory, as the model passes them) give an output and
    gradients in that memory order, whose heads merge back without a copy;
    a C-ordered input gives C-ordered results. Their values are the same."""
    monkeypatch.setattr(compiled, "MIN_KEYS_PER_SQUARED_DIM", 0)
    rng = np.random.default_rng(0)
    tokens = [rng.standard_normal((3, n_tokens, 32), dtype=np.float32) for _ in "qkvd"]
    split = [merged.reshape(3, n_tokens, 2, 16).swapaxes(1, 2) for merged in tokens]
    results = {}
    for name, (q, k, v, d_out) in (
        ("split", split),
        ("c_ordered", [np.ascontiguousarray(a) for a in split]),
    ):
        out, lse, _ = attention_forward(q, k, v)
        grads = attention_backward(d_out, q, k, v, out, lse)
        for array, given in zip((out, *grads), (v, q, k, v), strict=True):
            assert array.strides == given.strides
        results[name] = (out, *grads)
    for array in results["split"]:
        merged = array.swapaxes(1, 2).reshape(3, n_tokens, 32)
        assert np.shares_memory(merged, array)
    for split_array, c_array in zip(*results.values(), strict=True):
        assert_array_equal(split_array, c_array)


@needs_numba
@pytest.mark.parametrize("n_tokens", [40, 300], ids=["short", "blocked"])
@pytest.mark.parametrize("order", ["fortran", "reversed_features"])
def test_compiled_results_of_inputs_without_contiguous_rows_are_c_ordered(
    monkeypatch, n_tokens, order
):
    """Inputs whose rows are not contiguous (Fortran order, a reversed last
    axis) give C-ordered outputs and gradients, which the kernels write in
    whole rows, equal to those of C-ordered inputs to float rounding (the
    correction term's sum runs in another order)."""
    monkeypatch.setattr(compiled, "MIN_KEYS_PER_SQUARED_DIM", 0)
    rng = np.random.default_rng(0)
    arrays = [
        rng.standard_normal((2, 2, n_tokens, 16), dtype=np.float32) for _ in "qkvd"
    ]
    if order == "fortran":
        strided = [np.asfortranarray(a) for a in arrays]
    else:
        strided = [np.ascontiguousarray(a[..., ::-1])[..., ::-1] for a in arrays]
    results = []
    for q, k, v, d_out in (arrays, strided):
        out, lse, _ = attention_forward(q, k, v)
        results.append((out, *attention_backward(d_out, q, k, v, out, lse)))
    for expected, got in zip(*results, strict=True):
        assert got.flags.c_contiguous
        assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@needs_numba
@pytest.mark.parametrize("kernel", ["short", "blocked"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_backward_leaves_inaccurate_recomputations_to_the_numpy_path(
    monkeypatch, kernel, dtype
):
    """Each compiled backward kernel checks the bound of its recomputed scores
    as recompute_error_bound computes it: queries of growing size give up
    (None) exactly where some row's bound exceeds RECOMPUTE_ERROR_MAX, even
    when that attention is the last of the batch, and attention_backward then
    gives the numpy path's renormalised gradients."""
    from skattn._kernels.attention_backward import (
        RECOMPUTE_ERROR_MAX,
        recompute_error_bound,
    )

    monkeypatch.setattr(compiled, "_BACKWARD_KERNEL", kernel)
    monkeypatch.setattr(compiled, "MIN_KEYS_PER_SQUARED_DIM", 0)
    rng = np.random.default_rng(0)
    q, k, v, d_out = (rng.standard_normal((3, 2, 40, 16)).astype(dtype) for _ in "qkvd")
    lengths = np.full((3, 2), 40, np.int64)
    sizes = [1.0, 10.0, 1e2, 1e3] + ([1e10, 1e12] if dtype == np.float64 else [])
    exceeded = []
    for size in sizes:
        q_big = q.copy()
        q_big[-1, -1] *= size  # the last attention of the batch only
        out, lse, _ = attention_forward(q_big, k, v)
        delta = np.sum(d_out * out, axis=-1)
        neg_lse = -np.where(np.isinf(lse), 0, lse)[..., None]
        bound = recompute_error_bound(q_big, k, neg_lse, dtype(0.25))
        grads = compiled.backward(
            d_out, q_big, k, v, lse, delta, lengths, False, 0.25, RECOMPUTE_ERROR_MAX
        )
        assert (grads is None) == bool((bound > RECOMPUTE_ERROR_MAX).any())
        exceeded.append(grads is None)
        if grads is None:
            monkeypatch.setattr(compiled, "_DISABLED", True)
            expected = attention_backward(d_out, q_big, k, v, out, lse)
            monkeypatch.setattr(compiled, "_DISABLED", False)
            got = attention_backward(d_out, q_big, k, v, out, lse)
            for grad, want in zip(got, expected, strict=True):
                assert_array_equal(grad, want)
    assert exceeded[0] is False and exceeded[-1] is True


@needs_numba
@pytest.mark.parametrize("kernel", ["short", "blocked"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("array", ["queries", "keys", "values"])
@pytest.mark.parametrize("causal", [False, True])
def test_compiled_forward_leaves_what_exceeds_its_range_to_the_numpy_path(
    monkeypatch, kernel, dtype, array, causal
):
    """Each compiled forward kernel checks its own range: an attention (the
    last of the batch) whose sum of values over its keys reaches a quarter of
    the dtype's largest number gives None, and so does one whose scores reach
    it: for the blocked kernel their bound ``|q| max|scale k|`` (infinite
    where a row's squared norm overflows the dtype), for the short kernel,
    which shifts each query by its largest score, that score; NaN queries or
    keys too (the short kernel's causal blocks find their largest scores by
    another loop). attention_forward then gives the numpy path's results,
    which divide them by powers of two; below it, and for NaN values, the
    kernel computes them, to the numpy path's rounding."""
    monkeypatch.setattr(compiled, "_FORWARD_KERNEL", kernel)
    rng = np.random.default_rng(0)
    arrays = {
        name: rng.standard_normal((3, 2, 40, 16)).astype(dtype)
        for name in ("queries", "keys", "values")
    }
    lengths = np.full((3, 2), 40, np.int64)
    ceiling = compiled.RANGE_CEILING[np.dtype(dtype).itemsize]
    # the entry of one token's 16 features that reaches the range: a sum of
    # 40 values at the ceiling, a row whose squared norm overflows (scores
    # of about 1e20 in float32, far below the ceiling)
    reach = ceiling / 40 if array == "values" else np.sqrt(np.finfo(dtype).max)
    bound_only = kernel == "short" and array != "values"  # scores in range
    cases = [
        (1 / 64, True),
        (4, bound_only),
        (ceiling / reach, False),  # entries at the ceiling: scores beyond it
        (np.nan, array == "values"),
    ]
    # a query that reads every key, causal or not; a key that most queries read
    token = -1 if array == "queries" else 3
    for factor, kept in cases:
        big = dict(arrays)
        big[array] = big[array].copy()
        big[array][-1, -1, token] = reach * factor
        q, k, v = big["queries"], big["keys"], big["values"]
        result = compiled.forward(q, k, v, lengths, causal, 0.25)
        assert (result is not None) == kept
        monkeypatch.setattr(compiled, "_DISABLED", True)
        expected = attention_forward(q, k, v, causal=causal)[:2]
        monkeypatch.setattr(compiled, "_DISABLED", False)
        got = attention_forward(q, k, v, causal=causal)[:2]
        rtol = 1e-5 if dtype == np.float32 else 1e-12
        for result, want in zip(got, expected, strict=True):
            if kept:  # to the rounding of the largest finite entry of each
                atol = rtol * np.nanmax(np.abs(want))
                assert_allclose(result, want, rtol=rtol, atol=atol)
            else:
                assert_array_equal(result, want)


def openblas(kernel, path="/site-packages/scipy.libs/libscipy_openblas.so"):
    return {"internal_api": "openblas", "architecture": kernel, "filepath": path}


@pytest.mark.parametrize(
    "flags, libraries, narrow",
    [
        ({"avx2", "avx512f"}, [openblas("Haswell")], ["Haswell"]),
        ({"avx2", "avx512f"}, [openblas("Zen"), openblas("SkylakeX")], ["Zen"]),
        ({"avx2", "avx512f"}, [openblas("SkylakeX")], []),
        ({"avx2"}, [openblas("Haswell")], []),  # both 256-bit
        ({"avx2", "avx512f"}, [{"internal_api": "mkl", "architecture": None}], []),
    ],
)
def test_blas_is_narrow_where_openblas_runs_256_bit_kernels_on_avx512(
    flags, libraries, narrow
):
    assert compiled.narrow_blas_kernels(flags, libraries) == narrow


@pytest.mark.parametrize(
    "libraries, kernels",
    [
        ([openblas("Haswell")], ["Haswell"]),
        ([openblas("Zen"), openblas("SkylakeX")], ["Zen"]),
        ([openblas("Sandybridge")], ["Sandybridge"]),
        ([openblas("SkylakeX")], []),
        ([openblas("Cooperlake")], []),
        ([{"internal_api": "mkl", "architecture": None}], []),
    ],
)
def test_loops_are_chosen_where_openblas_runs_a_kernel_without_avx512(
    libraries, kernels
):
    """Whatever the CPU: the compiled loops beat OpenBLAS's kernels of at most
    256-bit vectors at the blocks' sizes, and lose to its AVX-512 ones."""
    assert compiled.openblas_kernels_without_avx512(libraries) == kernels


@needs_numba
def test_products_stay_on_blas_where_numba_compiles_for_another_cpu(monkeypatch):
    """With ``NUMBA_CPU_NAME`` set, the loops' vectors are unknown: BLAS."""
    import numba

    monkeypatch.setattr(numba.config, "CPU_NAME", "generic")
    assert compiled._machine_prefers_loops.__wrapped__() is False


@needs_numba
def test_products_in_loops_follows_the_tests_setting_then_the_machine(monkeypatch):
    machine = compiled._machine_prefers_loops()
    assert isinstance(machine, bool)
    for setting in (True, False):
        monkeypatch.setattr(compiled, "_PRODUCTS_IN_LOOPS", setting)
        assert compiled.products_in_loops() is setting
    monkeypatch.setattr(compiled, "_PRODUCTS_IN_LOOPS", None)
    assert compiled.products_in_loops() is machine


@pytest.mark.parametrize("head_dim", [16, 32])
@pytest.mark.parametrize("loops", [True, False])
def test_backward_pass_hands_the_kernel_the_machines_choice(
    monkeypatch, head_dim, loops
):
    """compiled.backward passes the machine's choice of products_in_loops()
    to the kernel (a recording stand-in), whatever the heads' width."""
    seen = []

    class Kernels:
        @staticmethod
        def backward(*arguments):
            seen.append(arguments[-1])

    monkeypatch.setattr(compiled, "kernels", Kernels)
    monkeypatch.setattr(compiled, "_machine_prefers_loops", lambda: loops)
    monkeypatch.setattr(compiled, "_BACKWARD_KERNEL", "blocked")
    rng = np.random.default_rng(0)
    q, k, v, d_out = (rng.standard_normal((1, 2, 8, head_dim)) for _ in range(4))
    lse, delta = np.zeros((1, 2, 8)), np.zeros((1, 2, 8))
    lengths = np.full((1, 2), 8, np.int64)
    compiled.backward(d_out, q, k, v, lse, delta, lengths, False, 0.25, 2.0**-10)
    assert seen and all(choice is loops for choice in seen)


@needs_numba
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_read_only_install_without_a_numba_cache_fits_compiled(tmp_path, monkeypatch):
    """A read-only copy of the package, and no directory numba can cache in
    (NUMBA_CACHE_DIR, HOME and XDG_CACHE_HOME under a regular file): the
    kernels are compiled without a cache (here the layer norm's, see
    N_TOKENS), with one warning that names NUMBA_CACHE_DIR and
    SKATTN_COMPILED=0, and the fit gives the numpy path's result to float
    rounding."""
    site = read_only_copy(tmp_path)
    blocker = tmp_path / "file"  # nothing can be created under a file
    blocker.touch()
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "PYTHONDONTWRITEBYTECODE": "1",
        "NUMBA_CACHE_DIR": str(blocker / "numba"),
        "HOME": str(blocker / "home"),
        "XDG_CACHE_HOME": str(blocker / "cache"),
    }
    env.pop("SKATTN_COMPILED", None)
    result = subprocess.run(
        [sys.executable, "-c", FIT_READ_ONLY, str(site)],
        env=env,
        cwd=tmp_path,  # not a directory that holds the package
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    fitted = json.loads(result.stdout)
    assert len(fitted["warnings"]) == 1
    assert "NUMBA_CACHE_DIR" in fitted["warnings"][0]
    assert "SKATTN_COMPILED=0" in fitted["warnings"][0]
    monkeypatch.setattr(compiled, "_DISABLED", True)
    X = np.random.default_rng(0).standard_normal((4, N_TOKENS, 16))
    X = X.astype(np.float32)
    est = AttentionClassifier(max_iter=3, random_state=0).fit(X, [0, 1, 0, 1])
    assert_allclose(fitted["loss"], est.loss_curve_, rtol=1e-4)
    assert_allclose(fitted["proba"], est.predict_proba(X), rtol=1e-3, atol=1e-4)


SPAN_CACHE = """
import json, sys
import numpy as np
import skattn
from skattn._kernels import _numba_products

assert skattn.__file__.startswith(sys.argv[1]), skattn.__file__
ends = np.zeros(2, np.int64)
_numba_products._span(ends, ends, 0, 2)
stats = _numba_products._span.stats
json.dump(dict(hits=sum(stats.cache_hits.values()),
               misses=sum(stats.cache_misses.values())), sys.stdout)
"""


@needs_numba
def test_a_change_to_any_kernel_file_recompiles_every_cached_kernel(tmp_path):
    """numba checks a cached function against its own file only; the
    kernels' caches are stamped with every kernel source, so that a kernel
    never runs what it calls from another file as it was. Here: a cached
    function of _numba_products.py is loaded from the cache while nothing
    changes, and compiled again after a change to _numba_short.py alone."""
    site = tmp_path / "site"
    shutil.copytree(
        Path(skattn.__file__).parent,
        site / "skattn",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NUMBA_CACHE_DIR", None)  # the in-tree cache of the copy

    def run():
        result = subprocess.run(
            [sys.executable, "-c", SPAN_CACHE, str(site)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout)

    assert run() == {"hits": 0, "misses": 1}  # compiled, then cached
    assert run() == {"hits": 1, "misses": 0}  # from the cache
    with open(site / "skattn" / "_kernels" / "_numba_short.py", "a") as source:
        source.write("\n# another file of the kernels changed\n")
    assert run() == {"hits": 0, "misses": 1}


@needs_numba
def test_kernel_sources_digest_follows_every_kernel_file_and_no_other(tmp_path):
    from skattn._kernels._numba_products import sources_digest

    for name in ("_numba_a.py", "_numba_b.py", "other.py"):
        (tmp_path / name).write_text("x = 1\n")
    first = sources_digest.__wrapped__(tmp_path)
    (tmp_path / "other.py").write_text("x = 2\n")
    assert sources_digest.__wrapped__(tmp_path) == first
    (tmp_path / "_numba_b.py").write_text("x = 2\n")
    assert sources_digest.__wrapped__(tmp_path) != first
    assert sources_digest.__wrapped__(tmp_path / "missing") is None


def fails_to_compile(array):
    return undefined_name  # noqa: F821 (numba's typing fails)


def raises_when_run(array):
    raise ValueError("from the kernel")


def broken_kernels(monkeypatch, body):
    """The compiled attention forward pass and layer norm replaced by numba
    functions of their arguments that run ``body`` on their last; the
    compiled kernels on."""
    import numba

    from skattn._kernels import _numba_layer_norm

    body = numba.njit(body)
    forward = numba.njit(
        lambda q, k, v, n, c, s, a, b, i, j, out, lse, exceeded, ceiling, loops: body(
            lse
        )
    )
    layer_norm = numba.njit(lambda x, w, b, eps, out, x_hat, inv_std: body(inv_std))
    monkeypatch.setattr(compiled, "kernels", lambda: SimpleNamespace(forward=forward))
    monkeypatch.setattr(_numba_layer_norm, "forward", layer_norm)
    monkeypatch.setattr(compiled, "_DISABLED", False)
    monkeypatch.setattr(compiled, "_FAILED", False)


@needs_numba
@pytest.mark.parametrize("kernel", ["attention", "layer norm"])
def test_a_kernel_numba_cannot_compile_leaves_the_numpy_path_with_one_warning(
    monkeypatch, kernel
):
    """A compiled function that fails to compile (here a typing error): the
    numpy path computes, with one warning that names the cause and
    SKATTN_COMPILED=0, and the compiled kernels stay off."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 40, 8)).astype(np.float32)
    weight, bias = np.ones(8, np.float32), np.zeros(8, np.float32)

    def run():
        if kernel == "attention":
            return attention_forward(x, x, x)[0]
        return layer_norm_forward(x, weight, bias)[0]

    monkeypatch.setattr(compiled, "_DISABLED", True)
    expected = run()
    broken_kernels(monkeypatch, fails_to_compile)
    with pytest.warns(RuntimeWarning, match="SKATTN_COMPILED=0") as caught:
        out = run()
    assert len(caught) == 1 and "TypingError" in str(caught[0].message)
    assert not compiled.enabled()
    assert_array_equal(out, expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_array_equal(run(), expected)


@needs_numba
def test_an_error_of_a_compiled_kernel_is_raised(monkeypatch):
    """An exception the compiled code raises once compiled is no compilation
    failure: it reaches the caller, and the compiled kernels stay on."""
    broken_kernels(monkeypatch, raises_when_run)
    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="from the kernel"):
        attention_forward(x, x, x)
    assert compiled.enabled()


def spy_on_forward(monkeypatch):
    calls = []
    forward = compiled.forward

    def spy(*args):
        calls.append(args[0].shape)
        return forward(*args)

    monkeypatch.setattr(compiled, "forward", spy)
    return calls


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_read_only_inputs_reuse_the_kernels_compiled_for_writeable_ones(dtype):
    """The kernels read their inputs through read-only views, so that a
    caller's read-only arrays (a memory map, a broadcast length) run the
    signature already compiled instead of compiling another, with the same
    results; the caller's arrays keep their flags."""
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 2, 40, 8)).astype(dtype) for _ in range(3))
    lengths = np.array([[40, 31], [17, 40]], np.int64)
    rows = rng.standard_normal((6, 8)).astype(dtype)
    weight, bias = np.ones(8, dtype), np.zeros(8, dtype)
    from skattn._kernels import _numba_layer_norm, _numba_short

    dispatchers = (compiled.kernels().forward, _numba_short.forward)
    dispatchers += (_numba_layer_norm.forward,)
    first = (
        compiled.forward(q, k, v, lengths, False, 0.3),
        compiled.layer_norm_forward(rows, weight, bias, 1e-5),
    )
    counts = [sum(len(d.signatures) for d in dispatchers)]
    frozen = [a.copy() for a in (q, k, v, lengths, rows, weight, bias)]
    for array in frozen:
        array.flags.writeable = False
    fq, fk, fv, flengths, frows, fweight, fbias = frozen
    again = (
        compiled.forward(fq, fk, fv, flengths, False, 0.3),
        compiled.layer_norm_forward(frows, fweight, fbias, 1e-5),
    )
    counts.append(sum(len(d.signatures) for d in dispatchers))
    assert counts[1] == counts[0]
    for before, after in zip(first, again, strict=True):
        for x, y in zip(before, after, strict=True):
            assert_array_equal(x, y)
    assert q.flags.writeable and not fq.flags.writeable


@needs_numba
@pytest.mark.parametrize("kernel", ["short", "blocked"])
def test_contiguous_inputs_and_views_run_one_compiled_kernel(monkeypatch, kernel):
    """The fused passes run as compiled for inputs of any layout: the model's
    views of its projections (heads as strides), a caller's contiguous
    arrays and arrays with no contiguous row compile one kernel per dtype
    and pass, with the same results."""
    monkeypatch.setattr(compiled, "_FORWARD_KERNEL", kernel)
    monkeypatch.setattr(compiled, "_BACKWARD_KERNEL", kernel)
    rng = np.random.default_rng(0)
    # (N, T, H, D) projections, read as (N, H, T, D) views
    q, k, v, d_out = (
        rng.standard_normal((2, 40, 2, 8)).swapaxes(1, 2) for _ in range(4)
    )
    assert not q.flags.c_contiguous
    lengths = np.array([[40, 31], [17, 40]], np.int64)
    dispatchers = (compiled.kernels().forward, compiled.kernels().backward)
    if kernel == "short":
        from skattn._kernels import _numba_short

        dispatchers = (_numba_short.forward, _numba_short.backward)

    def passes(q, k, v, d_out):
        out, lse = compiled.forward(q, k, v, lengths, False, 0.3)
        delta = np.sum(d_out * out, axis=-1)
        grads = compiled.backward(
            d_out, q, k, v, lse, delta, lengths, False, 0.3, 2.0**-10
        )
        return out, lse, *grads

    views = passes(q, k, v, d_out)
    counts = [len(d.signatures) for d in dispatchers]
    contiguous = passes(*(np.ascontiguousarray(a) for a in (q, k, v, d_out)))
    # no contiguous row: every feature of a token far from the next
    transposed = passes(
        *(
            np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
            for a in (q, k, v, d_out)
        )
    )
    assert [len(d.signatures) for d in dispatchers] == counts
    for x, y, z in zip(views, contiguous, transposed, strict=True):
        assert_array_equal(x, y)
        assert_array_equal(x, z)


@needs_numba
def test_compiled_path_runs_where_it_applies(monkeypatch):
    """Key padding and causal masks run compiled; weights, dropout and masks
    per query take the numpy path."""
    monkeypatch.setattr(compiled, "_DISABLED", False)
    calls = spy_on_forward(monkeypatch)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((3, 2, 6, 4)).astype(np.float32) for _ in range(3))
    padding = (np.arange(6) < np.array([6, 3, 0])[:, None])[:, None, None, :]
    attention_forward(q, k, v, mask=padding, causal=True)
    assert calls == [q.shape]
    attention_forward(q, k, v, return_weights=True)
    keys = np.arange(6, dtype=np.uint64).reshape(3, 2)
    attention_forward(q, k, v, dropout=(0.5, keys))
    attention_forward(q, k, v, mask=rng.random((3, 2, 6, 6)) < 0.5)
    not_a_prefix = np.ones((3, 1, 1, 6), dtype=bool)
    not_a_prefix[0, ..., 2] = False
    attention_forward(q, k, v, mask=not_a_prefix)
    attention_forward(q.astype(np.float16), k, v)
    assert len(calls) == 1


@needs_numba
@pytest.mark.parametrize(
    "n_keys, head_dim, kernel",
    [(31, 16, None), (32, 16, "short"), (127, 16, "short"), (128, 16, "blocked")]
    + [(15, 8, None), (16, 8, "short"), (24, 12, "short"), (128, 12, "blocked")]
    + [(255, 32, None), (256, 32, "blocked"), (1023, 64, None), (1024, 64, "blocked")],
)
def test_compiled_forward_kernel_runs_where_it_is_faster(
    monkeypatch, n_keys, head_dim, kernel
):
    """For heads of at most 16 features the short kernel from ``2 * head_dim``
    to 127 keys; else the blocked kernel from ``head_dim**2 / 4`` keys on, and
    below it the numpy path (numpy's batched products are faster): each with
    the same results."""
    from skattn._kernels import _numba_short

    monkeypatch.setattr(compiled, "_DISABLED", False)
    monkeypatch.setattr(compiled, "MIN_KEYS_PER_SQUARED_DIM", MIN_KEYS_PER_SQUARED_DIM)
    monkeypatch.setattr(compiled, "_FORWARD_KERNEL", None)
    calls = spy_on_forward(monkeypatch)
    ran = []
    names = {_numba_short.forward: "short", compiled.kernels().forward: "blocked"}
    run = compiled._run

    def recording_run(function, calls, **kwargs):
        if function in names:
            ran.append(names[function])
        return run(function, calls, **kwargs)

    monkeypatch.setattr(compiled, "_run", recording_run)
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 8, head_dim)).astype(np.float32)
    k, v = (rng.standard_normal((2, n_keys, head_dim)).astype(np.float32) for _ in "kv")
    out, _, _ = attention_forward(q, k, v)
    assert compiled.forward_kernel(n_keys, head_dim) == kernel
    assert calls == ([] if kernel is None else [q.shape])
    assert set(ran) == (set() if kernel is None else {kernel})
    monkeypatch.setattr(compiled, "_DISABLED", True)
    assert_allclose(out, attention_forward(q, k, v)[0], rtol=1e-5, atol=1e-6)


@needs_numba
@pytest.mark.parametrize(
    "kernel, loops",
    [("short", None), ("blocked", True), ("blocked", False)],
    ids=["short", "blocked-loops", "blocked-blas"],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [3, 16, 33])
def test_fused_forward_equals_the_numpy_path(
    monkeypatch, dtype, causal, head_dim, kernel, loops
):
    """The short kernel and the blocked one (its products compiled or by
    BLAS): 301 queries (a block of 256 and a last one of 45, padded to 48;
    blocks of 32 for BLAS), 301, 150 and 0 valid keys, values of 1e-30 (their
    columns scaled by powers of two) and a row whose bound underflows
    (computed again shifted by its largest score) equal the numpy path to
    float rounding."""
    (q, k, v), padding = padded_pair(301, head_dim, n_arrays=3)
    q, k, v = (a.astype(dtype) for a in (q, k, v))
    q, k, v = (np.concatenate([a, a[:1]]) for a in (q, k, v))
    padding = np.concatenate([padding, np.zeros_like(padding[:1])])
    v[0] *= 1e-30
    # keys of 300 in one feature: the rows' scores are far below their bound
    # |q| max |k| / sqrt(d) (query 7, of 300 in every feature, by a factor of
    # sqrt(d)), so their sums underflow and they are computed again
    q[1, 0, 7], k[1, 0, :] = 300.0, np.eye(head_dim, dtype=dtype)[head_dim // 2] * 300
    results = []
    for disabled in (False, True):
        monkeypatch.setattr(compiled, "_DISABLED", disabled)
        monkeypatch.setattr(compiled, "_FORWARD_KERNEL", kernel)
        monkeypatch.setattr(compiled, "_PRODUCTS_IN_LOOPS", loops)
        results.append(attention_forward(q, k, v, mask=padding, causal=causal)[:2])
    (out, lse), (expected_out, expected_lse) = results
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    assert_allclose(out[0], expected_out[0], rtol=rtol * 10, atol=1e-30 * rtol)
    assert_allclose(out[1:], expected_out[1:], rtol=rtol * 10, atol=rtol)
    assert_allclose(lse, expected_lse, rtol=rtol)
    assert_array_equal(out[2], 0.0)
    assert np.isinf(lse[2]).all()


@needs_numba
@pytest.mark.parametrize("switch", ["environment", "tests"])
def test_compiled_path_can_be_turned_off(monkeypatch, switch):
    if switch == "environment":
        monkeypatch.setenv("SKATTN_COMPILED", "0")
    else:
        monkeypatch.setattr(compiled, "_DISABLED", True)
    calls = spy_on_forward(monkeypatch)
    attention_forward(*(np.ones((2, 3, 4), dtype=np.float32),) * 3)
    assert not compiled.enabled() and calls == []


def test_without_numba_the_numpy_path_runs(monkeypatch):
    monkeypatch.setattr(compiled, "_DISABLED", False)
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba fails
    compiled.kernels.cache_clear()
    try:
        assert compiled.kernels() is None and not compiled.enabled()
        out, _, _ = attention_forward(*(np.ones((2, 3, 4)),) * 3)
        assert_allclose(out, 1.0)
    finally:
        compiled.kernels.cache_clear()


@needs_numba
def test_compiled_entry_is_kept_by_what_numba_types_arguments_by():
    """_entry compiles once for arguments of the same dtypes, dimensions,
    flags and scalar types; an output of another layout (a strided view, as
    the outputs in the memory order of the model's heads are) runs the same
    compiled code, which fills it at its strides."""
    import numba

    @numba.njit
    def twice(x, out, factor):
        for i in range(out.shape[0]):
            out[i] = x[i] * factor

    (x,) = compiled._read_only(np.arange(4.0))
    first = compiled._entry(twice, (x, np.zeros(4), 2.0))
    assert compiled._entry(twice, (x, np.zeros(4), 3.0)) is first
    strided = np.zeros(8)[::2]
    assert compiled._entry(twice, (x, strided, 2.0)) is first
    assert len(twice.overloads) == 1
    first(x, strided, 2.0)
    assert_allclose(strided, [0, 2, 4, 6])
    (x32,) = compiled._read_only(np.arange(4, dtype=np.float32))
    assert compiled._entry(twice, (x32, np.zeros(4), 2.0)) is not first


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exponential_is_accurate_to_a_few_units_in_the_last_place(dtype):
    """The vectorised exp of the compiled kernels against numpy's, over the
    normal range of the dtype; arguments above 0 (rounding) are taken as 0,
    below the normal range as its bottom (negligible beside a row's sum, which
    is at least exp(-60))."""
    from skattn._kernels._numba_exp import exponential

    low = {np.float32: -87.0, np.float64: -708.0}[dtype]
    x = np.linspace(low, 0, 100_001, dtype=dtype)
    expected = np.exp(x.astype(np.float64))
    ulp = np.spacing(expected.astype(dtype)).astype(np.float64)
    assert np.max(np.abs(exponential(x.copy()) - expected) / ulp) <= 2
    outside = np.array([0, 1e-3, 50, low - 1, -np.inf], dtype=dtype)
    assert_allclose(exponential(outside), [1, 1, 1, np.exp(low), np.exp(low)])


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exponential_builds_each_power_of_two_from_its_exponent_bits(dtype):
    """exp(n ln 2) within one unit in the last place, n ln 2 rounded to the
    dtype: the power of two 2**n that the exponential builds from its
    exponent bits, at every n of the range it does not clamp (down to
    2**-125 for float32, 2**-1021 for float64)."""
    from skattn._kernels._numba_exp import exponential

    lowest = {np.float32: -125, np.float64: -1021}[dtype]
    n = np.arange(lowest, 1)
    x = (n * np.log(2.0)).astype(dtype)
    expected = np.exp(x.astype(np.float64))  # 2**n times exp(x - n ln 2)
    ulp = np.spacing(expected.astype(dtype)).astype(np.float64)
    assert np.max(np.abs(exponential(x.copy()) - expected) / ulp) <= 1


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
def test_probabilities_and_gradients_of_a_block_of_scores(dtype, causal):
    """The backward pass's block of scores (keys, queries) becomes
    ``exp(s - lse)`` and the products of the values by the outputs'
    gradients ``p * (dp - delta)``, with the kernels' exponential (a score
    above its lse counts as 0); with a causal mask, both are 0 before each
    key's first query, whatever was there (NaN, infinite: never computed)."""
    from skattn._kernels import _numba_exp

    rng = np.random.default_rng(0)
    s = rng.uniform(-20, 2, (5, 19)).astype(dtype)
    dp = rng.standard_normal((5, 19)).astype(dtype)
    lse, delta = (rng.standard_normal(19).astype(dtype) for _ in range(2))
    p_expected = _numba_exp.exponential((s - lse).ravel()).reshape(s.shape)
    ds_expected = p_expected * (dp - delta)
    first = np.array([0, 3, 8, 16, 19]) if causal else np.zeros(5, np.int64)
    before = np.arange(19) < first[:, None]
    s[before], dp[before] = np.nan, np.inf
    if causal:
        _numba_exp.probabilities_from_scores_causal(s, dp, lse, delta, first)
    else:
        _numba_exp.probabilities_from_scores(s, dp, lse, delta)
    assert_array_equal(s, np.where(before, 0.0, p_expected))
    assert_array_equal(dp, np.where(before, 0.0, ds_expected))


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_keys", [1, 3, 4, 5, 8, 11])
def test_exponentials_of_a_block_are_summed_key_after_key(dtype, n_keys):
    """The forward pass's block of scores (keys, queries) becomes ``exp(s +
    offset)`` with the kernels' exponential, and each query's sum adds its
    keys' exponentials one after another in their order, whether the pass
    takes one key at a time or four (any count of keys, remainders
    included): bit for bit the sums of a loop over the keys."""
    from skattn._kernels import _numba_exp

    rng = np.random.default_rng(n_keys)
    s = rng.uniform(-30, 1, (n_keys, 13)).astype(dtype)
    offset = rng.uniform(-3, 0, 13).astype(dtype)
    sums = rng.uniform(0, 2, 13).astype(dtype)
    p_expected = _numba_exp.exponential((s + offset).ravel()).reshape(s.shape)
    sums_expected = sums.copy()
    for row in p_expected:  # key after key, each sum rounded in the dtype
        sums_expected = sums_expected + row
    _numba_exp.exp_summed(s, offset, sums)
    assert_array_equal(s, p_expected)
    assert_array_equal(sums, sums_expected)


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_keys", [1, 3, 4, 5, 8, 11])
def test_causal_exponentials_are_zero_before_each_keys_first_query(dtype, n_keys):
    """The causal block: key ``j``'s exponentials are 0 in the columns
    before ``first[j]`` and left out of the sums, the others as
    :func:`exp_summed` computes them, each sum adding its keys in their order
    (one key at a time or four, remainders included): bit for bit."""
    from skattn._kernels import _numba_exp

    rng = np.random.default_rng(n_keys)
    s = rng.uniform(-30, 1, (n_keys, 13)).astype(dtype)
    offset = rng.uniform(-3, 0, 13).astype(dtype)
    sums = rng.uniform(0, 2, 13).astype(dtype)
    first = rng.integers(0, 14, n_keys)  # 13: the key follows every query
    p_expected = _numba_exp.exponential((s + offset).ravel()).reshape(s.shape)
    p_expected[np.arange(13) < first[:, None]] = 0
    sums_expected = sums.copy()
    for row in p_expected:
        sums_expected = sums_expected + row
    _numba_exp.exp_summed_causal(s, offset, first, sums)
    assert_array_equal(s, p_expected)
    assert_array_equal(sums, sums_expected)


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exponential_is_called_out_of_line_in_512_bit_vectors(dtype):
    """The kernels call the exponential as a function of its own, which asks
    LLVM for 512-bit vectors (where the CPU has them), so that a caller keeps
    its own vector width; called so, it computes what ``exponential`` does."""
    import numba

    from skattn._kernels import _numba_exp

    @numba.njit  # not cached, so that its LLVM IR can be read
    def caller(x):
        _numba_exp.exp_inplace(x)

    x = np.linspace(-30, 0, 1001, dtype=dtype)
    out = x.copy()
    caller(out)
    assert_array_equal(out, _numba_exp.exponential(x.copy()))
    name = f"_exp_float{np.dtype(dtype).itemsize * 8}"
    llvm = caller.inspect_llvm(caller.signatures[0])
    calls = [line for line in llvm.splitlines() if "call" in line and name in line]
    assert calls, f"{name} was inlined into its caller"
    definition = next(
        line for line in llvm.splitlines() if line.startswith("define") and name in line
    )
    group = definition.rsplit("#", 1)[1].split()[0]
    attributes = next(
        line for line in llvm.splitlines() if line.startswith(f"attributes #{group} ")
    )
    assert '"prefer-vector-width"="512"' in attributes and "noinline" in attributes


def random_attention(rng, dtype, shape=(3, 2, 70, 8)):
    q, k, v, d_out = (rng.standard_normal(shape).astype(dtype) for _ in range(4))
    lengths = np.array([70, 31, 1])[: shape[0]]
    padding = (np.arange(shape[2]) < lengths[:, None])[:, None, None, :]
    return q, k, v, d_out, padding


@needs_numba
@pytest.mark.parametrize("causal", [False, True])
def test_compiled_results_do_not_depend_on_the_threads(monkeypatch, causal):
    """Bit for bit on one and two threads: each attention is one task's, in
    blocks that start at its first query and key."""
    monkeypatch.setattr(compiled, "_DISABLED", False)
    monkeypatch.setattr(compiled, "MIN_TASK_FLOPS", 0)  # split however small
    rng = np.random.default_rng(0)
    q, k, v, d_out, padding = random_attention(rng, np.float32, shape=(1, 1, 300, 8))
    results = []
    for n_threads in (1, 2):
        with threadpool_limits(n_threads):
            out, lse, _ = attention_forward(q, k, v, mask=padding[:1], causal=causal)
            grads = attention_backward(
                d_out, q, k, v, out, lse, mask=padding[:1], causal=causal
            )
        results.append((out, lse, *grads))
    for one, two in zip(*results, strict=True):
        assert_array_equal(one, two)


def test_attention_is_split_only_into_tasks_worth_a_hand_off(monkeypatch):
    """One task on one worker or for less than two tasks' work
    (MIN_TASK_FLOPS); else up to TASKS_PER_WORKER tasks a worker, at most one
    per MIN_TASK_FLOPS; MIN_TASK_FLOPS = 0 splits every call."""
    workers = [4]
    monkeypatch.setattr(_parallel, "parallel_workers", lambda: workers[0])
    floor, per_worker = compiled.MIN_TASK_FLOPS, compiled.TASKS_PER_WORKER
    counts = [compiled.task_count(f * floor) for f in (0, 1.99, 2, 3.5, 1000)]
    assert counts == [1, 1, 2, 3, 4 * per_worker]
    workers[0] = 1
    assert compiled.task_count(1000 * floor) == 1
    workers[0] = 4
    monkeypatch.setattr(compiled, "MIN_TASK_FLOPS", 0)
    assert compiled.task_count(1) == 4 * per_worker


@needs_numba
@pytest.mark.parametrize("n_tokens, split", [(64, False), (256, True)])
def test_small_attentions_run_in_the_calling_thread(monkeypatch, n_tokens, split):
    """On two threads, a call of a few million operations (two sequences of
    64 tokens) is computed by the calling thread alone; one of 34 million
    (two of 256) is split into tasks for both threads, forward and
    backward."""
    monkeypatch.setattr(compiled, "_DISABLED", False)
    shared = shared_maps_on_two_cpus(monkeypatch)
    rng = np.random.default_rng(0)
    q, k, v, d_out = (
        rng.standard_normal((2, 4, n_tokens, 16)).astype(np.float32) for _ in "qkvd"
    )
    lengths = np.full((2, 4), n_tokens)
    with threadpool_limits(2):
        out, lse = compiled.forward(q, k, v, lengths, False, 0.25)
        delta = (d_out * out).sum(-1)
        compiled.backward(d_out, q, k, v, lse, delta, lengths, False, 0.25, 2.0**-10)
    assert len(shared) == (2 if split else 0) and all(n > 1 for n in shared)


@needs_numba
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("estimator", [AttentionTransformer, AttentionClassifier])
def test_fitted_estimators_agree_on_both_paths(monkeypatch, estimator):
    """Training (float32 Adam) and outputs agree to float rounding."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, 60)
    X = [rng.standard_normal((n, 6)).astype(np.float32) for n in lengths]
    y = np.array([float(x[:, 0].mean() > 0) for x in X])
    fitted = {}
    for path in ("numpy", "compiled"):
        monkeypatch.setattr(compiled, "_DISABLED", path == "numpy")
        est = estimator(max_iter=3, random_state=0, causal=True).fit(X, y)
        output = est.transform(X) if hasattr(est, "transform") else est.predict_proba(X)
        fitted[path] = est.loss_curve_, output
    assert_allclose(fitted["numpy"][0], fitted["compiled"][0], rtol=1e-4)
    assert_allclose(fitted["numpy"][1], fitted["compiled"][1], rtol=1e-3, atol=1e-4)


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "thresholds",
    [None, 0.1, "row", "rows", "float32 rows", "at the tokens"],
)
def test_compiled_threshold_statistics_equal_the_numpy_path(
    monkeypatch, dtype, thresholds
):
    """PPV and LSPV counted in one compiled pass: bit for bit the numpy path's,
    thresholds compared in numpy's promotion (a Python float with float32
    tokens in float32), padding left out."""
    from skattn._model.pooling import pool_lspv, pool_ppv

    rng = np.random.default_rng(0)
    tokens = rng.standard_normal((30, 20, 5)).astype(dtype)
    tokens[0, :6, 0] = 0.1  # at a threshold of 0.1, in either dtype
    lengths = rng.integers(1, 21, 30)
    params = {
        "row": rng.standard_normal(5),
        "rows": rng.standard_normal((3, 5)),
        "float32 rows": rng.standard_normal((3, 5)).astype(np.float32),
        "at the tokens": np.full(5, 0.1),
    }.get(thresholds, thresholds)
    for pool in (pool_ppv, pool_lspv):
        monkeypatch.setattr(compiled, "_DISABLED", True)
        expected = pool(tokens, lengths, params)[0]
        monkeypatch.setattr(compiled, "_DISABLED", False)
        got = pool(tokens, lengths, params)[0]
        assert got.dtype == expected.dtype
        assert_array_equal(got, expected)


def numpy_layer_norm(monkeypatch, x, weight, bias, d_out):
    """The numpy path's layer norm of ``x`` and its gradients for ``d_out``."""
    monkeypatch.setattr(compiled, "_DISABLED", True)
    out, cache = layer_norm_forward(x, weight, bias)
    grads = layer_norm_backward(d_out, weight, cache)
    monkeypatch.setattr(compiled, "_DISABLED", False)
    return out, cache, grads


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 64), (2, 6, 1)])
@pytest.mark.parametrize("contiguous", [True, False])
def test_compiled_layer_norm_agrees_with_the_numpy_path(
    monkeypatch, dtype, shape, contiguous
):
    """Forward and backward compiled (the compiled pass ran) agree with the
    numpy path to float rounding, tokens of a strided view included; nothing
    passed in is modified."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    if not contiguous:
        x = np.asfortranarray(x)
    weight, bias = rng.standard_normal((2, shape[-1])).astype(dtype)
    d_out = rng.standard_normal(shape).astype(dtype)
    before = [a.copy() for a in (x, weight, bias, d_out)]
    expected_out, expected_cache, expected_grads = numpy_layer_norm(
        monkeypatch, x, weight, bias, d_out
    )
    assert compiled.layer_norm_forward(x, weight, bias, 1e-5) is not None
    out, cache = layer_norm_forward(x, weight, bias)
    grads = layer_norm_backward(d_out, weight, cache)
    tolerance = (
        dict(rtol=1e-5, atol=1e-5)
        if dtype == np.float32
        else dict(rtol=1e-12, atol=1e-12)
    )
    assert out.dtype == cache["x_hat"].dtype == cache["inv_std"].dtype == dtype
    assert cache["inv_std"].shape == expected_cache["inv_std"].shape
    assert_allclose(out, expected_out, **tolerance)
    for name in ("x_hat", "inv_std"):
        assert_allclose(cache[name], expected_cache[name], **tolerance)
    for got, expected in zip(grads, expected_grads, strict=True):
        assert got.dtype == dtype and got.shape == expected.shape
        assert_allclose(got, expected, **tolerance)
    for array, original in zip((x, weight, bias, d_out), before, strict=True):
        assert_array_equal(array, original)


@needs_numba
def test_compiled_layer_norm_leaves_rows_it_cannot_hold_to_the_numpy_path(
    monkeypatch,
):
    """Float64 tokens whose squares overflow, NaN, and a constant row without
    an epsilon: the compiled pass declines (None) and the numpy path computes
    them, exactly its own result.
    Float32 tokens of 1e20, whose squares overflow float32 but not the
    compiled pass's float64 sums, are computed compiled, as the numpy path
    computes them by its scaling."""
    rng = np.random.default_rng(0)
    weight, bias = np.ones(8), np.zeros(8)
    declined = [
        (rng.standard_normal((3, 8)) * 1e300, 1e-5),
        (np.full((2, 8), np.nan), 1e-5),
        (np.vstack([rng.standard_normal(8), np.full(8, 2.0)]), 0.0),
    ]
    for x, eps in declined:
        assert compiled.layer_norm_forward(x, weight, bias, eps) is None
        with np.errstate(invalid="ignore", divide="ignore"):
            monkeypatch.setattr(compiled, "_DISABLED", True)
            expected = layer_norm_forward(x, weight, bias, eps)[0]
            monkeypatch.setattr(compiled, "_DISABLED", False)
            assert_array_equal(layer_norm_forward(x, weight, bias, eps)[0], expected)
    x = (rng.standard_normal((3, 8)) * 1e20).astype(np.float32)
    weight, bias = weight.astype(np.float32), bias.astype(np.float32)
    expected, _, _ = numpy_layer_norm(monkeypatch, x, weight, bias, x)
    assert compiled.layer_norm_forward(x, weight, bias, 1e-5) is not None
    assert_allclose(layer_norm_forward(x, weight, bias)[0], expected, atol=1e-5)


@needs_numba
def test_layer_norm_runs_compiled_where_it_applies(monkeypatch):
    """The model's layer norm calls the compiled pass for one floating dtype
    and numba on, forward and backward; mixed dtypes, float16 and
    ``SKATTN_COMPILED=0`` keep the numpy path."""
    calls = []
    for name in ("layer_norm_forward", "layer_norm_backward"):
        original = getattr(compiled, name)

        def spy(*args, name=name, original=original):
            calls.append(name)
            return original(*args)

        monkeypatch.setattr(compiled, name, spy)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    weight, bias = np.ones(4, np.float32), np.zeros(4, np.float32)
    _, cache = layer_norm_forward(x, weight, bias)
    layer_norm_backward(x, weight, cache)
    assert calls == ["layer_norm_forward", "layer_norm_backward"]
    calls.clear()
    layer_norm_forward(x, weight.astype(np.float64), bias)  # mixed: promotes
    half = [a.astype(np.float16) for a in (x, weight, bias)]
    layer_norm_forward(*half)  # float16: the numpy path
    monkeypatch.setenv("SKATTN_COMPILED", "0")
    _, cache = layer_norm_forward(x, weight, bias)
    layer_norm_backward(x, weight, cache)
    assert calls == []


@needs_numba
def test_warm_up_runs_every_kernel_in_the_order_it_names():
    from skattn._kernels import warm_up

    calls = []

    def timed(name, function, *arguments):
        calls.append(name)
        return function(*arguments)

    warm_up.compile_kernels(np.float32, timed)
    assert list(dict.fromkeys(calls)) == list(warm_up.KERNELS)
    # the banded passes without and with a global token, both statistics
    assert calls.count("banded forward") == calls.count("threshold statistics") == 2


def test_warm_up_refuses_kernels_that_are_off(monkeypatch):
    from skattn._kernels import warm_up

    monkeypatch.setattr(compiled, "_DISABLED", True)
    with pytest.raises(RuntimeError, match="compiled kernels are off"):
        warm_up.compile_kernels(np.float32)
