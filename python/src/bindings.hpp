#pragma once
// Pieces of the fusedmoe._core module (one file each).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <string>

#include "fusedmoe/fusedmoe.hpp"

namespace fmpy {

namespace nb = nanobind;

void bind_layer(nb::module_& m);  // bind_layer.cpp: Layer, config, workspace
void bind_ops(nb::module_& m);    // bind_ops.cpp: routing, quantisers, swizzle, codecs, layer files

// LayerConfig <-> {"format": "bf16", "activation": "silu", ...} (the layer file's spellings).
fusedmoe::LayerConfig config_from_dict(nb::handle d);
nb::dict config_to_dict(const fusedmoe::LayerConfig& c);
// The layer file contract's dtype of weight tensor `name` (docs/LAYER_FILE.md).
fusedmoe::DType contract_dtype(const fusedmoe::LayerConfig& c, const std::string& name);

}  // namespace fmpy
