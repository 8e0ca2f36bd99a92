#!/usr/bin/env bash
# End of the seventh session of 2026-11-28: the whole GPU suite, memcheck of the decode-size 4-bit tests and this
# session's new paths, the fallback paths of its three switches, and the 4-bit decode grid (1 / 8 / 64 tokens) against
# ../2026-11-28-h200-session-end-7. `bash bench/results/2026-11-28-h200-session-end-8/run.sh` from the repository root.
SE_STEPS='suite memcheck switches grid' SE_M=1,8,64 \
SE_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/*:*ActivationRowLanes*:*PlanGather*:*GatherRowPaths*' \
SE_SWITCHES='FUSEDMOE_ROW_GATHER_WIDE=0@*GatherRowPaths*:*PlanGather*:Formats/W4Gpu.DecodeSizes* FUSEDMOE_NVFP4_GATHER_LANES=0@*PlanGather*:*GatherNvfp4Paths*:Formats/W4Gpu.DecodeSizes* FUSEDMOE_ROW_LANES=0@*ActivationRow*:Formats/W4Gpu.DecodeSizes*' \
SE_OLD=bench/results/2026-11-28-h200-session-end-7/grid/fusedmoe-bench.json.gz bash bench/session_end.sh session-end-8
