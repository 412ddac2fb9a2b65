"""Tests of torch_npu.op_plugin, one file per family module (test_<family>.py for
op_plugin/<family>.py). A package, so that its modules import as op_plugin.test_<family>
and may share a basename with tests/contrib/ (test_nms.py, test_package.py)."""
