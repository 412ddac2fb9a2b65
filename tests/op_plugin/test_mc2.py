"""torch_npu.op_plugin.mc2: the communication-fused operators (matmul + collective, MoE
dispatch / combine) over real hccl groups. One 2-rank torchrun job runs every op on npu
(hccl) and on cpu through a group with a gloo backend too, and checks both against the
unfused computation written out in the job from every rank's inputs (gathered with
gloo); it also checks the group-name lookup errors and FakeTensor / torch.compile
tracing. Single-process tests: op-plugin's schemas, the re-exports and the argument
errors raised before any group is needed."""

import re

import pytest
import torch

import torch_npu
from torchrun_jobs import torchrun

OP_PLUGIN_SCHEMAS = [
    "npu_mm_reduce_scatter_base(Tensor self, Tensor x2, str hcom, int world_size, *, str reduce_op='sum', "
    "Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, int comm_turn=0, ScalarType? output_dtype=None, "
    "str? comm_mode=None) -> Tensor",
    "npu_all_gather_base_mm(Tensor self, Tensor x2, str hcom, int world_size, *, Tensor? bias=None, "
    "Tensor? x1_scale=None, Tensor? x2_scale=None, int gather_index=0, bool gather_output=True, int comm_turn=0, "
    "ScalarType? output_dtype=None, str? comm_mode=None) -> (Tensor, Tensor)",
    "npu_mm_all_reduce_base(Tensor x1, Tensor x2, str hcom, *, str reduce_op='sum', Tensor? bias=None, "
    "Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, Tensor? x3=None, Tensor? dequant_scale=None, "
    "Tensor? pertoken_scale=None, Tensor? comm_quant_scale_1=None, Tensor? comm_quant_scale_2=None, "
    "int antiquant_group_size=0, int comm_turn=0, int[]? group_sizes=None, int? y_dtype=None, int? x1_dtype=None, "
    "int? x2_dtype=None, int? dequant_scale_dtype=None, int? pertoken_scale_dtype=None, int comm_quant_mode=0, "
    "str? comm_mode=None) -> Tensor",
    "npu_alltoallv_gmm(Tensor gmm_x, Tensor gmm_weight, str hcom, int ep_world_size, int[] send_counts, "
    "int[] recv_counts, *, Tensor? send_counts_tensor=None, Tensor? recv_counts_tensor=None, Tensor? mm_x=None, "
    "Tensor? mm_weight=None, bool trans_gmm_weight=False, bool trans_mm_weight=False, bool permute_out_flag=False, "
    "str? comm_mode=None) -> (Tensor, Tensor, Tensor)",
    "npu_gmm_alltoallv(Tensor gmm_x, Tensor gmm_weight, str hcom, int ep_world_size, int[] send_counts, "
    "int[] recv_counts, *, Tensor? send_counts_tensor=None, Tensor? recv_counts_tensor=None, Tensor? mm_x=None, "
    "Tensor? mm_weight=None, bool trans_gmm_weight=False, bool trans_mm_weight=False, str? comm_mode=None) "
    "-> (Tensor, Tensor)",
    "npu_all_gather_quant_mm(Tensor self, Tensor x2, str hcom, int world_size, *, Tensor? bias=None, "
    "Tensor? x1_scale=None, Tensor? x2_scale=None, Tensor? quant_scale=None, int block_size=0, int gather_index=0, "
    "bool gather_output=True, int comm_turn=0, int[]? group_sizes=None, bool amax_output=False, int? y_dtype=None, "
    "int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None, "
    "str? comm_mode=None) -> (Tensor, Tensor, Tensor)",
    "npu_quant_mm_reduce_scatter(Tensor self, Tensor x2, str hcom, int world_size, *, str reduce_op='sum', "
    "Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, Tensor? quant_scale=None, int block_size=0, "
    "int comm_turn=0, int[]? group_sizes=None, bool amax_output=False, int? y_dtype=None, int? x1_dtype=None, "
    "int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None, str? comm_mode=None) "
    "-> (Tensor, Tensor)",
    "npu_alltoallv_quant_gmm(Tensor gmm_x, Tensor gmm_weight, Tensor gmm_x_scale, Tensor gmm_weight_scale, "
    "str hcom, int ep_world_size, int[] send_counts, int[] recv_counts, int gmm_y_dtype, *, "
    "Tensor? send_counts_tensor=None, Tensor? recv_counts_tensor=None, Tensor? mm_x=None, Tensor? mm_weight=None, "
    "Tensor? mm_x_scale=None, Tensor? mm_weight_scale=None, int? gmm_x_quant_mode=None, "
    "int? gmm_weight_quant_mode=None, int? mm_x_quant_mode=None, int? mm_weight_quant_mode=None, "
    "bool permute_out_flag=False, int[]? group_size=None, int? gmm_x_dtype=None, int? gmm_weight_dtype=None, "
    "int? gmm_x_scale_dtype=None, int? gmm_weight_scale_dtype=None, int? mm_x_dtype=None, int? mm_weight_dtype=None, "
    "int? mm_x_scale_dtype=None, int? mm_weight_scale_dtype=None, int? mm_y_dtype=None, str? comm_mode=None) "
    "-> (Tensor, Tensor, Tensor)",
    "npu_quant_gmm_alltoallv(Tensor gmm_x, Tensor gmm_weight, Tensor gmm_x_scale, Tensor gmm_weight_scale, "
    "str hcom, int ep_world_size, int[] send_counts, int[] recv_counts, int gmm_y_dtype, *, "
    "Tensor? send_counts_tensor=None, Tensor? recv_counts_tensor=None, Tensor? mm_x=None, Tensor? mm_weight=None, "
    "Tensor? mm_x_scale=None, Tensor? mm_weight_scale=None, Tensor? comm_quant_scale=None, "
    "int? gmm_x_quant_mode=None, int? gmm_weight_quant_mode=None, int? mm_x_quant_mode=None, "
    "int? mm_weight_quant_mode=None, int? comm_quant_mode=None, int[]? group_size=None, int? gmm_x_dtype=None, "
    "int? gmm_weight_dtype=None, int? gmm_x_scale_dtype=None, int? gmm_weight_scale_dtype=None, "
    "int? mm_x_dtype=None, int? mm_weight_dtype=None, int? mm_x_scale_dtype=None, int? mm_weight_scale_dtype=None, "
    "int? comm_quant_dtype=None, int? mm_y_dtype=None, str? comm_mode=None) -> (Tensor, Tensor)",
    "npu_all_to_all_matmul(Tensor x1, Tensor x2, str hcom, int world_size, Tensor? bias=None, "
    "int[]? all2all_axes=None, bool all2all_out_flag=True, str? comm_mode=None) -> (Tensor, Tensor)",
    "npu_matmul_all_to_all(Tensor x1, Tensor x2, str hcom, int world_size, Tensor? bias=None, "
    "int[]? all2all_axes=None, str? comm_mode=None) -> Tensor",
    "npu_all_to_all_quant_matmul(Tensor x1, Tensor x2, str hcom, int world_size, *, bool all2all_out_flag=True, "
    "Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, Tensor? common_scale=None, "
    "Tensor? x1_offset=None, Tensor? x2_offset=None, int? x1_quant_mode=None, int? x2_quant_mode=None, "
    "int? common_quant_mode=None, int[]? group_sizes=None, int[]? all2all_axes=None, int? comm_quant_dtype=None, "
    "int? x1_quant_dtype=None, int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, "
    "int? x2_scale_dtype=None, int? output_scale_dtype=None, int? comm_scale_dtype=None, int? y_dtype=None, "
    "str? comm_mode=None) -> (Tensor, Tensor)",
    "npu_quant_matmul_all_to_all(Tensor x1, Tensor x2, str hcom, int world_size, Tensor? bias=None, "
    "Tensor? x1_scale=None, Tensor? x2_scale=None, Tensor? common_scale=None, Tensor? x1_offset=None, "
    "Tensor? x2_offset=None, int? x1_quant_mode=None, int? x2_quant_mode=None, int? common_quant_mode=None, "
    "int[]? group_sizes=None, int[]? all2all_axes=None, int? comm_quant_dtype=None, int? x1_dtype=None, "
    "int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None, int? output_scale_dtype=None, "
    "int? comm_scale_dtype=None, int? y_dtype=None, str? comm_mode=None) -> Tensor",
    "npu_moe_distribute_dispatch(Tensor x, Tensor expert_ids, str group_ep, int ep_world_size, int ep_rank_id, "
    "int moe_expert_num, *, Tensor? scales=None, Tensor? x_active_mask=None, Tensor? expert_scales=None, "
    "str group_tp=\"\", int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, "
    "int shared_expert_rank_num=0, int quant_mode=0, int global_bs=0, int expert_token_nums_type=1) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_moe_distribute_dispatch_v2(Tensor x, Tensor expert_ids, str group_ep, int ep_world_size, int ep_rank_id, "
    "int moe_expert_num, *, Tensor? scales=None, Tensor? x_active_mask=None, Tensor? expert_scales=None, "
    "Tensor? elastic_info=None, Tensor? performance_info=None, str group_tp=\"\", int tp_world_size=0, "
    "int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, int shared_expert_rank_num=0, "
    "int quant_mode=0, int global_bs=0, int expert_token_nums_type=1, str comm_alg=\"\", int zero_expert_num=0, "
    "int copy_expert_num=0, int const_expert_num=0, int? y_dtype=None, int? x_dtype=None, int? scales_dtype=None) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    "npu_moe_distribute_combine(Tensor expand_x, Tensor expert_ids, Tensor expand_idx, Tensor ep_send_counts, "
    "Tensor expert_scales, str group_ep, int ep_world_size, int ep_rank_id, int moe_expert_num, *, "
    "Tensor? tp_send_counts=None, Tensor? x_active_mask=None, Tensor? activation_scale=None, "
    "Tensor? weight_scale=None, Tensor? group_list=None, Tensor? expand_scales=None, Tensor? shared_expert_x=None, "
    "str group_tp=\"\", int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, "
    "int shared_expert_rank_num=0, int global_bs=0, int out_dtype=0, int comm_quant_mode=0, int group_list_type=0) "
    "-> Tensor",
    "npu_moe_distribute_combine_v2(Tensor expand_x, Tensor expert_ids, Tensor assist_info_for_combine, "
    "Tensor ep_send_counts, Tensor expert_scales, str group_ep, int ep_world_size, int ep_rank_id, "
    "int moe_expert_num, *, Tensor? tp_send_counts=None, Tensor? x_active_mask=None, Tensor? expand_scales=None, "
    "Tensor? shared_expert_x=None, Tensor? elastic_info=None, Tensor? ori_x=None, Tensor? const_expert_alpha_1=None, "
    "Tensor? const_expert_alpha_2=None, Tensor? const_expert_v=None, Tensor? performance_info=None, "
    "str group_tp=\"\", int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, "
    "int shared_expert_rank_num=0, int global_bs=0, int comm_quant_mode=0, str comm_alg=\"\", int zero_expert_num=0, "
    "int copy_expert_num=0, int const_expert_num=0) -> Tensor",
    "npu_moe_distribute_combine_add_rms_norm(Tensor expand_x, Tensor expert_ids, Tensor expand_idx, "
    "Tensor ep_send_counts, Tensor expert_scales, Tensor residual_x, Tensor gamma, str group_ep, int ep_world_size, "
    "int ep_rank_id, int moe_expert_num, *, Tensor? tp_send_counts=None, Tensor? x_active_mask=None, "
    "Tensor? activation_scale=None, Tensor? weight_scale=None, Tensor? group_list=None, Tensor? expand_scales=None, "
    "Tensor? shared_expert_x=None, Tensor? elastic_info=None, Tensor? ori_x=None, Tensor? const_expert_alpha_1=None, "
    "Tensor? const_expert_alpha_2=None, Tensor? const_expert_v=None, str group_tp=\"\", int tp_world_size=0, "
    "int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, int shared_expert_rank_num=0, "
    "int global_bs=0, int out_dtype=0, int comm_quant_mode=0, int group_list_type=0, str comm_alg=\"\", "
    "float norm_eps=1e-06, int zero_expert_num=0, int copy_expert_num=0, int const_expert_num=0) "
    "-> (Tensor, Tensor, Tensor)",
    "_npu_distribute_barrier(Tensor x_ref, str group, int world_size, *, Tensor? time_out=None, "
    "Tensor? elastic_info=None) -> Tensor",
]
NAMES = [s.split("(", 1)[0] for s in OP_PLUGIN_SCHEMAS]


@pytest.mark.parametrize("schema", OP_PLUGIN_SCHEMAS, ids=NAMES)
def test_schema_is_op_plugins(schema):
    op = getattr(torch.ops.npu, schema.split("(", 1)[0]).default
    assert str(op._schema) == str(torch._C.parse_schema("npu::" + schema))


def test_exported_on_torch_npu():
    for name in NAMES:
        assert getattr(torch_npu, name) is getattr(torch.ops.npu, name), name


# ------------------------------------------------------------------ errors needing no group

def t(*shape, dtype=torch.float16):
    return torch.zeros(*shape, dtype=dtype)


def i8(*shape):
    return torch.zeros(*shape, dtype=torch.int8)


ops = torch.ops.npu
F32 = torch.float32

BAD_INPUTS = [
    ("x1 3-d", lambda: ops.npu_all_gather_base_mm(t(2, 4, 4), t(4, 4), "h", 2), r"x1 should be 2-dimensional"),
    ("gather_index", lambda: ops.npu_all_gather_base_mm(t(2, 4), t(4, 4), "h", 2, gather_index=2),
     r"gather_index should be 0 \(gather x1\) or 1"),
    ("ag int8 without x2_scale", lambda: ops.npu_all_gather_base_mm(i8(2, 4), i8(4, 4), "h", 2),
     r"needs x2_scale"),
    ("ag k", lambda: ops.npu_all_gather_base_mm(t(2, 4), t(3, 4), "h", 2, gather_index=1),
     r"the k dimension of x1 \(4\) and of allgather\(x2\) \(6\) should be equal"),
    ("comm_turn", lambda: ops.npu_all_gather_base_mm(t(2, 4), t(4, 4), "h", 2, comm_turn=1), r"comm_turn should be 0"),
    ("comm_mode", lambda: ops.npu_mm_reduce_scatter_base(t(2, 4), t(4, 4), "h", 2, comm_mode="dma"),
     r"comm_mode should be None, 'ai_cpu', 'aiv' or 'ccu'"),
    ("reduce_op", lambda: ops.npu_mm_reduce_scatter_base(t(2, 4), t(4, 4), "h", 2, reduce_op="max"),
     r"reduce_op should be 'sum'"),
    ("k mismatch", lambda: ops.npu_mm_reduce_scatter_base(t(2, 4), t(5, 4), "h", 2),
     r"the k dimension of x1 \(4\) and x2 \(5\)"),
    ("int8 without x2_scale", lambda: ops.npu_mm_reduce_scatter_base(i8(2, 4), i8(4, 4), "h", 2),
     r"needs x2_scale"),
    ("scales on floats", lambda: ops.npu_mm_reduce_scatter_base(t(2, 4), t(4, 4), "h", 2, x2_scale=t(4, dtype=F32)),
     r"x1_scale / x2_scale are only for int8"),
    ("bias shape", lambda: ops.npu_mm_reduce_scatter_base(t(2, 4), t(4, 4), "h", 2, bias=t(3)),
     r"bias should have shape \[4\]"),
    ("comm quant", lambda: ops.npu_mm_all_reduce_base(t(2, 4), t(4, 4), "h", comm_quant_scale_1=t(4)),
     r"low-bit communication .* is not supported on vNPU"),
    ("all_reduce x3", lambda: ops.npu_mm_all_reduce_base(t(2, 4), t(4, 4), "h", x3=t(2, 3)),
     r"x3 should have the output's shape \[2, 4\]"),
    ("weight quant without scale", lambda: ops.npu_mm_all_reduce_base(t(2, 4), i8(4, 4), "h"),
     r"needs antiquant_scale"),
    ("per-group scale", lambda: ops.npu_mm_all_reduce_base(t(2, 64), i8(64, 4), "h", antiquant_scale=t(3, 4),
                                                          antiquant_group_size=32),
     r"antiquant_scale should have shape \[2, 4\]"),
    ("per-block", lambda: ops.npu_all_gather_quant_mm(t(2, 4), t(4, 4), "h", 2, group_sizes=[1, 128, 128]),
     r"per-block quantisation is not supported on vNPU"),
    ("hifloat8", lambda: ops.npu_all_gather_quant_mm(i8(2, 4), i8(4, 4), "h", 2, x1_dtype=torch_npu.hifloat8),
     r"x1_dtype=torch_npu.hifloat8 is not supported on vNPU"),
    ("amax", lambda: ops.npu_quant_mm_reduce_scatter(t(2, 4), t(4, 4), "h", 2, amax_output=True),
     r"amax_output=True is not supported on vNPU"),
    ("y_dtype required", lambda: ops.npu_quant_mm_reduce_scatter(i8(2, 4), i8(4, 4), "h", 2, x2_scale=t(4, dtype=F32)),
     r"y_dtype should be given"),
    ("a2a axes", lambda: ops.npu_all_to_all_matmul(t(4, 4), t(8, 4), "h", 2, all2all_axes=[-1, -2]),
     r"all2all_axes should be None or \[-2, -1\]"),
    ("a2a x2 rows", lambda: ops.npu_all_to_all_matmul(t(4, 4), t(4, 4), "h", 2),
     r"x2 should have H \* world_size = 8 rows"),
    ("a2a x1 mode", lambda: ops.npu_all_to_all_quant_matmul(t(4, 4), i8(8, 4), "h", 2, x1_quant_mode=6),
     r"x1_quant_mode 6 is not supported on vNPU"),
    ("a2a common scale", lambda: ops.npu_quant_matmul_all_to_all(i8(4, 4), i8(4, 4), "h", 2, common_scale=t(1)),
     r"low-bit communication .* is not supported on vNPU"),
    ("a2a x1_scale", lambda: ops.npu_quant_matmul_all_to_all(i8(4, 4), i8(4, 4), "h", 2, x2_scale=t(4, dtype=F32)),
     r"x1_scale is required"),
    ("counts length", lambda: ops.npu_alltoallv_gmm(t(4, 8), t(2, 8, 4), "h", 2, [1, 1, 1], [1, 1, 1, 1]),
     r"send_counts should have e \* ep_world_size = 2 \* 2 entries, but got 3"),
    ("counts sum", lambda: ops.npu_gmm_alltoallv(t(4, 8), t(2, 8, 4), "h", 2, [1, 1, 1, 0], [1, 1, 1, 1]),
     r"send_counts add up to 3, but gmm_x has 4 rows"),
    ("counts tensor", lambda: ops.npu_alltoallv_gmm(t(4, 8), t(2, 8, 4), "h", 2, [1] * 4, [1] * 4,
                                                    send_counts_tensor=torch.ones(4, dtype=torch.int64)),
     r"send_counts_tensor / recv_counts_tensor are not supported"),
    ("mx gmm", lambda: ops.npu_alltoallv_quant_gmm(i8(4, 8), i8(2, 8, 4), t(1, dtype=F32), t(1, dtype=F32), "h", 2,
                                                   [1] * 4, [1] * 4, 5, gmm_x_quant_mode=6),
     r"gmm_x_quant_mode=6 \(mx quantisation\) is not supported on vNPU"),
    ("gmm scale shape", lambda: ops.npu_quant_gmm_alltoallv(i8(4, 8), i8(2, 8, 4), t(2, dtype=F32),
                                                            t(1, dtype=F32), "h", 2, [1] * 4, [1] * 4, 5),
     r"gmm_x_scale should be float32 of shape \[1\]"),
    ("dispatch quant_mode", lambda: ops.npu_moe_distribute_dispatch(t(2, 8), torch.zeros(2, 1, dtype=torch.int32),
                                                                    "h", 2, 0, 2, quant_mode=1),
     r"quant_mode 1 is not supported on vNPU"),
    ("dispatch experts", lambda: ops.npu_moe_distribute_dispatch(t(2, 8), torch.zeros(2, 1, dtype=torch.int32),
                                                                 "h", 2, 0, 3),
     r"moe_expert_num \(3\) should be a positive multiple of ep_world_size - shared_expert_rank_num = 2"),
    ("dispatch tp 2", lambda: ops.npu_moe_distribute_dispatch(t(2, 8), torch.zeros(2, 1, dtype=torch.int32),
                                                              "h", 2, 0, 2, tp_world_size=2),
     r"tp_world_size=2 is not supported on vNPU"),
    ("dispatch scales", lambda: ops.npu_moe_distribute_dispatch(t(2, 8), torch.zeros(2, 1, dtype=torch.int32),
                                                                "h", 2, 0, 2, quant_mode=2, scales=t(3, 8, dtype=F32)),
     r"scales should be float32 of shape \[2, 8\]"),
    ("combine scales", lambda: ops.npu_moe_distribute_combine(t(4, 8), torch.zeros(2, 1, dtype=torch.int32),
                                                              torch.zeros(2, dtype=torch.int32),
                                                              torch.zeros(2, dtype=torch.int32), t(2, 2, dtype=F32),
                                                              "h", 2, 0, 2),
     r"expert_scales should be float32 of shape \[2, 1\]"),
    ("combine comm quant", lambda: ops.npu_moe_distribute_combine_v2(
        t(4, 8), torch.zeros(2, 1, dtype=torch.int32), torch.zeros(2, dtype=torch.int32),
        torch.zeros(2, dtype=torch.int32), t(2, 1, dtype=F32), "h", 2, 0, 2, comm_quant_mode=2),
     r"comm_quant_mode=2 is not supported on vNPU"),
    ("rms residual", lambda: ops.npu_moe_distribute_combine_add_rms_norm(
        t(4, 8), torch.zeros(2, 1, dtype=torch.int32), torch.zeros(2, dtype=torch.int32),
        torch.zeros(2, dtype=torch.int32), t(2, 1, dtype=F32), t(2, 8), t(8), "h", 2, 0, 2),
     r"residual_x should have shape \[2, 1, 8\]"),
    ("barrier elastic", lambda: ops._npu_distribute_barrier(t(2), "h", 2, elastic_info=t(2)),
     r"elastic_info is not supported on vNPU"),
]


@pytest.mark.parametrize("call,message", [(c, m) for _, c, m in BAD_INPUTS], ids=[n for n, _, _ in BAD_INPUTS])
def test_bad_inputs(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_group_name_without_distributed():
    """A well-formed call with no process group: the error names the argument."""
    import torch.distributed as dist
    expected = ("names no hccl process group: torch.distributed is not initialized" if not dist.is_initialized()
                else "is not the hccl comm name")
    with pytest.raises(RuntimeError, match=r"hcom 'hccl_comm_0_0' " + re.escape(expected)):
        ops.npu_all_gather_base_mm(t(2, 4), t(4, 4), "hccl_comm_0_0", 2)
    with pytest.raises(RuntimeError, match=r"group_ep 'hccl_comm_0_0'"):
        ops.npu_moe_distribute_dispatch(t(2, 8), torch.zeros(2, 1, dtype=torch.int32), "hccl_comm_0_0", 2, 0, 2)
    with pytest.raises(RuntimeError, match=r"hcom should be the name of an hccl communicator"):
        ops.npu_mm_all_reduce_base(t(2, 4), t(4, 4), "")


def test_mm_all_reduce_propagates_shapes_under_fake_tensors_without_a_job():
    # op-plugin's meta function never looks the communicator up: FakeTensorMode
    # gives the output's shape and dtype whatever hcom says (outside a job)
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    if dist.is_initialized():
        pytest.skip("a process group is up")
    with FakeTensorMode():
        out = ops.npu_mm_all_reduce_base(torch.randn(8, 16, dtype=torch.float16).npu(),
                                         torch.randn(16, 4, dtype=torch.float16).npu(), "any group")
        quant = ops.npu_mm_all_reduce_base(torch.ones(8, 16, dtype=torch.int8).npu(),
                                           torch.ones(16, 4, dtype=torch.int8).npu(), "any group",
                                           dequant_scale=torch.ones(4, dtype=torch.bfloat16).npu())
    assert (out.shape, out.dtype, quant.dtype) == ((8, 4), torch.float16, torch.bfloat16)
    with pytest.raises(RuntimeError, match="names no hccl process group"):  # real tensors still need the group
        ops.npu_mm_all_reduce_base(t(2, 4), t(4, 4), "any group")


# ------------------------------------------------------------------ the 2-rank job

JOB = r'''
"""2 ranks: every mc2 op on npu (hccl) and on cpu (the same op through a gloo + hccl group)
against the unfused computation from every rank's inputs. Prints "RANK r OK"."""
import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.testing import assert_close

import torch_npu

dist.init_process_group("hccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.npu.set_device(rank % torch.npu.device_count())
NPU = torch.device("npu", torch.npu.current_device())
gloo = dist.new_group(backend="gloo")
both = dist.new_group(backend="cpu:gloo,npu:hccl")
# MindSpeed names a group by its global rank, vllm-ascend by its rank in the group.
HCOM = dist.group.WORLD._get_backend(torch.device("npu")).get_hccl_comm_name(dist.get_global_rank(dist.group.WORLD,
                                                                                                     rank))
BOTH = both._get_backend(torch.device("npu")).get_hccl_comm_name(both.rank())
ops = torch.ops.npu
BF16, F16, F32, I8, I32 = torch.bfloat16, torch.float16, torch.float32, torch.int8, torch.int32
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
TOL = {F16: dict(atol=2e-3, rtol=2e-3), BF16: dict(atol=2e-2, rtol=2e-2), F32: dict(atol=1e-5, rtol=1e-5)}


def rnd(*shape, seed, dtype=F32, scale=1.0):
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale).to(dtype)


def ints(*shape, seed):
    return torch.randint(-8, 8, shape, generator=torch.Generator().manual_seed(seed), dtype=I8)


def pos(*shape, seed):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) + 0.5


def everyone(t):
    """Every rank's t (on cpu), in rank order."""
    out = [None] * world
    fp8 = isinstance(t, torch.Tensor) and t.dtype in (E4M3, E5M2)
    dist.all_gather_object(out, t.view(torch.uint8) if fp8 else t, group=gloo)  # float8 does not pickle
    return [o.view(t.dtype) for o in out] if fp8 else out


def bits(t):
    return t.view(torch.uint8) if t.dtype in (E4M3, E5M2) else t


def close(name, got, want):
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, want.dtype, got.shape, want.shape)
    if want.is_floating_point() and want.dtype not in (E4M3, E5M2):
        assert_close(got, want, **TOL[want.dtype], msg=lambda m: f"{name}: {m}")
    else:
        assert torch.equal(bits(got), bits(want)), (name, got, want)


def run(name, f):
    """f(device, comm name) on npu (hccl) and on cpu (gloo): the two agree; the npu result on cpu."""
    got = f(NPU, HCOM)
    ref = f("cpu", BOTH)
    got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
    ref = tuple(ref) if isinstance(ref, (tuple, list)) else (ref,)
    for i, (a, b) in enumerate(zip(got, ref)):
        assert (a is None) == (b is None), (name, i)
        if a is not None:
            assert a.device.type == "npu", (name, i, a.device)
            close(f"{name}[{i}] npu vs cpu", a, b)
    out = tuple(None if a is None else a.cpu() for a in got)
    return out if len(out) > 1 else out[0]


def on(dev, *ts):
    return [None if x is None else x.to(dev) for x in ts]


# ---------------------------------------------------------------- all-gather matmul
x1 = rnd(4, 16, seed=rank, dtype=F16)
x2 = rnd(16, 8, seed=100, dtype=F16)
bias = rnd(8, seed=101, dtype=F16)
out, gather = run("ag_mm", lambda d, h: ops.npu_all_gather_base_mm(*on(d, x1, x2), h, world, bias=bias.to(d)))
want_gather = torch.cat(everyone(x1))
close("ag_mm gather_out", gather, want_gather)
close("ag_mm", out, (want_gather.float() @ x2.float() + bias.float()).to(F16))
out, gather = run("ag_mm no gather", lambda d, h: ops.npu_all_gather_base_mm(*on(d, x1, x2), h, world,
                                                                             gather_output=False, comm_mode="aiv"))
assert gather.shape == (0,) and gather.dtype == F16
close("ag_mm no gather", out, (want_gather.float() @ x2.float()).to(F16))

w_part = rnd(8, 6, seed=200 + rank, dtype=BF16)
xa = rnd(3, 16, seed=210, dtype=BF16)
out, gather = run("ag_mm x2", lambda d, h: ops.npu_all_gather_base_mm(*on(d, xa, w_part), h, world, gather_index=1))
w_all = torch.cat(everyone(w_part))
close("ag_mm x2 gather_out", gather, w_all)
close("ag_mm x2", out, (xa.float() @ w_all.float()).to(BF16))

q1, q2 = ints(4, 16, seed=300 + rank), ints(16, 8, seed=310)
s1, s2 = pos(4, 1, seed=320 + rank), pos(1, 8, seed=330)
out, gather = run("ag_mm int8", lambda d, h: ops.npu_all_gather_base_mm(*on(d, q1, q2), h, world, x1_scale=s1.to(d),
                                                                       x2_scale=s2.to(d)))
acc = torch.cat(everyone(q1)).double() @ q2.double()
close("ag_mm int8", out, (torch.cat(everyone(s1)) * s2 * acc.float()).to(BF16))
s2_int64 = torch_npu.npu_trans_quant_param(s2.reshape(-1).npu()).cpu()
out, _ = run("ag_mm int8 int64 scale", lambda d, h: ops.npu_all_gather_base_mm(*on(d, q1, q2), h, world,
                                                                               x2_scale=s2_int64.to(d)))
close("ag_mm int8 int64 scale", out, (s2 * acc.float()).to(F16))

# ---------------------------------------------------------------- matmul reduce-scatter
xr, wr = rnd(4, 16, seed=400 + rank, dtype=F16), rnd(16, 8, seed=410 + rank, dtype=F16)
out = run("mm_rs", lambda d, h: ops.npu_mm_reduce_scatter_base(*on(d, xr, wr), h, world, bias=bias.to(d)))
partial = [a.float() @ b.float() + bias.float() for a, b in zip(everyone(xr), everyone(wr))]
close("mm_rs", out, (partial[0] + partial[1])[rank * 2:(rank + 1) * 2].to(F16))
out = run("mm_rs int8", lambda d, h: ops.npu_mm_reduce_scatter_base(*on(d, q1, q2), h, world, x1_scale=s1.to(d),
                                                                    x2_scale=s2.to(d), output_dtype=F16))
partial = [s * s2 * (a.double() @ q2.double()).float() for a, s in zip(everyone(q1), everyone(s1))]
close("mm_rs int8", out, (partial[0] + partial[1])[rank * 2:(rank + 1) * 2].to(F16))
out, amax = run("quant_mm_rs", lambda d, h: ops.npu_quant_mm_reduce_scatter(*on(d, q1, q2), h, world,
                                                                            x1_scale=s1.to(d), x2_scale=s2.to(d),
                                                                            y_dtype=F16))
close("quant_mm_rs", out, (partial[0] + partial[1])[rank * 2:(rank + 1) * 2].to(F16))
assert amax.shape == (0,) and amax.dtype == F32

f1, f2 = rnd(4, 16, seed=500 + rank, dtype=E4M3), rnd(16, 8, seed=510, dtype=E4M3)
t1, t2 = torch.tensor([0.5]), torch.tensor([0.25])
out, gather, amax = run("ag_quant_mm fp8", lambda d, h: ops.npu_all_gather_quant_mm(
    *on(d, f1, f2), h, world, x1_scale=t1.to(d), x2_scale=t2.to(d), y_dtype=BF16))
close("ag_quant_mm fp8 gather", gather, torch.cat(everyone(f1)))
close("ag_quant_mm fp8", out, (0.125 * (torch.cat(everyone(f1)).float() @ f2.float())).to(BF16))
assert amax.shape == (0,) and amax.dtype == F32

# ---------------------------------------------------------------- matmul all-reduce
xs, ws = rnd(2, 3, 16, seed=600 + rank, dtype=F16), rnd(16, 8, seed=610 + rank, dtype=F16)
x3 = rnd(2, 3, 8, seed=620 + rank, dtype=F16)
out = run("mm_ar", lambda d, h: ops.npu_mm_all_reduce_base(*on(d, xs, ws), h, bias=bias.to(d), x3=x3.to(d)))
partial = [a.reshape(6, 16).float() @ b.float() + bias.float() + c.reshape(6, 8).float()
           for a, b, c in zip(everyone(xs), everyone(ws), everyone(x3))]
close("mm_ar", out, (partial[0] + partial[1]).reshape(2, 3, 8).to(F16))

xw, qw = rnd(4, 64, seed=630 + rank, dtype=BF16), ints(64, 8, seed=640 + rank)
sc, off = rnd(8, seed=650, dtype=BF16), rnd(8, seed=660, dtype=BF16)
out = run("mm_ar antiquant", lambda d, h: ops.npu_mm_all_reduce_base(*on(d, xw, qw), h, antiquant_scale=sc.to(d),
                                                                     antiquant_offset=off.to(d)))
partial = [a.float() @ ((b.float() + off.float()) * sc.float()) for a, b in zip(everyone(xw), everyone(qw))]
close("mm_ar antiquant", out, (partial[0] + partial[1]).to(BF16))
gsc = rnd(2, 8, seed=670, dtype=BF16)
out = run("mm_ar antiquant group", lambda d, h: ops.npu_mm_all_reduce_base(
    *on(d, xw, qw), h, antiquant_scale=gsc.to(d), antiquant_group_size=32))
full = gsc.float().repeat_interleave(32, 0)
partial = [a.float() @ (b.float() * full) for a, b in zip(everyone(xw), everyone(qw))]
close("mm_ar antiquant group", out, (partial[0] + partial[1]).to(BF16))

dq, pt = pos(8, seed=680), pos(4, seed=690 + rank)
ib = torch.randint(-50, 50, (8,), generator=torch.Generator().manual_seed(700), dtype=I32)
out = run("mm_ar int8", lambda d, h: ops.npu_mm_all_reduce_base(*on(d, q1, q2), h, dequant_scale=dq.to(d),
                                                                pertoken_scale=pt.to(d), bias=ib.to(d)))
partial = [((a.double() @ q2.double()).float() + ib.float()) * dq * p.unsqueeze(-1)
           for a, p in zip(everyone(q1), everyone(pt))]
close("mm_ar int8", out, (partial[0] + partial[1]).to(F16))

# ---------------------------------------------------------------- all-to-all matmuls
xt = rnd(4, 8, seed=800 + rank, dtype=F16)
wt, bt = rnd(16, 6, seed=810, dtype=F16), rnd(6, seed=820, dtype=F16)
out, permuted = run("a2a_mm", lambda d, h: ops.npu_all_to_all_matmul(*on(d, xt, wt), h, world, bias=bt.to(d)))
want_perm = torch.cat([x[rank * 2:(rank + 1) * 2] for x in everyone(xt)], dim=1)
close("a2a_mm permuted", permuted, want_perm)
close("a2a_mm", out, (want_perm.float() @ wt.float() + bt.float()).to(F16))
out, none = run("a2a_mm no out", lambda d, h: ops.npu_all_to_all_matmul(*on(d, xt, wt), h, world,
                                                                        all2all_out_flag=False))
assert none is None

xm, wm = rnd(3, 8, seed=830 + rank, dtype=BF16), rnd(8, 6, seed=840, dtype=BF16)
out = run("mm_a2a", lambda d, h: ops.npu_matmul_all_to_all(*on(d, xm, wm), h, world, all2all_axes=[-1, -2]))
ys = [(x.float() @ wm.float()).to(BF16) for x in everyone(xm)]
close("mm_a2a", out, torch.cat([y[:, rank * 3:(rank + 1) * 3] for y in ys]))

wq8, s2t, bf = rnd(16, 6, seed=850, dtype=E4M3), pos(6, seed=860), rnd(6, seed=870)
out, permuted = run("a2a_quant_mm fp8", lambda d, h: ops.npu_all_to_all_quant_matmul(
    *on(d, xt, wq8), h, world, bias=bf.to(d), x2_scale=s2t.to(d), x1_quant_dtype=E4M3))
amax = want_perm.float().abs().amax(-1, keepdim=True)
xscale = amax / 448.0
q = (want_perm.float() / xscale).to(E4M3)
close("a2a_quant_mm fp8", out, (q.float() @ wq8.float() + bf) * xscale * s2t)
close("a2a_quant_mm fp8 permuted", permuted, want_perm)
wi8 = ints(16, 6, seed=880)
out, _ = run("a2a_quant_mm int8", lambda d, h: ops.npu_all_to_all_quant_matmul(
    *on(d, xt, wi8), h, world, bias=bf.to(d), x2_scale=s2t.to(d), y_dtype=F16))
xscale = amax / 127.0
q = torch.round(want_perm.float() / xscale).clamp(-128, 127)
close("a2a_quant_mm int8", out, ((q.double() @ wi8.double()).float() * xscale * s2t + bf).to(F16))

qa, qb = ints(3, 8, seed=890 + rank), ints(8, 6, seed=900)
sa, sb = pos(3, seed=910 + rank), pos(6, seed=920)
out = run("quant_mm_a2a", lambda d, h: ops.npu_quant_matmul_all_to_all(*on(d, qa, qb), h, world, bias=bf.to(d),
                                                                       x1_scale=sa.to(d), x2_scale=sb.to(d),
                                                                       y_dtype=BF16))
ys = [((a.double() @ qb.double()).float() * s.unsqueeze(-1) * sb + bf).to(BF16)
      for a, s in zip(everyone(qa), everyone(sa))]
close("quant_mm_a2a", out, torch.cat([y[:, rank * 3:(rank + 1) * 3] for y in ys]))

# ---------------------------------------------------------------- all-to-all-v grouped matmul
E = 2
send = [[1, 2, 0, 3], [2, 0, 1, 1]][rank]  # send[r*E+j]: rows for expert j of rank r
recv = [everyone(torch.tensor(send))[r][rank * E + j].item() for r in range(world) for j in range(E)]
gx = rnd(sum(send), 8, seed=1000 + rank, dtype=F16)
gw = rnd(E, 4, 8, seed=1010 + rank, dtype=F16)  # transposed: (e, N, H)
mx, mw = rnd(3, 8, seed=1020, dtype=F16), rnd(5, 8, seed=1030, dtype=F16)
gmm_y, mm_y, perm = run("a2av_gmm", lambda d, h: ops.npu_alltoallv_gmm(
    *on(d, gx, gw), h, world, send, recv, mm_x=mx.to(d), mm_weight=mw.to(d), trans_gmm_weight=True,
    trans_mm_weight=True, permute_out_flag=True))


def block(rows, counts, r, j):
    start = sum(counts[:r * E + j])
    return rows[start:start + counts[r * E + j]]


all_x, all_send = everyone(gx), everyone(send)
want = torch.cat([block(all_x[r], all_send[r], rank, j) for j in range(E) for r in range(world)])
close("a2av_gmm permute_out", perm, want)
sizes = [sum(all_send[r][rank * E + j] for r in range(world)) for j in range(E)]
close("a2av_gmm", gmm_y, torch.cat([p.float() @ gw[j].t().float() for j, p in enumerate(want.split(sizes))]).to(F16))
close("a2av_gmm mm_y", mm_y, (mx.float() @ mw.t().float()).to(F16))
_, none, none2 = run("a2av_gmm bare", lambda d, h: ops.npu_alltoallv_gmm(*on(d, gx, gw), h, world, send, recv,
                                                                         trans_gmm_weight=True))
assert none is None and none2 is None

# the way back: each row returns to its rank, multiplied by the weight of the expert it visited
gw2 = rnd(E, 8, 5, seed=1040 + rank, dtype=F16)
y, _ = run("gmm_a2av", lambda d, h: ops.npu_gmm_alltoallv(*on(d, perm, gw2), h, world, recv, send))
weights = everyone(gw2)
want = torch.cat([block(gx, send, r, j).float() @ weights[r][j].float() for r in range(world) for j in range(E)])
close("gmm_a2av", y, want.to(F16))

fx, fw = rnd(sum(send), 8, seed=1050 + rank, dtype=E4M3), rnd(E, 8, 4, seed=1060 + rank, dtype=E4M3)
sx, sw = torch.tensor([0.5]), torch.tensor([2.0 + rank])
gmm_y, _, perm = run("a2av_quant_gmm", lambda d, h: ops.npu_alltoallv_quant_gmm(
    *on(d, fx, fw, sx, sw), h, world, send, recv, BF16, permute_out_flag=True))
all_fx = everyone(fx)
want = torch.cat([block(all_fx[r], all_send[r], rank, j) for j in range(E) for r in range(world)])
close("a2av_quant_gmm permute_out", perm, want)
scale = 0.5 * (2.0 + rank)
close("a2av_quant_gmm", gmm_y, torch.cat([scale * (p.float() @ fw[j].float())
                                          for j, p in enumerate(want.split(sizes))]).to(BF16))
y, _ = run("quant_gmm_a2av", lambda d, h: ops.npu_quant_gmm_alltoallv(*on(d, perm, fw, sx, sw), h, world, recv, send,
                                                                      F16))
weights, wscales = everyone(fw), everyone(sw)
want = torch.cat([0.5 * wscales[r] * (block(fx, send, r, j).float() @ weights[r][j].float())
                  for r in range(world) for j in range(E)])
close("quant_gmm_a2av", y, want.to(F16))

# ---------------------------------------------------------------- MoE dispatch / combine
H = 8
ids = torch.tensor([[[0, 3], [1, 2], [3, 0]], [[2, 1], [0, 2]]][rank], dtype=I32)  # BS 3 and 2
bs = ids.shape[0]
xd = rnd(bs, H, seed=1100 + rank, dtype=F16)
ws = pos(bs, 2, seed=1110 + rank)
all_ids, all_xd, all_ws = everyone(ids), everyone(xd), everyone(ws)
GBS, NE, L = 3 * world, 4, 2  # global_bs = max BS * world; 4 experts, 2 per rank


def expected_rows(mask=None):
    """The rows this rank's experts receive: expert by expert, source rank by rank, token order."""
    rows, counts = [], []
    for l in range(L):
        e = rank * L + l
        n = 0
        for src in range(world):
            for t_, row in enumerate(all_ids[src].tolist()):
                if e in row and (mask is None or mask[src][t_]):
                    rows.append((e, src, t_))
                    n += 1
        counts.append(n)
    return rows, counts


out = run("dispatch", lambda d, h: ops.npu_moe_distribute_dispatch(
    *on(d, xd, ids), h, world, rank, NE, expert_scales=ws.to(d), global_bs=GBS))
expand_x, dyn, expand_idx, token_nums, recv_counts, tp_recv, expand_scales = out
rows, counts = expected_rows()
A = GBS * 2
assert expand_x.shape == (A, H) and dyn.shape == (A,) and expand_idx.shape == (bs * 2,)
close("dispatch expand_x", expand_x[:len(rows)], torch.stack([all_xd[s][t_] for _, s, t_ in rows]))
assert not expand_x[len(rows):].any()
close("dispatch token nums", token_nums, torch.tensor(counts))
close("dispatch expand_scales", expand_scales[:len(rows)],
      torch.stack([all_ws[s][t_][all_ids[s][t_].tolist().index(e)] for e, s, t_ in rows]))
per_block = [sum(1 for e, s, _ in rows if e == rank * L + l and s == src) for l in range(L) for src in range(world)]
close("dispatch ep_recv_counts", recv_counts[:L * world], torch.tensor(per_block).cumsum(0).to(I32))
assert recv_counts.shape == (L * world + GBS * 2 * 2 * (world // 8),) and tp_recv.shape == (0,)
flat = ids.reshape(-1).tolist()
close("dispatch expand_idx", expand_idx, torch.tensor([flat[:i].count(e) for i, e in enumerate(flat)], dtype=I32))

# each expert multiplies its rows by (expert id + 1); the combine weighs and sums them per token
expert_of_row = torch.tensor([e for e, _, _ in rows] + [0] * (A - len(rows)), dtype=F32)
y_rows = (expand_x.float() * (expert_of_row + 1).unsqueeze(-1)).to(F16)
combined = run("combine", lambda d, h: ops.npu_moe_distribute_combine(
    *on(d, y_rows, ids, expand_idx, recv_counts, ws), h, world, rank, NE, global_bs=GBS))
want = (ws * (ids.float() + 1)).sum(-1, keepdim=True) * xd.float()
close("combine", combined, want.to(F16))

# dynamic quantisation with per-expert smooth scales, a token masked out, counts as prefix sums
smooth = pos(NE, H, seed=1120)
mask = torch.tensor([[True, True, False], [True, True]][rank])
masks = everyone(mask)
out = run("dispatch quant", lambda d, h: ops.npu_moe_distribute_dispatch(
    *on(d, xd, ids), h, world, rank, NE, scales=smooth.to(d), x_active_mask=mask.to(d), quant_mode=2, global_bs=GBS,
    expert_token_nums_type=0))
expand_x, dyn, expand_idx, token_nums, recv_counts = out[:5]
rows, counts = expected_rows([m.tolist() for m in masks])
x32 = torch.stack([all_xd[s][t_].float() * smooth[e] for e, s, t_ in rows])
value = 127.0 / x32.abs().amax(-1, keepdim=True)
close("dispatch quant expand_x", expand_x[:len(rows)], torch.round(x32 * value).clamp(-128, 127).to(I8))
close("dispatch quant scales", dyn[:len(rows)], (1.0 / value).squeeze(-1))
close("dispatch quant token nums", token_nums, torch.tensor(counts).cumsum(0))
deq = (expand_x.float() * dyn.unsqueeze(-1)).to(F16)
combined = run("combine masked", lambda d, h: ops.npu_moe_distribute_combine(
    *on(d, deq, ids, expand_idx, recv_counts, ws), h, world, rank, NE, x_active_mask=mask.to(d), global_bs=GBS))
want = torch.zeros(bs, H)
for t_ in range(bs):
    if mask[t_]:
        for k_ in range(2):
            e = ids[t_, k_].item()
            want[t_] += ws[t_, k_] * smooth[e] * xd[t_].float()
assert_close(combined.float(), want, atol=0.05, rtol=0.05)  # int8 rows: within the quantisation step

# v2: rank 0 holds the shared expert, rank 1 the 2 routed experts; special experts 2 (zero),
# 3 (copy), 4 (const); the shared expert doubles its rows, routed expert e multiplies by e + 1.
ids2 = torch.tensor([[[0, 3], [4, 1]], [[1, 2], [0, 1]]][rank], dtype=I32)
xb = rnd(2, H, seed=1200 + rank, dtype=BF16)
wb = pos(2, 2, seed=1210 + rank)
alpha1, alpha2, cv = rnd(1, H, seed=1220, dtype=BF16), rnd(1, H, seed=1230, dtype=BF16), rnd(1, H, seed=1240,
                                                                                              dtype=BF16)
special = dict(zero_expert_num=1, copy_expert_num=1, const_expert_num=1)
out = run("dispatch_v2", lambda d, h: ops.npu_moe_distribute_dispatch_v2(
    *on(d, xb, ids2), h, world, rank, 2, shared_expert_rank_num=1, comm_alg="fullmesh_v1", **special))
expand_x, _, assist, token_nums, recv_counts = out[:5]
all_xb, all_ids2 = everyone(xb), everyone(ids2)
if rank == 0:  # shared: every token of every rank
    want_rows = torch.cat(all_xb)
    assert expand_x.shape == (2 * 2, H) and token_nums.tolist() == [4]
    factor = torch.full((4,), 2.0)
else:
    want_list = [(e, all_xb[s][t_]) for e in range(2) for s in range(world)
                 for t_, row in enumerate(all_ids2[s].tolist()) if e in row]
    want_rows = torch.stack([r for _, r in want_list])
    factor = torch.tensor([e + 1.0 for e, _ in want_list])
    assert token_nums.tolist() == [sum(1 for e, _ in want_list if e == l) for l in range(2)]
n = want_rows.shape[0]
close("dispatch_v2 expand_x", expand_x[:n], want_rows)
assert assist.shape == (max(2 * 2, expand_x.shape[0] * 128),)
y_rows = torch.zeros_like(expand_x, dtype=F32)
y_rows[:n] = expand_x[:n].float() * factor.unsqueeze(-1)
y_rows = y_rows.to(BF16)
shared_x = rnd(2, H, seed=1250 + rank, dtype=BF16)
comb_kw = dict(shared_expert_rank_num=1, ori_x=xb, const_expert_alpha_1=alpha1, const_expert_alpha_2=alpha2,
               const_expert_v=cv, shared_expert_x=shared_x, **special)
combined = run("combine_v2", lambda d, h: ops.npu_moe_distribute_combine_v2(
    *on(d, y_rows, ids2, assist, recv_counts, wb), h, world, rank, 2,
    **{k_: (v.to(d) if isinstance(v, torch.Tensor) else v) for k_, v in comb_kw.items()}))
want = torch.zeros(2, H)
for t_ in range(2):
    xf = xb[t_].float()
    want[t_] += 2 * xf + shared_x[t_].float()  # shared expert (weight 1) and shared_expert_x
    for k_ in range(2):
        e, w = ids2[t_, k_].item(), wb[t_, k_]
        if e < 2:
            want[t_] += w * (e + 1) * xf
        elif e == 3:
            want[t_] += w * xf
        elif e == 4:
            want[t_] += w * (alpha1[0].float() * xf + alpha2[0].float() * cv[0].float())
close("combine_v2", combined, want.to(BF16))
residual, gamma = rnd(2, 1, H, seed=1260 + rank, dtype=BF16), rnd(H, seed=1270, dtype=BF16)
y, rstd, x_sum = run("combine_add_rms_norm", lambda d, h: ops.npu_moe_distribute_combine_add_rms_norm(
    *on(d, y_rows, ids2, assist, recv_counts, wb, residual, gamma), h, world, rank, 2, norm_eps=1e-6,
    **{k_: (v.to(d) if isinstance(v, torch.Tensor) else v) for k_, v in comb_kw.items()}))
xs32 = combined.float().unsqueeze(1) + residual.float()
r = torch.rsqrt(xs32.pow(2).mean(-1, keepdim=True) + 1e-6)
close("add_rms_norm x", x_sum, xs32.to(BF16))
close("add_rms_norm rstd", rstd, r)
close("add_rms_norm y", y, (xs32 * r * gamma.float()).to(BF16))

# ---------------------------------------------------------------- barrier
xb_ = rnd(3, seed=1300)
close("barrier", run("barrier", lambda d, h: torch_npu._npu_distribute_barrier(xb_.to(d), h, world)), xb_)

# ---------------------------------------------------------------- group names and errors
sub = dist.new_group([0, 1])  # vllm-ascend's naming: the rank in the group
name = sub._get_backend(torch.device("npu")).get_hccl_comm_name(sub.rank())
out, _ = ops.npu_all_gather_base_mm(x1.npu(), x2.npu(), name, world)
close("subgroup name", out, (want_gather.float() @ x2.float()).to(F16))


def raises(pattern, f):
    import re
    try:
        f()
    except RuntimeError as e:
        assert re.search(pattern, str(e)), (pattern, str(e))
    else:
        raise AssertionError(f"no error: {pattern}")


raises(r"hcom 'hccl_comm_9_0' is not the hccl comm name of a process group of this process; known names: .*"
       + HCOM, lambda: ops.npu_mm_reduce_scatter_base(xr.npu(), wr.npu(), "hccl_comm_9_0", world))
raises(r"group_ep 'nope' is not the hccl comm name", lambda: ops.npu_moe_distribute_dispatch(
    xd.npu(), ids.npu(), "nope", world, rank, NE))
raises(r"world_size 4 should equal the size 2", lambda: ops.npu_all_gather_base_mm(x1.npu(), x2.npu(), HCOM, 4))
raises(r"the m dimension of x1 \(3\) should be divisible by world_size 2",
       lambda: ops.npu_mm_reduce_scatter_base(xr[:3].npu(), wr.npu(), HCOM, world))
raises(r"ep_rank_id 1 should be this process's rank 0|ep_rank_id 0 should be this process's rank 1",
       lambda: ops.npu_moe_distribute_dispatch(xd.npu(), ids.npu(), HCOM, world, 1 - rank, NE))
raises(r"has no backend for cpu tensors", lambda: ops.npu_all_gather_base_mm(x1, x2, HCOM, world))
raises(r"rank \d of the EP group receives \d+ rows but its expand_x holds A = \d+",  # every rank raises
       lambda: ops.npu_moe_distribute_dispatch(xd.npu(), torch.tensor([[0, 1]] * bs, dtype=I32).npu(), HCOM, world,
                                               rank, NE, global_bs=2))

# ---------------------------------------------------------------- FakeTensor and torch.compile
with FakeTensorMode():
    fa, fb = torch.empty(4, 16, dtype=F16, device=NPU), torch.empty(16, 8, dtype=F16, device=NPU)
    o, g = ops.npu_all_gather_base_mm(fa, fb, HCOM, world)
    assert o.shape == (8, 8) and g.shape == (8, 16) and o.dtype == F16
    assert ops.npu_mm_reduce_scatter_base(fa, fb, HCOM, world).shape == (2, 8)
    assert ops.npu_matmul_all_to_all(fa, fb, HCOM, world).shape == (8, 4)
    o, p = ops.npu_all_to_all_matmul(fa, torch.empty(32, 8, dtype=F16, device=NPU), HCOM, world)
    assert o.shape == (2, 8) and p.shape == (2, 32)
compiled = torch.compile(lambda a, b: torch_npu.npu_all_gather_base_mm(a, b, HCOM, world)[0] * 2, backend="eager")
close("compiled", compiled(x1.npu(), x2.npu()), (want_gather.float() @ x2.float()).to(F16) * 2)

torch.npu.synchronize()
dist.barrier(group=gloo)
print(f"RANK {rank} OK", flush=True)
dist.destroy_process_group()
'''


def test_every_op_on_two_ranks(tmp_path):
    script = tmp_path / "mc2_job.py"
    script.write_text(JOB)
    torchrun(str(script), 2, timeout=180)  # an absolute path: torchrun_jobs joins it to its folder unchanged
