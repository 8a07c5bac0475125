"""Vectors for numba functions (imported only where numba is installed): a
type whose values LLVM keeps in vector registers, and the few operations the
compiled products and the kernels' passes over rows need
(:mod:`._numba_products`, :mod:`._numba_short`).

numba vectorises only innermost loops, over memory: a product written as
loops keeps its running sums in the result's rows, loading and storing them
for every few terms. With these values a product keeps a tile of sums in
registers for all its terms (as a BLAS kernel does) and stores it once.
Every arithmetic operation is elementwise, so each sum adds its terms in the
same order as a loop over them would, and :func:`multiply_add` rounds as the
loops' ``a * b + c`` under numba's ``fastmath={"contract"}``: fused where the
CPU has FMA. A transpose, which numba's loops make one number at a time, is
a square block of vectors shuffled in registers (:func:`store_transposed`).

Vectors are as wide as the registers of the CPU numba compiles for
(:data:`VECTOR_BITS`): 512 bits (16 float32 or 8 float64) with AVX-512, else
256 (AVX2's registers; a CPU with narrower ones runs each operation as two
or four). LLVM's tuning for AVX-512 CPUs prefers 256-bit vectors for the
loops it vectorises, not for these: at 512 bits the short kernels ran in
0.8 of their time at 256 on an AVX-512 Xeon. The width changes no result:
each lane computes what a loop's iteration would.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, models, register_model


def _target_vector_bits():
    """512 where the CPU numba compiles for has AVX-512, else 256: the
    features of numba's target (the host's, or those ``NUMBA_CPU_NAME`` and
    ``NUMBA_CPU_FEATURES`` name)."""
    try:
        from numba.core.registry import cpu_target

        features = cpu_target.target_context.codegen()._tm_features
    except Exception:  # a numba without this attribute: the narrower width
        return 256
    return 512 if "+avx512f" in str(features).split(",") else 256


VECTOR_BITS = _target_vector_bits()


class Vector(types.Type):
    """``lanes`` numbers of the numba float type ``dtype``, in one register."""

    def __init__(self, dtype):
        self.dtype = dtype
        self.lanes = VECTOR_BITS // dtype.bitwidth
        super().__init__(name=f"Vector({dtype}, {self.lanes})")


@register_model(Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = dmm.lookup(fe_type.dtype).get_value_type()
        super().__init__(dmm, fe_type, ir.VectorType(element, fe_type.lanes))


def _float_array(array):
    return (
        isinstance(array, types.Array)
        and array.ndim == 2
        and isinstance(array.dtype, types.Float)
    )


def _element_pointer(context, builder, array_type, array, row, column):
    """The address of ``array[row, column]`` (no bounds check)."""
    view = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer2(
        context,
        builder,
        view.data,
        cgutils.unpack_tuple(builder, view.shape, 2),
        cgutils.unpack_tuple(builder, view.strides, 2),
        array_type.layout,
        [row, column],
    )


def _vector_pointer(context, builder, array_type, array, row, column, vector_type):
    """The address of ``array[row, column]`` as a pointer to a vector."""
    pointer = _element_pointer(context, builder, array_type, array, row, column)
    return builder.bitcast(pointer, vector_type.as_pointer())


def _splat(builder, value, vector_type):
    """A vector of ``vector_type`` whose every lane is ``value``."""
    undefined = ir.Constant(vector_type, ir.Undefined)
    first = builder.insert_element(undefined, value, ir.Constant(ir.IntType(32), 0))
    zeros = ir.Constant(ir.VectorType(ir.IntType(32), vector_type.count), None)
    return builder.shuffle_vector(first, undefined, zeros)


@intrinsic
def vector_like(typingctx, array):
    """A vector of zeros of the dtype of the 2-D float ``array``: the type
    that :func:`broadcast` takes."""
    if not _float_array(array):
        return None
    vector = Vector(array.dtype)

    def codegen(context, builder, signature, arguments):
        return ir.Constant(context.get_value_type(vector), None)

    return vector(array), codegen


@intrinsic
def lanes(typingctx, like):
    """The numbers a vector of the type of ``like`` holds."""
    if not isinstance(like, Vector):
        return None

    def codegen(context, builder, signature, arguments):
        return ir.Constant(ir.IntType(64), like.lanes)

    return types.int64(like), codegen


@intrinsic
def load(typingctx, array, row, column):
    """``array[row, column:column + lanes]`` of a 2-D float array whose rows
    are contiguous, unchecked."""
    if not _float_array(array):
        return None
    vector = Vector(array.dtype)
    alignment = array.dtype.bitwidth // 8

    def codegen(context, builder, signature, arguments):
        vector_type = context.get_value_type(vector)
        pointer = _vector_pointer(
            context, builder, signature.args[0], *arguments, vector_type
        )
        return builder.load(pointer, align=alignment)

    return vector(array, row, column), codegen


@intrinsic
def store(typingctx, array, row, column, value):
    """``array[row, column:column + lanes] = value``, unchecked (the rows of
    ``array`` contiguous)."""
    if not (_float_array(array) and value == Vector(array.dtype)):
        return None
    alignment = array.dtype.bitwidth // 8

    def codegen(context, builder, signature, arguments):
        array_value, row, column, vector = arguments
        pointer = _vector_pointer(
            context, builder, signature.args[0], array_value, row, column, vector.type
        )
        builder.store(vector, pointer, align=alignment)
        return context.get_dummy_value()

    return types.none(array, row, column, value), codegen


@intrinsic
def broadcast(typingctx, number, like):
    """A vector of the type of ``like`` whose every lane is ``number``."""
    if not isinstance(like, Vector):
        return None

    def codegen(context, builder, signature, arguments):
        value = context.cast(builder, arguments[0], signature.args[0], like.dtype)
        return _splat(builder, value, context.get_value_type(like))

    return like(number, like), codegen


@intrinsic
def multiply(typingctx, a, b):
    """``a * b``, lane by lane."""
    if not (isinstance(a, Vector) and a == b):
        return None

    def codegen(context, builder, signature, arguments):
        return builder.fmul(*arguments)

    return a(a, b), codegen


@intrinsic
def divide(typingctx, a, b):
    """``a / b``, lane by lane (IEEE division, correctly rounded as a
    loop's; no check for zero: a zero divisor gives an infinity or NaN)."""
    if not (isinstance(a, Vector) and a == b):
        return None

    def codegen(context, builder, signature, arguments):
        return builder.fdiv(*arguments)

    return a(a, b), codegen


@intrinsic
def multiply_add(typingctx, a, b, c):
    """``a * b + c``, lane by lane, fused where the CPU has FMA (LLVM's
    ``fmuladd``, as numba's ``contract`` fuses the loops' ``a * b + c``)."""
    if not (isinstance(a, Vector) and a == b == c):
        return None

    def codegen(context, builder, signature, arguments):
        vector_type = arguments[0].type
        function = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(vector_type, [vector_type] * 3),
            f"llvm.fmuladd.v{a.lanes}f{a.dtype.bitwidth}",
        )
        return builder.call(function, arguments)

    return a(a, b, c), codegen


