#include "devinfo.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstring>

#include "common.hpp"

namespace fmbench {
namespace {

// The few NVML entry points used, declared by their documented C signatures; loaded at run time
// so the benchmark neither needs nvml.h nor fails where libnvidia-ml is absent.
using nvmlDevice = void*;
using nvmlRet = int;  // 0 = NVML_SUCCESS
constexpr unsigned kClockSM = 1, kClockMem = 2, kTempGpu = 0;

struct Nvml {
  bool ok = false;
  nvmlRet (*init)() = nullptr;
  nvmlRet (*by_pci)(const char*, nvmlDevice*) = nullptr;
  nvmlRet (*clock)(nvmlDevice, unsigned, unsigned*) = nullptr;
  nvmlRet (*max_clock)(nvmlDevice, unsigned, unsigned*) = nullptr;
  nvmlRet (*driver)(char*, unsigned) = nullptr;
  nvmlRet (*power_limit)(nvmlDevice, unsigned*) = nullptr;
  nvmlRet (*power)(nvmlDevice, unsigned*) = nullptr;
  nvmlRet (*temp)(nvmlDevice, unsigned, unsigned*) = nullptr;
};

Nvml& nvml() {
  static Nvml n = [] {
    Nvml x;
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) return x;
    auto sym = [&](const char* a, const char* b) -> void* {
      void* p = dlsym(h, a);
      return p ? p : (b ? dlsym(h, b) : nullptr);
    };
    x.init = reinterpret_cast<nvmlRet (*)()>(sym("nvmlInit_v2", "nvmlInit"));
    x.by_pci = reinterpret_cast<nvmlRet (*)(const char*, nvmlDevice*)>(
        sym("nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"));
    x.clock = reinterpret_cast<nvmlRet (*)(nvmlDevice, unsigned, unsigned*)>(sym("nvmlDeviceGetClockInfo", nullptr));
    x.max_clock = reinterpret_cast<nvmlRet (*)(nvmlDevice, unsigned, unsigned*)>(sym("nvmlDeviceGetMaxClockInfo", nullptr));
    x.driver = reinterpret_cast<nvmlRet (*)(char*, unsigned)>(sym("nvmlSystemGetDriverVersion", nullptr));
    x.power_limit = reinterpret_cast<nvmlRet (*)(nvmlDevice, unsigned*)>(sym("nvmlDeviceGetPowerManagementLimit", nullptr));
    x.power = reinterpret_cast<nvmlRet (*)(nvmlDevice, unsigned*)>(sym("nvmlDeviceGetPowerUsage", nullptr));
    x.temp = reinterpret_cast<nvmlRet (*)(nvmlDevice, unsigned, unsigned*)>(sym("nvmlDeviceGetTemperature", nullptr));
    x.ok = x.init && x.by_pci && x.init() == 0;
    return x;
  }();
  return n;
}

bool nvml_handle(const DeviceInfo& info, nvmlDevice* dev) {
  Nvml& n = nvml();
  return n.ok && !info.pci_bus_id.empty() && n.by_pci(info.pci_bus_id.c_str(), dev) == 0;
}

}  // namespace

DeviceInfo query_device(int device) {
  DeviceInfo d;
  d.index = device;
  cudaDeviceProp p{};
  FMB_CUDA(cudaGetDeviceProperties(&p, device));
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.l2_bytes = p.l2CacheSize;
  d.mem_bytes = static_cast<long long>(p.totalGlobalMem);
  int v = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, device) == cudaSuccess) d.peak_sm_clock_mhz = v / 1000;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, device) == cudaSuccess) d.peak_mem_clock_mhz = v / 1000;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrGlobalMemoryBusWidth, device) == cudaSuccess) d.mem_bus_width_bits = v;
  cudaGetLastError();
  d.datasheet_bw_tbps = 2.0 * d.peak_mem_clock_mhz * 1e6 * (d.mem_bus_width_bits / 8.0) / 1e12;
  cudaDriverGetVersion(&d.cuda_driver_version);
  cudaRuntimeGetVersion(&d.cuda_runtime_version);
  char bus[64] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) == cudaSuccess) d.pci_bus_id = bus;
  cudaGetLastError();

  nvmlDevice h = nullptr;
  if (nvml_handle(d, &h)) {
    Nvml& n = nvml();
    d.nvml = true;
    char drv[96] = {0};
    if (n.driver && n.driver(drv, sizeof(drv)) == 0) d.driver_version = drv;
    unsigned x = 0;
    if (n.max_clock && n.max_clock(h, kClockSM, &x) == 0) d.max_sm_clock_mhz = static_cast<int>(x);
    if (n.max_clock && n.max_clock(h, kClockMem, &x) == 0) d.max_mem_clock_mhz = static_cast<int>(x);
    if (n.power_limit && n.power_limit(h, &x) == 0) d.power_limit_w = x / 1000.0;
  }
  return d;
}

void sample_clocks(DeviceInfo& info, const std::string& when) {
  nvmlDevice h = nullptr;
  if (!nvml_handle(info, &h)) return;
  Nvml& n = nvml();
  ClockSample s;
  s.when = when;
  unsigned x = 0;
  if (n.clock && n.clock(h, kClockSM, &x) == 0) s.sm_mhz = static_cast<int>(x);
  if (n.clock && n.clock(h, kClockMem, &x) == 0) s.mem_mhz = static_cast<int>(x);
  if (n.temp && n.temp(h, kTempGpu, &x) == 0) s.temperature_c = static_cast<int>(x);
  if (n.power && n.power(h, &x) == 0) s.power_w = x / 1000.0;
  info.clocks.push_back(s);
}

}  // namespace fmbench
