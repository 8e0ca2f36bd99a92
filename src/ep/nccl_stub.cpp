// Builds without NCCL (no CUDA, or nccl.h / libnccl not found; FUSEDMOE_NCCL=OFF): the EP layer
// works with the thread transport (CPU backend) and every NCCL entry point says why it cannot.
#include "fusedmoe/ep.hpp"
#include "fusedmoe/error.hpp"

namespace fusedmoe {
namespace {
[[noreturn]] void no_nccl(const char* what) {
  throw NotImplemented(std::string("fusedmoe EP: ") + what +
                       " needs the NCCL transport, which this build does not have (configure with CUDA and NCCL: "
                       "nccl.h + libnccl in the CUDA toolkit, NCCL_ROOT or the pip package nvidia-nccl-cu13; "
                       "-DFUSEDMOE_NCCL=ON makes a missing NCCL an error)");
}
}  // namespace

bool nccl_available() { return false; }
EpUniqueId nccl_unique_id() { no_nccl("nccl_unique_id"); }
std::shared_ptr<Transport> make_nccl_transport(const EpUniqueId&, int, int, int) { no_nccl("make_nccl_transport"); }
std::shared_ptr<Transport> make_nccl_transport(void*, int) { no_nccl("make_nccl_transport"); }
void run_on_gpus(int, const std::function<void(int, std::shared_ptr<Transport>)>&) { no_nccl("run_on_gpus"); }

}  // namespace fusedmoe
