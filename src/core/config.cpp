#include "fusedmoe/config.hpp"

#include <cstring>

namespace fusedmoe {

bool is_gated(Activation act) { return act != Activation::RELU2; }

namespace {
template <typename E, size_t N>
bool from_name(const std::string& s, const E (&all)[N], const char* (*name)(E), E* out) {
  for (E e : all) {
    if (s == name(e)) {
      *out = e;
      return true;
    }
  }
  return false;
}
}  // namespace

const char* format_name(Format f) {
  switch (f) {
    case Format::BF16: return "bf16";
    case Format::FP16: return "fp16";
    case Format::FP32: return "fp32";
    case Format::FP8_TENSOR: return "fp8-tensor";
    case Format::FP8_CHANNEL: return "fp8-channel";
    case Format::FP8_BLOCK: return "fp8-block";
    case Format::W4A8_INT4: return "w4a8-int4";
    case Format::MXFP4: return "mxfp4";
    case Format::NVFP4: return "nvfp4";
  }
  return "?";
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::SILU: return "silu";
    case Activation::GELU: return "gelu";
    case Activation::GELU_TANH: return "gelu_tanh";
    case Activation::RELU2: return "relu2";
    case Activation::SWIGLUOAI: return "swigluoai";
  }
  return "?";
}

const char* gate_up_order_name(GateUpOrder o) {
  return o == GateUpOrder::GATE_UP ? "gate_up" : "up_gate";
}

const char* act_dtype_name(ActDtype a) {
  switch (a) {
    case ActDtype::BF16: return "bf16";
    case ActDtype::FP8: return "fp8";
    case ActDtype::NVFP4: return "nvfp4";
  }
  return "?";
}

bool format_from_name(const std::string& s, Format* out) {
  static const Format all[] = {Format::BF16,        Format::FP16,      Format::FP32,
                               Format::FP8_TENSOR,  Format::FP8_CHANNEL, Format::FP8_BLOCK,
                               Format::W4A8_INT4,   Format::MXFP4,     Format::NVFP4};
  return from_name(s, all, format_name, out);
}

bool activation_from_name(const std::string& s, Activation* out) {
  static const Activation all[] = {Activation::SILU, Activation::GELU, Activation::GELU_TANH,
                                   Activation::RELU2, Activation::SWIGLUOAI};
  return from_name(s, all, activation_name, out);
}

bool gate_up_order_from_name(const std::string& s, GateUpOrder* out) {
  static const GateUpOrder all[] = {GateUpOrder::GATE_UP, GateUpOrder::UP_GATE};
  return from_name(s, all, gate_up_order_name, out);
}

bool act_dtype_from_name(const std::string& s, ActDtype* out) {
  static const ActDtype all[] = {ActDtype::BF16, ActDtype::FP8, ActDtype::NVFP4};
  return from_name(s, all, act_dtype_name, out);
}

}  // namespace fusedmoe