@intrinsic
def maximum(typingctx, a, b):
    """``a`` where it is greater than ``b``, else ``b``, lane by lane (``b``
    where either is NaN)."""
    if not (isinstance(a, Vector) and a == b):
        return None

    def codegen(context, builder, signature, arguments):
        x, y = arguments
        return builder.select(builder.fcmp_ordered(">", x, y), x, y)

    return a(a, b), codegen


@intrinsic
def absolute(typingctx, a):
    """``|a|``, lane by lane."""
    if not isinstance(a, Vector):
        return None

    def codegen(context, builder, signature, arguments):
        vector_type = arguments[0].type
        function = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(vector_type, [vector_type]),
            f"llvm.fabs.v{a.lanes}f{a.dtype.bitwidth}",
        )
        return builder.call(function, arguments)

    return a(a), codegen


def _interleaving(lanes, high):
    """The shuffle mask that interleaves the low (or high) halves of two
    vectors of ``lanes``: ``a0, b0, a1, b1, ...``."""
    start = lanes // 2 if high else 0
    return [start + k // 2 + (lanes if k % 2 else 0) for k in range(lanes)]


def _transposed(builder, rows):
    """The columns of the square block whose rows are the vectors ``rows``
    (as many as their lanes, a power of two): ``log2`` lanes rounds that
    interleave the halves of rows ``i`` and ``i + lanes / 2``."""
    n = len(rows)
    masks = [
        ir.Constant(ir.VectorType(ir.IntType(32), n), _interleaving(n, high))
        for high in (False, True)
    ]
    for _ in range(n.bit_length() - 1):
        rows = [
            builder.shuffle_vector(rows[i], rows[i + n // 2], mask)
            for i in range(n // 2)
            for mask in masks
        ]
    return rows


@intrinsic
def store_transposed(typingctx, x, row, column, scale, out, out_row, out_column):
    """``out[out_row + a, out_column + b] = x[row + b, column + a] * scale``
    for ``a, b`` below the lanes: a square block of the 2-D float array
    ``x`` transposed into ``out`` (both with contiguous rows), unchecked. The
    block's rows are loaded as vectors and interleaved (:func:`_transposed`),
    as a BLAS packs a transposed operand."""
    if not (_float_array(x) and _float_array(out) and x.dtype == out.dtype):
        return None
    vector = Vector(x.dtype)
    alignment = x.dtype.bitwidth // 8

    def codegen(context, builder, signature, arguments):
        x_value, row, column, factor, out_value, out_row, out_column = arguments
        vector_type = context.get_value_type(vector)
        rows = []
        for b in range(vector.lanes):
            at = builder.add(row, ir.Constant(row.type, b))
            pointer = _vector_pointer(
                context, builder, signature.args[0], x_value, at, column, vector_type
            )
            rows.append(builder.load(pointer, align=alignment))
        factor = context.cast(builder, factor, signature.args[3], x.dtype)
        factors = _splat(builder, factor, vector_type)
        for a, column_a in enumerate(_transposed(builder, rows)):
            at = builder.add(out_row, ir.Constant(out_row.type, a))
            pointer = _vector_pointer(
                context, builder, signature.args[4], out_value, at, out_column,
                vector_type,
            )  # fmt: skip
            builder.store(builder.fmul(column_a, factors), pointer, align=alignment)
        return context.get_dummy_value()

    return types.none(x, row, column, scale, out, out_row, out_column), codegen
