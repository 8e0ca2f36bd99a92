#!/usr/bin/env bash
# End of the eighth session of 2026-11-28 (run 2026-11-29 UTC): the whole GPU suite, memcheck of the decode-size 4-bit
# tests and the 3-stage test, the fallback paths of the session's two switches, and the 4-bit decode grid (1 / 8 / 64
# tokens) against ../2026-11-28-h200-session-end-8. `bash bench/results/2026-11-29-h200-session-end-9/run.sh` from the
# repository root on the device.
SE_STEPS='suite memcheck switches grid' SE_M=1,8,64 \
SE_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/*:W4MmaStages*' \
SE_SWITCHES='FUSEDMOE_W4_FEW_NOPDL=0@Formats/W4Gpu.DecodeSizes*:W4MmaAct*:*DecodeLayer* FUSEDMOE_W4_FEW_STAGES=0@Formats/W4Gpu.DecodeSizes*:W4MmaAct*:*LayerGpu*w4*' \
SE_OLD=bench/results/2026-11-28-h200-session-end-8/grid/fusedmoe-bench.json.gz bash bench/session_end.sh session-end-9
