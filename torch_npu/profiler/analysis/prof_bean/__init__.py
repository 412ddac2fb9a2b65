"""Beans: one object per record of the profile's raw data (binary records, CSV rows, trace events),
which reads its fields on demand (real torch_npu's package layout)."""
