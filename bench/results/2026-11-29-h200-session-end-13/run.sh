#!/usr/bin/env bash
# End of the third session of 2026-11-29: the whole GPU suite, a memcheck of the decode-size 4-bit tests and the new
# shared-memory activation test, the 4-bit tests under FUSEDMOE_W4_LEAN=0 and FUSEDMOE_W4_SMEM_X=0, and the full 4-bit
# grid (1 .. 4096 tokens). `bash bench/results/2026-11-29-h200-session-end-13/run.sh` from the repository root on the
# device (the pack of 0f8250e carried).
set -u
W4='Formats/W4Gpu.*:W4GpuEdge.*:W4MmaStagesGpu.*:W4MmaActGpu.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:Shapes/DecodeLayerW4Gpu.*'
SE_SWITCHES="FUSEDMOE_W4_LEAN=0@$W4 FUSEDMOE_W4_SMEM_X=0@$W4" \
SE_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/*:W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters' \
SE_MEMCHECK_TIMEOUT=200 SE_OLD=bench/results/2026-11-29-h200-session-end-11/grid/fusedmoe-bench.json.gz \
bash bench/session_end.sh session-end-13
