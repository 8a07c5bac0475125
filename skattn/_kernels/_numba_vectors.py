"""Vectors of 256 bits for numba functions (imported only where numba is
installed): a type whose values LLVM keeps in vector registers, and the few
operations the compiled products and the kernels' passes over rows need
(:mod:`._numba_products`, :mod:`._numba_short`).

numba vectorises only innermost loops, over memory: a product written as
loops keeps its running sums in the result's rows, loading and storing them
for every few terms. With these values a product keeps a tile of sums in
registers for all its terms (as a BLAS kernel does) and stores it once.
Every operation is elementwise, so each sum adds its terms in the same order
as a loop over them would, and :func:`multiply_add` rounds as the loops'
``a * b + c`` under numba's ``fastmath={"contract"}``: fused where the CPU
has FMA.

Vectors are of 256 bits (8 float32 or 4 float64), AVX2's registers, on every
CPU: one with AVX-512 runs them in the lower half of its registers, one with
narrower registers runs each operation as two or four.
"""

# Authors: The skattn developers
# SPDX-License-Identifier: BSD-3-Clause

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, models, register_model

VECTOR_BITS = 256


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
        pointer = _element_pointer(context, builder, signature.args[0], *arguments)
        pointer = builder.bitcast(pointer, context.get_value_type(vector).as_pointer())
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
        pointer = _element_pointer(
            context, builder, signature.args[0], array_value, row, column
        )
        pointer = builder.bitcast(pointer, vector.type.as_pointer())
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
        vector_type = context.get_value_type(like)
        undefined = ir.Constant(vector_type, ir.Undefined)
        first = builder.insert_element(undefined, value, ir.Constant(ir.IntType(32), 0))
        zeros = ir.Constant(ir.VectorType(ir.IntType(32), like.lanes), [0] * like.lanes)
        return builder.shuffle_vector(first, undefined, zeros)

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
