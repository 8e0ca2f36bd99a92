#!/usr/bin/env bash
# Same-call A/B of two builds: old = 06cfa78's bench (bin/bench_old; the 4-bit mma kernel already takes its rows from
# the expert lookup), new = the same for small_m_activation.cu's two kernels and stream_gemm.cu (bin/bench). Their
# GPU tests (new build) and a memcheck first. `bash bench/results/2026-11-28-h200-rows-lookup-16bit/run.sh` from the
# repository root on the device.
AB_VARIANTS='old: new:' AB_VARIANT_BENCH='old=bench_old' \
AB_TESTS='*SmallMActivation*:*StreamGemm*:*SmallMGemm*:AllFormatsActivations/LayerGpu.*' \
AB_MEMCHECK='*SmallMActivation*:StreamGemm/*' AB_TIMEOUT=150 \
  bash bench/ab_device.sh rows16 - 'qwen3-30b-a3b-tp1 2,8,64 bf16,fp8-tensor' 'mixtral-8x7b 8,64,256 bf16,fp8-tensor' \
  'deepseek-v3-tp8 8,64 fp8-block'
