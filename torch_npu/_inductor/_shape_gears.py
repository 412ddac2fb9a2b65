"""Gears: the core of shape handling (real torch_npu's ``_C._NPUShapeHandling``).

A compiled graph is specialised to its input shapes. Shape handling lets a
few "gear" sizes stand for every size of a batch or sequence dimension: an
input is padded up to the nearest gear (so four batch sizes 3..6 compile as
two, 4 and 8), and a batch larger than the largest gear is split into chunks
of that gear first. The outputs are put back: chunks concatenated, padding
sliced off.

- The sequence strategy pads the listed tensors' sequence dimensions (each
  tensor its own dimension) to their nearest gear; outputs are not touched
  (the graph's outputs need not have a sequence dimension).
- The batch strategy then splits and pads the listed tensors' batch
  dimension (one dimension, equal in all of them), and records each step so
  `recover` can undo them on the outputs of each group, in reverse order.

Real torch_npu has this in C++ (torch_npu/csrc/inductor/aoti_torch); vNPU in
Python, exposed under the same names on ``torch_npu._C`` (ShapeType,
ShapePolicy, _NPUShapeHandling, _BSShapeOpStrategy, _SeqShapeOpStrategy).
Subclasses of the two strategies may override Transform and Recover, as in
real torch_npu.
"""

import enum
import math

import torch
import torch.nn.functional as F

__all__ = []

MAX_GEARS_NUM = 64
MAX_BS_GEAR = 8192
MAX_SEQ_GEAR = 1310720


class ShapeType(enum.IntEnum):
    BATCHSIZE = 0
    SEQLEN = 1


class ShapePolicy(enum.IntEnum):
    TIMES = 0
    CUSTOM = 1


def _check(condition, message):
    if not condition:
        raise RuntimeError(message)


def times_gears(min_size, max_size):
    """min_size, the powers of two above it up to max_size, and max_size
    (the TIMES policy): 16..256 -> 16, 32, 64, 128, 256; 3..20 -> 3, 4, 8, 16, 20."""
    _check(min_size <= max_size, "The min_size cannot be greater than the max_size.")
    _check(min_size >= 1, "The min_size should be a positive number.")
    gears = [min_size]
    gear = 1 << max(0, math.ceil(math.log2(min_size)))
    if gear == min_size:
        gear *= 2
    while gear <= max_size:
        gears.append(gear)
        gear *= 2
    if gears[-1] != max_size:
        gears.append(max_size)
    return gears


def _checked_gears(gears, kind, largest):
    gears = sorted(int(g) for g in gears)
    _check(len(gears) > 0, f"At least one {kind} gear must be provided.")
    _check(len(gears) <= MAX_GEARS_NUM,
           f"Number of {kind} gears ({len(gears)}) exceeds maximum supported ({MAX_GEARS_NUM}).")
    _check(gears[0] >= 1, f"Minimum {kind} ({gears[0]}) must be >= 1.")
    _check(gears[-1] <= largest, f"Maximum {kind} ({gears[-1]}) must be <= {largest}.")
    _check(len(set(gears)) == len(gears), f"{kind.capitalize()} gears must be unique.")
    return gears


def _checked_indices(indices):
    _check(len(indices) > 0, "At least one tensor index must be provided for transformation.")
    _check(min(indices) >= 0, f"Tensor index must be non-negative (found negative index: {min(indices)}).")
    _check(len(set(indices)) == len(indices), "Tensor indices must be unique.")


def nearest_gear(size, gears):
    """The smallest gear >= size; a size above the largest gear is an error."""
    _check(size <= gears[-1], f"Input size ({size}) exceeds the max gear ({gears[-1]}).")
    return next(g for g in gears if g >= size)


def _pad_dim(tensor, dim, to_size, value):
    pad = [0, 0] * (tensor.dim() - dim)
    pad[-1] = to_size - tensor.size(dim)  # F.pad lists the last dimension first
    return F.pad(tensor, pad, mode="constant", value=value)


class _ShapeStrategy:
    """What both strategies hold: their gears, the tensors they apply to, the padding value."""

    def __init__(self):
        self.gears, self.indices, self.value = [], [], 0.0

    def _copy_settings(self, other):
        self.gears, self.indices, self.value = list(other.gears), list(other.indices), other.value


