"""torch_npu.testing: the helpers test suites written against torch_npu import
(``testcase.TestCase``, ``testcase.run_tests``, ``common_utils``,
``decorator``), so that they run unchanged on vNPU."""
