set -u
# Experiments on 7826c71 (uncommitted; r1 fullk.diff, r2 fullk_v2.diff, r3 fullk_final.diff = the commit): the 8-token
# lean instances, where k % 256 == 0, load their activations without zeroed registers - switch FUSEDMOE_W4_FULLK=0
# for the predicated loads. Tests (with the new multi-stage case: k = 768 / 512 in r1, r2; 4352 / 512 in r3), memcheck, then same-binary A/Bs.
# `bash bench/results/2026-11-28-h200-w4-full-k/run.sh` from the repository root on the device.
NAME=${NAME:-fk}
# Points: the script's arguments (r1, r2: 'deepseek-v3-tp1 8,64 mxfp4,nvfp4' 'qwen3-30b-a3b-tp1 8,64 mxfp4,nvfp4,nvfp4-w4a4'
# 'gpt-oss-120b 8 mxfp4,nvfp4').
export AB_ORDER=off,on,on,off,off,on,on,off AB_TIMEOUT=170
AB_TESTS='Formats/W4Gpu.*:W4GpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:Shapes/DecodeLayerW4Gpu.*:Formats/LongKGpu.*' \
AB_MEMCHECK='Formats/W4Gpu.DecodeSizesMatchOracle/*fp4*' \
  bash bench/ab_device.sh $NAME FUSEDMOE_W4_FULLK=0 "$@"
cd $OUT && tar czf ${NAME}_all.tgz $NAME && rm -rf $NAME