class _SeqShapeOpStrategy(_ShapeStrategy):
    """Pads each listed tensor's sequence dimension to its nearest gear."""

    def __init__(self):
        super().__init__()
        self.dimensions = []

    def _copy_settings(self, other):
        super()._copy_settings(other)
        self.dimensions = list(other.dimensions)

    def InitializeCore(self, gears, dimensions, indices, value):
        self.gears = _checked_gears(gears, "sequence length", MAX_SEQ_GEAR)
        _checked_indices(indices)
        _check(len(dimensions) > 0 and len(indices) == len(dimensions),
               "The length of indices must be consistent with the length of dimensions.")
        _check(min(dimensions) >= 0, f"Dimension must be non-negative (got {min(dimensions)}).")
        pairs = sorted(zip(indices, dimensions))
        self.indices, self.dimensions = [i for i, _ in pairs], [d for _, d in pairs]
        self.value = float(value)

    def Transform(self, inputs, outputs):
        dims = dict(zip(self.indices, self.dimensions))
        _check(self.indices[-1] < len(inputs),
               "Index out of the range of the tensor vector, check inputs or update the indices config.")
        for index, dim in dims.items():
            _check(dim < inputs[index].dim(), "The dimension exceeds the actual tensor's dimension range, "
                                              "check inputs or update the dimension config.")
            _check(inputs[index].size(dim) <= self.gears[-1], "The length of the input tensor sequence exceeds the "
                                                              "maximum supported gear, check the input.")
        for i, tensor in enumerate(inputs):
            if i in dims:
                gear = nearest_gear(tensor.size(dims[i]), self.gears)
                if gear != tensor.size(dims[i]):
                    tensor = _pad_dim(tensor, dims[i], gear, self.value)
            outputs.append(tensor)


class _BSShapeOpStrategy(_ShapeStrategy):
    """Splits the listed tensors' batch dimension into chunks of the largest
    gear when it is larger, and pads the last chunk to its nearest gear."""

    def __init__(self):
        super().__init__()
        self.dimension = 0
        self.records = []  # (operation, chunk index, size before, dimension), in order

    def _copy_settings(self, other):
        super()._copy_settings(other)
        self.dimension = other.dimension

    def InitializeCore(self, gears, dimension, indices, value):
        self.gears = _checked_gears(gears, "batch size", MAX_BS_GEAR)
        _check(dimension >= 0, f"Dimension must be non-negative (got {dimension}).")
        _checked_indices(indices)
        self.dimension, self.indices, self.value = int(dimension), sorted(indices), float(value)

    def _validate(self, inputs):
        _check(self.indices[-1] < len(inputs),
               "Index out of the range of the tensor vector, check inputs or update the indices config.")
        sizes = set()
        for index in self.indices:
            _check(self.dimension < inputs[index].dim(), "The dimension exceeds the actual tensor's dimension range, "
                                                         "check inputs or update the dimension config.")
            sizes.add(inputs[index].size(self.dimension))
        _check(len(sizes) == 1, "The size of the BS dimension for all tensors to be transformed must be consistent.")
        return sizes.pop()

    def Transform(self, inputs, outputs):
        size, dim = self._validate(inputs), self.dimension
        self.records = []
        if size > self.gears[-1]:
            chunks = {i: list(torch.split(inputs[i], self.gears[-1], dim)) for i in self.indices}
            self.records.append(("split", 0, size, dim))
        else:
            chunks = {i: [inputs[i]] for i in self.indices}
        last = len(chunks[self.indices[0]]) - 1
        last_size = chunks[self.indices[0]][last].size(dim)
        gear = nearest_gear(last_size, self.gears)
        if gear != last_size:
            for i in self.indices:
                chunks[i][last] = _pad_dim(chunks[i][last], dim, gear, self.value)
            self.records.append(("pad", last, last_size, dim))
        for group in range(last + 1):
            outputs.append([chunks[i][group] if i in chunks else t for i, t in enumerate(inputs)])

    def Recover(self, inputs, outputs):
        """inputs: one list of outputs per group; outputs: each output whole again."""
        if not inputs or not inputs[0]:
            return
        _check(self.records or len(inputs) == 1, "No transformation record found")
        per_output = [list(column) for column in zip(*inputs)]  # [output][group]
        for operation, group, size, dim in reversed(self.records):
            if operation == "pad":
                per_output = [[t.narrow(dim, 0, size) if g == group else t for g, t in enumerate(groups)]
                              for groups in per_output]
            else:
                per_output = [[torch.cat(groups, dim)] for groups in per_output]
        self.records = []
        outputs.extend(groups[0] for groups in per_output)


