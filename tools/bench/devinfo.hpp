#pragma once
// What the results were measured on: device properties from the CUDA runtime, and driver
// version and current clocks from NVML when libnvidia-ml can be loaded (dlopen; optional).
#include <string>
#include <vector>

namespace fmbench {

struct ClockSample {
  std::string when;  // "start", "after ceilings", "end"
  int sm_mhz = -1, mem_mhz = -1, temperature_c = -1;
  double power_w = -1;
};

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  long long l2_bytes = 0;
  long long mem_bytes = 0;
  int peak_sm_clock_mhz = 0;   // cudaDevAttrClockRate
  int peak_mem_clock_mhz = 0;  // cudaDevAttrMemoryClockRate
  int mem_bus_width_bits = 0;
  double datasheet_bw_tbps = 0;  // 2 * memory clock * bus width (DDR)
  int cuda_driver_version = 0;   // cudaDriverGetVersion, e.g. 13000
  int cuda_runtime_version = 0;
  std::string driver_version;  // NVML, e.g. "580.159.04"; empty without NVML
  int max_sm_clock_mhz = -1, max_mem_clock_mhz = -1;  // NVML
  double power_limit_w = -1;                          // NVML
  bool nvml = false;
  std::vector<ClockSample> clocks;
};

DeviceInfo query_device(int device);
// Appends the current clocks (NVML) to info.clocks; a no-op without NVML.
void sample_clocks(DeviceInfo& info, const std::string& when);

}  // namespace fmbench
