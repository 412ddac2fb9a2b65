"""torchair.ge_concrete_graph: torchair's older (v1) paths to the GE
converter API, which code written for older torchair imports
(``from torchair.ge_concrete_graph.fx2ge_converter import
register_fx_node_ge_converter``, ``from torchair.ge_concrete_graph import
ge_apis as ge``). They name the same objects as ``torchair.ge``
(torchair/ge/__init__.py explains what vNPU does with them)."""
