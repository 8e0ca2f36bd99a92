#pragma once
// The library's diagnostic switches for same-binary A/B runs (bench/README.md lists them): a
// switch is off when its environment variable is exactly "0". Callers read it once (a static).
#include <cstdlib>
#include <cstring>

namespace fusedmoe::cuda {

inline bool env_switch_is_zero(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && std::strcmp(e, "0") == 0;
}

}  // namespace fusedmoe::cuda
