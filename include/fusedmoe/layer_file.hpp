#pragma once
// safetensors files and the layer / input / output file contract (docs/LAYER_FILE.md).
// Readers reject truncated, inconsistent or unknown input with an Error naming the tensor or
// key; they never read out of bounds. Writers write to a temporary file and rename, so a
// failure leaves nothing half-written.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fusedmoe/config.hpp"
#include "fusedmoe/layer.hpp"
#include "fusedmoe/tensor.hpp"

namespace fusedmoe {

// An owning host tensor (contiguous). A default-constructed one (no shape, no bytes) is
// "absent": numel() 0 and an absent view(). A 0-d tensor (a safetensors scalar) has no shape and
// one element; view() throws for it and for more than kMaxDims dimensions.
struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape);  // zero-filled
  int64_t numel() const;
  TensorView view() const;  // CPU view (const_cast: the view type is shared with outputs)
  template <typename T>
  T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
};

struct Safetensors {
  std::map<std::string, std::string> metadata;
  std::map<std::string, HostTensor> tensors;
};

// Parse a whole file image. `what` names the source in errors. The tensors must tile the data
// buffer exactly (no overlap, no gap, no trailing bytes); JSON keys must be unique; dtypes are
// those of DType. Writers pad the header with spaces to a multiple of 8 bytes.
Safetensors parse_safetensors(const uint8_t* data, size_t size, const std::string& what);
Safetensors read_safetensors(const std::string& path);
std::vector<uint8_t> serialize_safetensors(const Safetensors& st);
void write_safetensors(const std::string& path, const Safetensors& st);

struct LayerFile {
  LayerConfig config;
  int64_t num_experts = 0, hidden = 0, inter = 0;
  std::map<std::string, HostTensor> tensors;  // only the contract's names
  LayerWeights weights() const;               // CPU views into `tensors`
};
// Checks every key, tensor name, dtype and shape against the contract. Keys that apply only to
// some layers (interleaved, swiglu_alpha/limit: swigluoai; act_dtype: mxfp4/nvfp4) are refused
// on other layers even with their default value. Writers refuse configs the file cannot
// express (swizzled scales, uint4b8, fp8_block_ue8m0) and E/K/N that disagree with the tensors.
LayerFile layer_from_safetensors(const Safetensors& st, const std::string& what);
Safetensors layer_to_safetensors(const LayerFile& layer);
LayerFile read_layer_file(const std::string& path);
void write_layer_file(const std::string& path, const LayerFile& layer);

struct InputFile {
  HostTensor hidden_states, topk_ids, topk_weights, expert_map;  // expert_map may be empty
  bool has_expert_map = false;
  bool apply_router_weight_on_input = false;
};
InputFile input_from_safetensors(const Safetensors& st, const std::string& what);
Safetensors input_to_safetensors(const InputFile& in);
InputFile read_input_file(const std::string& path);
void write_input_file(const std::string& path, const InputFile& in);
void write_output_file(const std::string& path, const HostTensor& output);

}  // namespace fusedmoe
