// Linked only when the library is built without CUDA: the CUDA backend is then unavailable.
#include "core/backend.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe::detail {

bool cuda_backend_available() { return false; }

std::unique_ptr<BackendImpl> make_cuda_backend(const LayerConfig&, const LayerWeights&, const LayerShape&,
                                               const LayerOptions&) {
  throw NotImplemented("fusedmoe was built without CUDA (configure with -DFUSEDMOE_CUDA=ON)");
}

}  // namespace fusedmoe::detail

#include "fusedmoe/routing.hpp"
namespace fusedmoe {
void route_cuda(const RoutingConfig&, const float*, int64_t, int32_t*, float*, void*) {
  throw NotImplemented("fusedmoe was built without CUDA: route_cuda is unavailable");
}
}  // namespace fusedmoe
