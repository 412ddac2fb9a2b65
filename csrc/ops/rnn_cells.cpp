// Fused LSTM/GRU cells. ATen's RNN code sends every non-CPU device
// (PrivateUse1 included) to _thnn_fused_{lstm,gru}_cell, which only CUDA
// implements. Here they are composed from npu ops (each queued
// asynchronously). The workspace layouts are this file's own contract
// between forward and backward:
//   LSTM: [i, f, g, o]        activated gates, (B, 4H)
//   GRU:  [r, z, n, hx, hn]   gates, previous state, hidden n-gate, (B, 5H)
#include "csrc/launch/launch.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/add.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

namespace torch_npu {
namespace {

at::Tensor add_optional(at::Tensor x, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? x + *bias : x;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  common_device("_thnn_fused_lstm_cell", input_gates, hidden_gates, cx, input_bias, hidden_bias);
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), "_thnn_fused_lstm_cell: input_gates ",
              input_gates.sizes(), " and hidden_gates ", hidden_gates.sizes(), " must have the same size");
  const at::Tensor gates = add_optional(add_optional(input_gates + hidden_gates, input_bias), hidden_bias);
  auto chunks = gates.chunk(4, 1);
  const at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> npu_fused_lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  common_device("_thnn_fused_lstm_cell_backward_impl", grad_hy, grad_cy, cx, cy, workspace);
  const bool has_hy = grad_hy.has_value() && grad_hy->defined();
  const bool has_cy = grad_cy.has_value() && grad_cy->defined();
  if (!has_hy && !has_cy) return {at::Tensor(), at::Tensor(), at::Tensor()};
  auto w = workspace.chunk(4, 1);
  const at::Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
  const at::Tensor tanh_cy = cy.tanh();
  at::Tensor gcy = has_cy ? *grad_cy : at::zeros_like(cy);
  at::Tensor go = at::zeros_like(o);
  if (has_hy) {
    gcy = gcy + *grad_hy * o * (1 - tanh_cy * tanh_cy);
    go = *grad_hy * tanh_cy * o * (1 - o);
  }
  const at::Tensor gi = gcy * g * i * (1 - i);
  const at::Tensor gf = gcy * cx * f * (1 - f);
  const at::Tensor gg = gcy * i * (1 - g * g);
  at::Tensor grad_gates = at::cat({gi, gf, gg, go}, 1);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, gcy * f, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> npu_fused_gru_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& hx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  common_device("_thnn_fused_gru_cell", input_gates, hidden_gates, hx, input_bias, hidden_bias);
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), "_thnn_fused_gru_cell: input_gates ",
              input_gates.sizes(), " and hidden_gates ", hidden_gates.sizes(), " must have the same size");
  auto ig = add_optional(input_gates, input_bias).chunk(3, 1);
  auto hg = add_optional(hidden_gates, hidden_bias).chunk(3, 1);
  const at::Tensor r = (ig[0] + hg[0]).sigmoid();
  const at::Tensor z = (ig[1] + hg[1]).sigmoid();
  const at::Tensor hn = hg[2];
  const at::Tensor n = (ig[2] + r * hn).tanh();
  at::Tensor hy = (1 - z) * n + z * hx;
  return {hy, at::cat({r, z, n, hx, hn}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> npu_fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  common_device("_thnn_fused_gru_cell_backward", grad_hy, workspace);
  auto w = workspace.chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  const at::Tensor dn = grad_hy * (1 - z) * (1 - n * n);
  const at::Tensor dz = grad_hy * (hx - n) * z * (1 - z);
  const at::Tensor dr = dn * hn * r * (1 - r);
  at::Tensor grad_input_gates = at::cat({dr, dz, dn}, 1);
  at::Tensor grad_hidden_gates = at::cat({dr, dz, dn * r}, 1);
  at::Tensor grad_hx = grad_hy * z;
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(npu_fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(npu_fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(npu_fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(npu_fused_gru_cell_backward));
}

}  // namespace torch_npu
