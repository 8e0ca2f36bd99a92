// Builds without CUDA: no device engine (a CUDA transport cannot exist there anyway).
#include "ep/ep_internal.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::ep {
std::unique_ptr<Engine> make_device_engine(int) {
  throw NotImplemented("fusedmoe EP: a CUDA transport needs the CUDA backend, which this build does not have");
}
}  // namespace fusedmoe::ep
