"""Tests of torch_npu.contrib, one file per module: function/test_<x>.py for
contrib/function/<x>.py, module/test_<x>.py for contrib/module/<x>.py. A package, so that
its modules import as contrib.function.test_<x> and may share a basename with
tests/op_plugin/."""
