"""The compiled attention's products (skattn/_kernels/_numba_products.py),
which sum in register tiles, single vectors and single columns: against the
float64 product, and each column's sum rounded alike wherever its columns
fall. The kernels that call them are checked against the reference by
test_attention.py and test_attention_gradients.py."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from skattn._kernels import compiled

pytestmark = [
    pytest.mark.compiled_path,
    pytest.mark.skipif(
        compiled.kernels() is None, reason="numba is not installed (the [fast] extra)"
    ),
]

DTYPES = [np.float32, np.float64]
# (rows or terms, inner width, columns): one of each; an odd number of rows
# and of columns (tiles, then a vector, then single columns); the attention's
# blocks; widths that do not fill the last tile of rows
# blocks of 16 and 32 columns: four rows of two vectors at a time, at 256 and
# 512 bits
SHAPES = [(1, 1, 1), (5, 17, 37), (32, 17, 128), (7, 3, 70), (2, 65, 9), (33, 13, 41)]
SHAPES += [(32, 17, 32), (10, 3, 16)]


@pytest.fixture(scope="module")
def products():
    from skattn._kernels import _numba_products

    return _numba_products


def _operands(dtype, n_rows, width, n_columns, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n_rows, width)).astype(dtype)
    b = rng.standard_normal((width, n_columns)).astype(dtype)
    return a, b


def _bound(a, b, dtype):
    """The rounding bound of a sum of the products of ``a @ b``'s terms."""
    terms = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    return (a.shape[1] + 1) * np.finfo(dtype).eps * terms


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_rows, width, n_columns", SHAPES)
def test_product_set_equals_the_float64_product(
    products, dtype, n_rows, width, n_columns
):
    a, b_t = _operands(dtype, n_rows, width, n_columns)
    out = np.full((n_rows, n_columns), np.nan, dtype)
    lo = np.zeros(n_rows, np.int64)
    hi = np.full(n_rows, n_columns, np.int64)
    products.product_set(a, b_t, out, lo, hi)
    expected = a.astype(np.float64) @ b_t.astype(np.float64)
    assert np.all(np.abs(out - expected) <= _bound(a, b_t, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_terms, width, n_columns", SHAPES)
def test_product_add_adds_the_float64_product(
    products, dtype, n_terms, width, n_columns
):
    a, _ = _operands(dtype, n_terms, width, n_columns)
    b = _operands(dtype, n_terms, n_columns, 1, seed=1)[0]
    start = np.random.default_rng(2).standard_normal((width, n_columns)).astype(dtype)
    out = start.copy()
    lo = np.zeros(n_terms, np.int64)
    hi = np.full(n_terms, n_columns, np.int64)
    products.product_add(a, b, out, lo, hi)
    expected = start + a.T.astype(np.float64) @ b.astype(np.float64)
    bound = _bound(a.T, b, dtype) + (n_terms + 1) * np.finfo(dtype).eps * np.abs(start)
    assert np.all(np.abs(out - expected) <= bound)


@pytest.mark.parametrize("dtype", DTYPES)
def test_product_set_rounds_a_column_alike_in_a_tile_a_vector_or_alone(products, dtype):
    """Started at each of the first 40 columns, the product puts a column in
    a tile, a vector or the single columns: its sum is the same bits."""
    a, b_t = _operands(dtype, 5, 17, 73)
    a = np.asfortranarray(a)  # the short kernel passes the values transposed
    whole = np.empty((5, 73), dtype)
    products.product_set(a, b_t, whole, np.zeros(5, np.int64), np.full(5, 73))
    for start in range(40):
        out = np.full((5, 73), np.nan, dtype)
        products.product_set(a, b_t, out, np.full(5, start), np.full(5, 73))
        assert_array_equal(out[:, start:], whole[:, start:])
        assert np.isnan(out[:, :start]).all()  # before the span: untouched


@pytest.mark.parametrize("dtype", DTYPES)
def test_product_set_rounds_a_row_alike_in_four_rows_a_pair_or_alone(products, dtype):
    """From the first row, rows four of which span exactly two vectors are
    computed four at a time, the others in pairs (all of them where the
    first four's spans differ, as a causal block's): each row's sums are the
    same bits as the row's computed alone."""
    from skattn._kernels._numba_vectors import VECTOR_BITS

    n_columns = 2 * VECTOR_BITS // (8 * np.dtype(dtype).itemsize)  # two vectors
    a, b_t = _operands(dtype, 10, 17, n_columns)
    for lo in (np.zeros(10, np.int64), np.arange(10, dtype=np.int64)):
        hi = np.full(10, n_columns, np.int64)
        out = np.full((10, n_columns), np.nan, dtype)
        products.product_set(a, b_t, out, lo, hi)
        for r in range(10):
            alone = np.full((1, n_columns), np.nan, dtype)
            products.product_set(a[r : r + 1], b_t, alone, lo[r : r + 1], hi[:1])
            assert_array_equal(out[r, lo[r] :], alone[0, lo[r] :])


def test_vectors_are_as_wide_as_the_registers_of_the_cpu_compiled_for():
    """The compiled products' vectors are zmm registers (512 bits) where the
    CPU numba compiles for has AVX-512, else 256 bits: a copy of one vector,
    compiled for this machine, reads a register of that width."""
    import numba
    from numba.core.registry import cpu_target

    from skattn._kernels._numba_vectors import load, store

    @numba.njit  # not cached, so that its assembly can be read
    def copy_vector(x, out):
        store(out, 0, 0, load(x, 0, 0))

    x = np.ones((1, 16), np.float32)
    copy_vector(x, np.empty_like(x))
    assembly = copy_vector.inspect_asm(copy_vector.signatures[0])
    features = cpu_target.target_context.codegen()._tm_features.split(",")
    assert ("zmm" in assembly) == ("+avx512f" in features)
    assert "ymm" in assembly or "zmm" in assembly


@pytest.mark.parametrize("dtype", DTYPES)
def test_product_add_rounds_a_column_alike_in_a_tile_a_vector_or_alone(products, dtype):
    a, _ = _operands(dtype, 9, 7, 1)
    b = _operands(dtype, 9, 73, 1, seed=3)[0]
    start_values = _operands(dtype, 7, 73, 1, seed=4)[0]
    whole = start_values.copy()
    products.product_add(a, b, whole, np.zeros(9, np.int64), np.full(9, 73))
    for start in range(40):
        out = start_values.copy()
        products.product_add(a, b, out, np.full(9, start), np.full(9, 73))
        assert_array_equal(out[:, start:], whole[:, start:])
        assert_array_equal(out[:, :start], start_values[:, :start])


@pytest.mark.parametrize("dtype", DTYPES)
def test_product_add_reads_the_union_of_the_terms_columns_as_zeros_past_each(
    products, dtype
):
    """A causal block: each term has columns from its own start, and is 0
    before it (as the kernels write it); columns before every term's are
    left as they were."""
    n_terms, width, n_columns = 12, 17, 64
    a, _ = _operands(dtype, n_terms, width, 1)
    b = _operands(dtype, n_terms, n_columns, 1, seed=5)[0]
    lo = np.arange(n_terms, dtype=np.int64) * 2 + 3
    hi = np.full(n_terms, n_columns, np.int64)
    for t in range(n_terms):
        b[t, : lo[t]] = 0.0
    start_values = np.ones((width, n_columns), dtype)
    out = start_values.copy()
    products.product_add(a, b, out, lo, hi)
    expected = start_values + a.T.astype(np.float64) @ b.astype(np.float64)
    assert_array_equal(out[:, :3], start_values[:, :3])
    bound = _bound(a.T, b, dtype) + np.finfo(dtype).eps
    assert np.all(np.abs(out - expected) <= bound)


LAYOUTS = ["heads", "columns-strided", "contiguous"]


def _head_in_layout(tokens, layout):
    """The second head of ``tokens`` (T, H, D), read-only: as the model's
    view (rows contiguous, far apart), transposed (no contiguous row), or
    contiguous."""
    x = {
        "heads": tokens[:, 1],
        "columns-strided": np.ascontiguousarray(tokens[:, 1].T).T,
        "contiguous": np.ascontiguousarray(tokens[:, 1]),
    }[layout]
    x.flags.writeable = False
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [1, 3, 8, 17])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_copy_rows_and_scaled_rows_read_every_layout(products, dtype, width, layout):
    """``copy_rows`` and ``scaled_rows`` copy a head's view (rows contiguous,
    far apart), a transposed array (no contiguous row) and a contiguous one,
    times 1 or the scale: in vectors, then single columns, or column by
    column; the rows past ``n_rows`` are left as they were."""
    rng = np.random.default_rng(0)
    tokens = rng.standard_normal((9, 3, width)).astype(dtype)  # (T, H, D)
    x = _head_in_layout(tokens, layout)
    if width > 1:
        assert x.flags.c_contiguous == (layout == "contiguous")
    out = np.full((9, width), -1.0, dtype)
    products.copy_rows(x, 7, out)
    assert_array_equal(out[:7], x[:7])
    assert_array_equal(out[7:], -1.0)
    products.scaled_rows(x, 6, dtype(0.3), out)
    assert_array_equal(out[:6], x[:6] * dtype(0.3))
    assert_array_equal(out[6], x[6])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [1, 3, 17, 40])
