#pragma once
// fusedmoe: the expert part of a Mixture-of-Experts layer, every weight format, CPU and Hopper.
#include "fusedmoe/codecs.hpp"
#include "fusedmoe/config.hpp"
#include "fusedmoe/ep.hpp"
#include "fusedmoe/error.hpp"
#include "fusedmoe/layer.hpp"
#include "fusedmoe/layer_file.hpp"
#include "fusedmoe/quantize.hpp"
#include "fusedmoe/routing.hpp"
#include "fusedmoe/tensor.hpp"