class _NPUShapeHandling:
    """The two strategies and which of them apply (``initialize`` once per type)."""

    def __init__(self):
        self._bs, self._seq = _BSShapeOpStrategy(), _SeqShapeOpStrategy()
        self._handles_batch = self._handles_sequence = False
        self.policy = ShapePolicy.TIMES

    def initialize(self, shape_type, *args):
        """initialize(type, gears, dimensions, indices, value) or
        initialize(type, min_size, max_size, policy, dimensions, indices, value)."""
        if len(args) == 4:
            gears, dimensions, indices, value = args
            self.policy = ShapePolicy.CUSTOM
        elif len(args) == 6:
            min_size, max_size, policy, dimensions, indices, value = args
            _check(ShapePolicy(policy) == ShapePolicy.TIMES,
                   "Currently, only the TIMES policy supports passing min_size and max_size parameters.")
            gears, self.policy = times_gears(int(min_size), int(max_size)), ShapePolicy(policy)
        else:
            raise TypeError("initialize() takes (type, gears, dimensions, indices, value) or "
                            "(type, min_size, max_size, policy, dimensions, indices, value)")
        dimensions, indices = list(dimensions), list(indices)
        if ShapeType(shape_type) == ShapeType.BATCHSIZE:
            _check(len(dimensions) > 0, "At least one dimension must be provided.")
            self._bs.InitializeCore(gears, dimensions[0], indices, value)
            self._handles_batch = True
        else:
            self._seq.InitializeCore(gears, dimensions, indices, value)
            self._handles_sequence = True

    def _check_initialized(self):
        _check(self._handles_batch or self._handles_sequence, "Shape handling is not initialized.")

    def register_batch_size_strategy(self, strategy):
        _check(isinstance(strategy, _BSShapeOpStrategy), "Custom strategy must be a _BSShapeOpStrategy.")
        if self._handles_batch:
            strategy._copy_settings(self._bs)
        self._bs = strategy

    def register_sequence_strategy(self, strategy):
        _check(isinstance(strategy, _SeqShapeOpStrategy), "Custom strategy must be a _SeqShapeOpStrategy.")
        if self._handles_sequence:
            strategy._copy_settings(self._seq)
        self._seq = strategy

    def transform(self, tensors):
        """tensors -> one list of tensors per call to make (several when the batch is split)."""
        self._check_initialized()
        tensors = list(tensors)
        if self._handles_sequence:
            padded = []
            self._seq.Transform(tensors, padded)
            tensors = _appended_tensors(padded, self._seq)
            if not self._handles_batch:
                return [tensors]
        groups = []
        self._bs.Transform(tensors, groups)
        return groups

    def recover(self, tensor_groups):
        """One list of outputs per call -> the outputs of one call on the original inputs."""
        self._check_initialized()
        if not self._handles_batch:
            return list(tensor_groups[0])
        outputs = []
        self._bs.Recover([list(group) for group in tensor_groups], outputs)
        return outputs


def _appended_tensors(outputs, strategy):
    """The tensors a sequence strategy appended, in order.

    A custom strategy may append its tensors one by one or as one list, the
    way a batch strategy appends a group; anything else is a mistake to report,
    not to pass on to the batch strategy."""
    tensors = []
    for item in outputs:
        items = item if isinstance(item, (list, tuple)) else [item]
        _check(all(isinstance(t, torch.Tensor) for t in items),
               f"{type(strategy).__name__}.Transform must append tensors (or lists of tensors) to its outputs, "
               f"got {type(item).__name__}.")
        tensors.extend(items)
    return tensors


# The names real torch_npu binds on torch_npu._C (installed there lazily: torch_npu/_c_lazy.py).
C_NAMES = {
    "ShapeType": ShapeType, "ShapePolicy": ShapePolicy, "_NPUShapeHandling": _NPUShapeHandling,
    "_BSShapeOpStrategy": _BSShapeOpStrategy, "_SeqShapeOpStrategy": _SeqShapeOpStrategy,
}