@pytest.mark.parametrize("n_rows", [0, 16, 19])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_transposed_into_transposes_the_first_rows_of_every_layout(
    products, dtype, width, n_rows, layout
):
    """``transposed_into`` writes ``x[:n_rows].T * scale`` into the first
    ``n_rows`` columns: square blocks of vectors shuffled in registers where
    the rows of ``x`` are contiguous (16 rows: whole blocks of 4, 8 or 16
    lanes; 19: three rows past them; 17 and 40 columns: whole blocks and
    columns past them), then the columns and rows past the blocks one by
    one; a transposed ``x``, one by one. The rest of the output is left as
    it was."""
    rng = np.random.default_rng(1)
    tokens = rng.standard_normal((21, 3, width)).astype(dtype)  # (T, H, D)
    x = _head_in_layout(tokens, layout)
    out_t = np.full((width, 23), -1.0, dtype)
    products.transposed_into(x, n_rows, dtype(0.3), out_t)
    assert_array_equal(out_t[:, :n_rows], (x[:n_rows] * dtype(0.3)).T)
    assert_array_equal(out_t[:, n_rows:], -1.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [1, 3, 8, 17])
def test_zero_rows_zeroes_the_first_rows(products, dtype, width):
    """``zero_rows`` sets the first rows of a head's view to 0 (in vectors,
    then single columns) and leaves the other rows and heads as they were."""
    tokens = np.full((9, 3, width), 7.0, dtype)
    products.zero_rows(tokens[:, 1], 5)
    assert_array_equal(tokens[:5, 1], 0.0)
    assert_array_equal(tokens[5:, 1], 7.0)
    assert_array_equal(tokens[:, [0, 2]], 7.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("width", [1, 3, 8, 17, 40])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_column_maxima_are_the_largest_magnitudes_of_the_first_rows(
    products, dtype, width, layout
):
    """``column_maxima`` gives each column's largest magnitude over the
    first ``n_rows`` rows of every layout (in pairs of vectors, a vector,
    then single columns, or column by column): a NaN is not counted, even in
    the first row, and a larger entry past ``n_rows`` is not read."""
    rng = np.random.default_rng(0)
    tokens = rng.standard_normal((9, 3, width)).astype(dtype)  # (T, H, D)
    tokens[0, 1, 0] = np.nan
    tokens[3, 1, -1] = -5.0  # the largest of the last column, negative
    tokens[8, 1, :] = 100.0  # past n_rows
    x = _head_in_layout(tokens, layout)
    out = np.full((1, width), -1.0, dtype)
    products.column_maxima(x, 7, out)
    expected = np.nan_to_num(np.nanmax(np.abs(x[:7]), axis=0), nan=0.0)
    assert_array_equal(out[0], expected)
    assert out[0, -1] == 5.0
