#!/usr/bin/env python3
"""Writes a GLSL source as a C string literal, its #include "..." lines replaced by the files they name (from
the include directory, each once: the headers' guards are kept), for a shader the daemon compiles at run time
(pipeline/ocio_stage.c). glslang 12's C interface takes no include callback, so the source it gets must be
whole. Usage: embed_glsl.py SOURCE INCLUDE_DIR OUTPUT SYMBOL [DEPFILE]"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$')


def flatten(path, inc_dir, seen, out):
    for line in open(path, encoding="utf-8"):
        m = INCLUDE.match(line)
        if not m:
            out.append(line.rstrip("\n"))
            continue
        name = os.path.join(inc_dir, m.group(1))
        if name not in seen:
            seen.append(name)
            flatten(name, inc_dir, seen, out)


def main():
    src, inc_dir, output, symbol = sys.argv[1:5]
    seen, lines = [], []
    flatten(src, inc_dir, seen, lines)
    # The include extension's directive is not needed once the includes are in place.
    lines = [l for l in lines if "GL_GOOGLE_include_directive" not in l]
    with open(output, "w", encoding="utf-8") as f:
        f.write(f"/* Made by shaders/embed_glsl.py from {os.path.basename(src)}: do not edit. */\n")
        f.write(f"static const char {symbol}[] =\n")
        for l in lines:
            f.write('    "' + l.replace("\\", "\\\\").replace('"', '\\"') + '\\n"\n')
        f.write(";\n")
    if len(sys.argv) > 5:
        with open(sys.argv[5], "w", encoding="utf-8") as f:
            f.write(output + ": " + " ".join([src] + seen) + "\n")


if __name__ == "__main__":
    main()
