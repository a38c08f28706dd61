"""A small C driver linked against a built llama.cpp's ggml, for the fixture scripts.

scripts/gen_quant_fixtures.py (weight quantization, libggml-base.a) and
scripts/gen_qact_fixtures.py (activation quantization, libggml-cpu.a + libggml-base.a) compile
their own DRIVER source with it: the driver reads an int32 ggml type id, an int64 element count
and that many float32 values on stdin and writes ggml's quantized bytes on stdout.
"""
import os
import subprocess
import sys

import numpy as np


_FRAME = r"""
#include <stdio.h>
#include <stdlib.h>
#include "ggml.h"
%(includes)s
/* stdin: int type, int64 n, n float32; stdout: %(what)s */
int main(void) {
    int type; long long n;
    if (fread(&type, 4, 1, stdin) != 1 || fread(&n, 8, 1, stdin) != 1) return 2;
    float *x = malloc((size_t)n * 4);
    if (fread(x, 4, (size_t)n, stdin) != (size_t)n) return 2;
    size_t bytes = ggml_row_size((enum ggml_type)type, n);
    void *y = calloc(1, bytes);
%(quantize)s
    fwrite(y, 1, bytes, stdout);
    return 0;
}
"""


def driver_source(what, quantize, includes=""):
    """The driver's C source: the stdin/stdout framing around `quantize`, C statements that
    write the row x (n float32, ggml type `type`) quantized into y (bytes of them; return 3
    when the type cannot be quantized)."""
    return _FRAME % {"includes": includes, "what": what, "quantize": quantize}


def build_driver(who, driver_c, src, build, lib_names, tmp):
    """Compile driver_c against llama.cpp's headers (src) and static libs (build/ggml/src/NAME).

    Exits with a message naming `who` when the libraries or headers are missing."""
    libs = [os.path.join(build, "ggml", "src", n) for n in lib_names]
    inc = os.path.join(src, "ggml", "include")
    if not all(os.path.exists(x) for x in libs) or not os.path.isdir(inc):
        sys.exit(f"{who}: need llama.cpp's {' and '.join(libs)} and {inc} (see --help)")
    c = os.path.join(tmp, "driver.c")
    exe = os.path.join(tmp, "driver")
    with open(c, "w") as f:
        f.write(driver_c)
    subprocess.run(["cc", "-O1", c, "-I", inc, *libs, "-lstdc++", "-lm", "-lpthread", "-fopenmp", "-o", exe],
                   check=True)
    return exe


def ggml_quantize(exe, type_id, x):
    """ggml's bytes for the float32 array x quantized to ggml type `type_id` (an int)."""
    inp = np.array([int(type_id)], np.int32).tobytes() + np.array([x.size], np.int64).tobytes() + x.tobytes()
    return subprocess.run([exe], input=inp, capture_output=True, check=True).stdout


def hexf(a):
    """A float32 array as the hex of its little-endian bytes (the fixtures' encoding)."""
    return np.ascontiguousarray(a, dtype="<f4").tobytes().hex()
