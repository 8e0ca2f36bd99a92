#!/usr/bin/env bash
# End of the second session of 2026-11-29, after W4A8's two MMA chains per group: the whole GPU suite, a memcheck of
# the decode-size 4-bit tests and the W4A8 one-token layers, and the W4A8 grid (1 .. 4096 tokens; the other formats'
# code did not change since ../2026-11-29-h200-session-end-11). `bash bench/results/2026-11-29-h200-session-end-12/run.sh`
# from the repository root on the device (the pack carried).
set -u
SE_STEPS="suite memcheck grid" SE_FORMATS=w4a8-int4 SE_REPEAT=- \
SE_MEMCHECK='Int4Fp8Device.*:Formats/W4Gpu.DecodeSizesMatchOracle/*:Shapes/DecodeLayerW4Gpu.MatchesOracle/*w4a8*' \
SE_OLD=bench/results/2026-11-29-h200-session-end-11/grid/fusedmoe-bench.json.gz bash bench/session_end.sh session-end-12
