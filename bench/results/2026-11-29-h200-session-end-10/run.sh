#!/usr/bin/env bash
# End of the first session of 2026-11-29: the whole GPU suite, a memcheck of the new and changed quantiser tests and
# the decode-size 4-bit tests, the block-per-row nvfp4 quantiser kept alive by FUSEDMOE_NVFP4_FLAT=0, and the full
# 4-bit grid (1 .. 4096 tokens; the quantiser changes reach 4096). `bash bench/results/2026-11-29-h200-session-end-10/run.sh`
# from the repository root on the device (the pack carried).
set -u
SE_MEMCHECK='QuantiseNvfp4Gpu*:Cases/GatherNvfp4Paths*:Cases/ActivationNvfp4Paths*:Cases/GatherRowPaths*:Cases/ActivationRowLanes*:Formats/W4Gpu.DecodeSizesMatchOracle/*' \
SE_SWITCHES='FUSEDMOE_NVFP4_FLAT=0@W4WgmmaActGpu.*:QuantiseNvfp4Gpu*:Formats/LargeGpu*' \
SE_OLD=bench/results/2026-11-29-h200-session-end-9/grid/fusedmoe-bench.json.gz bash bench/session_end.sh session-end-10
