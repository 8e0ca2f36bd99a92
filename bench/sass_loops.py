#!/usr/bin/env python3
"""Instruction counts of a kernel's hot loop, from `cuobjdump -sass` text (no GPU needed).

The decode-size 4-bit kernels are bound by instruction issue (src/cuda/NOTES.md), so their changes are first
judged by what they do to the k loop: how many instructions, and of which pipe. For every kernel whose name
matches a regular expression, this finds the innermost backward branch whose body holds at least --min-mma
MMA instructions (the k loop) and prints its instruction count, the opcodes by family and a rough pipe split:

    cuobjdump -sass build/CMakeFiles/fusedmoe.dir/src/cuda/w4_gemm.cu.o > /tmp/w4.sass
    python3 bench/sass_loops.py /tmp/w4.sass --kernel 'w4_mma_kernelILi1ELi1E' --min-mma 32

(cuobjdump: `pip download nvidia-cuda-cuobjdump`, the binary under nvidia/cu*/bin.) The pipe split is by opcode
family only (ALU: logic, shifts, integer adds and compares, selects, byte permutes; FMA: IMAD, HMUL2, HFMA2, FFMA,
FMUL, FADD; MMA: HMMA, IMMA, HGMMA); the hardware's issue rules are finer. Counts in notes from before this script
used other sets: MXFP4's 8-token tile, "ALU-pipe instructions 440 -> 361" there (w4_gemm.cu kLean), reads 433 -> 372
here; totals (873 -> 770 for kFullK) are the same either way.
"""
import argparse
import re
import sys
from collections import Counter

ALU = {"LOP3", "SHF", "LEA", "IADD3", "ISETP", "SEL", "PLOP3", "IMNMX", "VIMNMX", "PRMT", "MOV", "SHL", "BFE",
       "FSEL", "LOP", "IABS", "FLO", "POPC"}
FMA = {"IMAD", "HMUL2", "HFMA2", "HADD2", "FFMA", "FMUL", "FADD", "IMUL"}
MMA = {"HMMA", "IMMA", "HGMMA", "QGMMA", "IGMMA"}

_INSN = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")
_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)")
_BRA = re.compile(r"\bBRA\b.*?(0x[0-9a-f]+)")


def functions(text):
    """{name: [(address, instruction text)]} of a `cuobjdump -sass` listing."""
    out, cur = {}, None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        m = _INSN.match(line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2).strip()))
    return out


def opcode(insn):
    """'@!P0 LDG.E.128 R4, [R2]' -> 'LDG'."""
    words = insn.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def hot_loop(insns, min_mma):
    """The shortest address range [target, branch] of a backward branch holding >= min_mma MMA instructions."""
    best = None
    for addr, text in insns:
        m = _BRA.search(text)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target >= addr:
            continue
        body = [t for a, t in insns if target <= a <= addr]
        if sum(opcode(t) in MMA for t in body) >= min_mma and (best is None or len(body) < len(best)):
            best = body
    return best


def summary(body):
    ops = Counter(opcode(t) for t in body)
    pipes = {"alu": sum(n for o, n in ops.items() if o in ALU), "fma": sum(n for o, n in ops.items() if o in FMA),
             "mma": sum(n for o, n in ops.items() if o in MMA)}
    return len(body), pipes, ops


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass", help="cuobjdump -sass output ('-': standard input)")
    ap.add_argument("--kernel", default=".", help="regular expression on the (mangled) function name")
    ap.add_argument("--min-mma", type=int, default=1, help="MMA instructions the loop must hold (default 1)")
    ap.add_argument("--top", type=int, default=12, help="opcodes listed per loop (default 12)")
    args = ap.parse_args(argv)
    text = sys.stdin.read() if args.sass == "-" else open(args.sass).read()
    found = 0
    for name, insns in functions(text).items():
        if not re.search(args.kernel, name):
            continue
        found += 1
        body = hot_loop(insns, args.min_mma)
        if body is None:
            print(f"{name}: no loop with {args.min_mma}+ MMA instructions")
            continue
        n, pipes, ops = summary(body)
        top = " ".join(f"{o}:{c}" for o, c in ops.most_common(args.top))
        print(f"{name}: loop {n} instructions, ALU {pipes['alu']}, FMA {pipes['fma']}, MMA {pipes['mma']} | {top}")
    if not found:
        print(f"no function matches '{args.kernel}'", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
