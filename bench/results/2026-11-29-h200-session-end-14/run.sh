#!/usr/bin/env bash
# End of the fourth session of 2026-11-29: the whole GPU suite, a memcheck of the decode- and mid-size 4-bit tests and the
# shared-memory activation test, the 4-bit tests under FUSEDMOE_W4_LEAN=0, FUSEDMOE_W4_SMEM_X=0 and the tile bounds of
# before (FUSEDMOE_W4_TILE_ROWS=8/16), and the full 4-bit grid (1 .. 4096 tokens) compared with session-end-13.
# `bash bench/results/2026-11-29-h200-session-end-14/run.sh` from the repository root on the device (the pack carried).
set -u
W4='Formats/W4Gpu.*:W4GpuEdge.*:W4MmaStagesGpu.*:W4MmaActGpu.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:Shapes/DecodeLayerW4Gpu.*'
SE_SWITCHES="FUSEDMOE_W4_LEAN=0@$W4 FUSEDMOE_W4_SMEM_X=0@$W4 FUSEDMOE_W4_TILE_ROWS=8/16@$W4" \
SE_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/*:Formats/W4Gpu.MidBatchMatchesOracle/*:W4MmaStagesGpu.SharedMemoryActivationsBitwiseEqualToRegisters' \
SE_MEMCHECK_TIMEOUT=200 SE_OLD=bench/results/2026-11-29-h200-session-end-13/grid/fusedmoe-bench.json.gz \
bash bench/session_end.sh session-end-14
