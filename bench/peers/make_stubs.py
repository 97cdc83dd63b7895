#!/usr/bin/env python3
"""Stand-in shared libraries for the codec libraries that Debian's libOpenImageIO links but that oiiotool
never enters when it reads an EXR and writes a PNG (FFmpeg, OpenCV, DCMTK, OpenVDB, libheif): about
110 MB of packages pulled in by them alone, too much to carry to the GPU host (prepare_peers.sh).

    make_stubs.py OUTDIR --consumer LIB [--consumer LIB ...] REAL_LIB [REAL_LIB ...]

For each REAL_LIB (the Debian library itself, unpacked from its package at prepare time) it writes
OUTDIR/SONAME: a library with the same SONAME and symbol versions that defines exactly the symbols the
consumers import from it (functions as code, data as zeroed objects of the same size), so that the
dynamic linker resolves them at start-up (Debian links these with BIND_NOW). A stubbed function that is
ever called writes 'hdrpost peer stub: SONAME SYMBOL called' to stderr and exits 127: the tool fails
loudly, never silently does something else, and cpu_tools.py reports it as failed. The exceptions are
the functions named with --noop, which return 0: constructors and destructors of static objects that a
consumer runs whatever it reads (DCMTK's headers define one, DiRegister, in each file that includes
them). Needs cc and readelf."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

LINE = re.compile(r"^\s*\d+:\s+([0-9a-f]+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)")


def dynsyms(path):
    """(name, version or None, default?, type, size, defined?) for each dynamic symbol of path."""
    out = subprocess.run(["readelf", "--dyn-syms", "--wide", path], check=True, capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        _value, size, typ, bind, _vis, ndx, name = m.groups()
        if bind not in ("GLOBAL", "WEAK") or not name:
            continue
        version, default = None, False
        if "@@" in name:
            name, version = name.split("@@", 1)
            default = True
        elif "@" in name:
            name, version = name.split("@", 1)
        version = version.split(" ")[0] if version else None
        yield name, version, default, typ, int(size, 0) if size.startswith("0x") else int(size), ndx != "UND"


def soname(path):
    out = subprocess.run(["readelf", "-d", "--wide", path], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    return m.group(1) if m else os.path.basename(path)


def make_stub(real, wanted, outdir, noop):
    name = soname(real)
    syms = {}
    for sym, version, default, typ, size, defined in dynsyms(real):
        if defined and sym in wanted and (default or version is None) and typ in ("FUNC", "OBJECT", "NOTYPE",
                                                                                  "IFUNC"):
            syms[sym] = (version, "OBJECT" if typ == "OBJECT" else "FUNC", size)
    asm = [".text", ".p2align 4", ".hidden hp_stub_die", "hp_stub_die:",
           "  mov $2, %edi", "  mov $1, %eax", "  syscall", "  mov $127, %edi", "  mov $231, %eax", "  syscall",
           "  ud2"]
    data = [".data"]
    strings = [".section .rodata"]
    for i, (sym, (_version, typ, size)) in enumerate(sorted(syms.items())):
        q = '"' + sym + '"'
        if typ == "OBJECT":
            data += [f".globl {q}", f".type {q}, @object", f".size {q}, {max(size, 1)}", ".p2align 4",
                     f"{q}:", f"  .zero {max(size, 1)}"]
        elif sym in noop:
            asm += [f".globl {q}", f".type {q}, @function", ".p2align 4", f"{q}:", "  xor %eax, %eax", "  ret"]
        else:
            msg = f"hdrpost peer stub: {name} {sym} called (this library is not carried)\n"
            strings += [f".Lm{i}: .ascii {asm_string(msg)}"]
            asm += [f".globl {q}", f".type {q}, @function", ".p2align 4", f"{q}:",
                    f"  lea .Lm{i}(%rip), %rsi", f"  mov ${len(msg.encode())}, %edx", "  jmp hp_stub_die"]
    versions = {}
    for sym, (version, _t, _s) in syms.items():
        versions.setdefault(version, []).append(sym)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "stub.s")
        with open(src, "w") as f:
            f.write("\n".join(asm + data + strings + ['.section .note.GNU-stack,"",@progbits']) + "\n")
        cmd = ["cc", "-shared", "-nostdlib", "-o", os.path.join(outdir, name), f"-Wl,-soname,{name}", src]
        named = sorted(v for v in versions if v)
        if named:
            script = os.path.join(tmp, "versions")
            with open(script, "w") as f:
                for v in named:
                    f.write(f"{v} {{\n  global:\n" + "".join(f"    \"{s}\";\n" for s in sorted(versions[v])) +
                            ("  local: *;\n" if v == named[-1] else "") + "};\n")
                if None in versions:  # unversioned ones too: a base node
                    sys.exit(f"make_stubs: {real} mixes versioned and unversioned symbols; not handled")
            cmd.append(f"-Wl,--version-script={script}")
        subprocess.run(cmd, check=True)
    return name, len(syms)


def asm_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--consumer", action="append", required=True)
    ap.add_argument("--noop", action="append", default=[],
                    help="a function that returns (0) instead of failing: for the constructors and destructors "
                         "of static objects a consumer runs at load and exit")
    ap.add_argument("real", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    wanted = {sym for c in a.consumer for sym, _v, _d, _t, _s, defined in dynsyms(c) if not defined}
    for real in a.real:
        name, n = make_stub(real, wanted, a.outdir, set(a.noop))
        print(f"make_stubs: {name}: {n} symbols")
    return 0


if __name__ == "__main__":
    sys.exit(main())
