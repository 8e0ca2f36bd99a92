#pragma once
// Activation functions of the CPU backend, in the accumulator type T (float or double).
// Gated: a[n] = act(gate[n]) * up[n]; relu2: a[n] = relu(h[n])^2.
// swigluoai (gpt-oss): g = min(g, L), u = clamp(u, -L, L), a = (u + 1) * g * sigmoid(alpha * g).
#include <cmath>
#include <cstdint>

#include "fusedmoe/config.hpp"

namespace fusedmoe::cpu {

template <typename T>
T silu(T x) { return x / (T(1) + std::exp(-x)); }

template <typename T>
T gelu_erf(T x) { return T(0.5) * x * (T(1) + std::erf(x / std::sqrt(T(2)))); }

template <typename T>
T gelu_tanh(T x) {
  const T k = std::sqrt(T(2) / T(3.14159265358979323846));
  return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
}

// Index of gate / up element n inside a w13 output row of length 2N.
// Halves: gate_up = [gate | up], up_gate = [up | gate].
// Interleaved: gate_up = [g0,u0,g1,u1,..], up_gate = [u0,g0,u1,g1,..].
inline void gate_up_index(const LayerConfig& c, int64_t n, int64_t N, int64_t* gi, int64_t* ui) {
  const bool gate_first = c.gate_up_order == GateUpOrder::GATE_UP;
  if (c.interleaved) {
    *gi = 2 * n + (gate_first ? 0 : 1);
    *ui = 2 * n + (gate_first ? 1 : 0);
  } else {
    *gi = gate_first ? n : N + n;
    *ui = gate_first ? N + n : n;
  }
}

// h: one GEMM1 output row (2N gated, N for relu2, bias included); a: N outputs.
template <typename T>
void apply_activation(const LayerConfig& c, const T* h, int64_t N, T* a) {
  if (c.activation == Activation::RELU2) {
    for (int64_t n = 0; n < N; ++n) {
      const T r = h[n] > T(0) ? h[n] : T(0);
      a[n] = r * r;
    }
    return;
  }
  for (int64_t n = 0; n < N; ++n) {
    int64_t gi, ui;
    gate_up_index(c, n, N, &gi, &ui);
    T g = h[gi], u = h[ui];
    switch (c.activation) {
      case Activation::SILU: a[n] = silu(g) * u; break;
      case Activation::GELU: a[n] = gelu_erf(g) * u; break;
      case Activation::GELU_TANH: a[n] = gelu_tanh(g) * u; break;
      case Activation::SWIGLUOAI: {
        const T L = T(c.swiglu_limit), alpha = T(c.swiglu_alpha);
        g = g < L ? g : L;
        u = u < -L ? -L : (u > L ? L : u);
        a[n] = (u + T(1)) * g / (T(1) + std::exp(-alpha * g));
        break;
      }
      case Activation::RELU2: break;
    }
  }
}

}  // namespace fusedmoe::cpu
