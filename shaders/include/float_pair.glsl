// Unevaluated float pairs (hi + lo): about 48 bits of significand from fp32 arithmetic.
//
// Why: the log-average of a 16384x16384 frame sums 2^28 logarithms, and DECISIONS.md 3 asks for a
// relative error under 1e-4. Plain fp32 accumulation can lose that; fp64 would do, but not every GPU
// has it (Intel Arc has no shaderFloat64). Knuth's TwoSum recovers each addition's rounding error
// exactly (Knuth, TAOCP vol. 2, 4.2.2, Theorem B; Shewchuk 1997, "Adaptive Precision Floating-Point
// Arithmetic"). Every intermediate is `precise` (NoContraction), so no compiler may reassociate or fuse
// the steps and cancel the error terms away.
#ifndef HP_FLOAT_PAIR_GLSL
#define HP_FLOAT_PAIR_GLSL

// a + b as (rounded sum, exact rounding error).
vec2 fp_two_sum(float a, float b)
{
    precise float s = a + b;
    precise float bv = s - a;
    precise float av = s - bv;
    precise float e = (a - av) + (b - bv);
    return vec2(s, e);
}

// Renormalises (hi, lo) with |hi| >= |lo| (Dekker's Fast2Sum).
vec2 fp_fast_two_sum(float a, float b)
{
    precise float s = a + b;
    precise float e = b - (s - a);
    return vec2(s, e);
}

vec2 fp_add(vec2 a, float b)
{
    vec2 s = fp_two_sum(a.x, b);
    precise float lo = s.y + a.y;
    return fp_fast_two_sum(s.x, lo);
}


#endif
