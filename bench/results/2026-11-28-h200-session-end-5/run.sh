#!/usr/bin/env bash
# Session end (fifth session of 2026-11-28): the whole GPU suite, memcheck of the decode-size 4-bit tests and the
# finalize path tests, the 4-bit tests under the two decode switches, and the 4-bit grid compared with session-end-4.
# `bash bench/results/2026-11-28-h200-session-end-5/run.sh` from the repository root on the device.
W4='Formats/W4Gpu.*:W4GpuEdge.*:W4MmaActGpu.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:Shapes/DecodeLayerW4Gpu.*'
SE_MEMCHECK='W4MmaActGpu.*:Formats/W4Gpu.DecodeSizesMatchOracle/*:*FinalizePaths*' \
SE_SWITCHES="FUSEDMOE_W4_LEAN=0@$W4 FUSEDMOE_W4_MMA_ACT=0@$W4" \
SE_OLD=bench/results/2026-11-28-h200-session-end-4/grid/fusedmoe-bench.json.gz bash bench/session_end.sh session-end-5
