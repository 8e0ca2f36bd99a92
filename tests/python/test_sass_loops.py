"""bench/sass_loops.py: the hot-loop finder and counts, on a fabricated cuobjdump listing (no GPU).

Run: python3 -m pytest tests/python/test_sass_loops.py
"""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("sass_loops", os.path.join(ROOT, "bench", "sass_loops.py"))
sl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sl)


def listing(name, body):
    lines = [f"\t\tFunction : {name}"]
    for i, insn in enumerate(body):
        lines.append(f"        /*{16 * i:04x}*/                   {insn} ;   /* 0x000000000000 */")
        lines.append("                                                   /* 0x000000000000 */")
    return "\n".join(lines)


# 0x00 setup; an outer loop 0x10..0x90 around an inner one 0x20..0x70 holding the two HMMAs.
KERNEL = [
    "MOV R1, c[0x0][0x28]",                     # 0x00
    "S2R R0, SR_TID.X",                         # 0x10 outer loop start
    "LOP3.LUT R2, R0, 0xf, RZ, 0xc0, !PT",      # 0x20 inner loop start
    "IMAD R3, R2, 0x1040, RZ",                  # 0x30
    "HMUL2.BF16_V2 R4, R3, R5",                 # 0x40
    "HMMA.16816.F32.BF16 R8, R4, R6, R8",       # 0x50
    "@!P0 HMMA.16816.F32.BF16 R8, R4, R7, R8",  # 0x60
    "@P1 BRA 0x20",                             # 0x70 inner back edge
    "SHF.R.U32.HI R0, RZ, 0x8, R0",             # 0x80
    "@P2 BRA 0x10",                             # 0x90 outer back edge
    "EXIT",                                     # 0xa0
]


def test_finds_the_innermost_loop_with_the_mmas(tmp_path):
    f = sl.functions(listing("_Z6kernelv", KERNEL) + "\n" + listing("_Z5otherv", ["EXIT"]))
    assert sorted(f) == ["_Z5otherv", "_Z6kernelv"] and len(f["_Z6kernelv"]) == len(KERNEL)
    body = sl.hot_loop(f["_Z6kernelv"], 2)
    n, pipes, ops = sl.summary(body)
    assert n == 6 and pipes == {"alu": 1, "fma": 2, "mma": 2}
    assert ops["HMMA"] == 2 and ops["BRA"] == 1 and sl.opcode("@!P0 HMMA.16816.F32.BF16 R8") == "HMMA"
    assert sl.hot_loop(f["_Z6kernelv"], 3) is None  # no loop holds three
    assert sl.hot_loop(f["_Z5otherv"], 1) is None


def test_command_line(tmp_path, capsys):
    p = tmp_path / "k.sass"
    p.write_text(listing("_Z6kernelv", KERNEL))
    assert sl.main([str(p), "--kernel", "kernel", "--min-mma", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("_Z6kernelv: loop 6 instructions, ALU 1, FMA 2, MMA 2 | HMMA:2")
    assert sl.main([str(p), "--kernel", "nomatch"]) == 1
