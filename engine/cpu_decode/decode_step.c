/* One forward pass of a Llama-architecture decoder over M new tokens (decode rows, one per
 * sequence, and prefill chunks, several of one sequence) on an x86-64 CPU with AVX2 and FMA:
 * every decoder layer (RMSNorm, q/k/v, RoPE, KV store, paged causal attention, o, RMSNorm,
 * gate/up, SwiGLU, down) in one call. Activations are fp32, except that every int4 product
 * quantises each row's input to int16 per group of 32 and multiplies in integers, with the same
 * arithmetic per row whatever the row count (q4_rows_vnni's register tiles where the CPU has
 * AVX-512 VNNI; else q4_rows' up to 8 rows, panel_gemm for more): a row's result is bit for bit
 * the same alone or among others, and on either instruction set (row-invariant numerics).
 *
 * Why it exists: at batch 1 the torch path makes about 1,400 aten calls a step, and torch's CPU
 * int4 kernel and flash attention are slow at decode shapes; see engine/cpu_decode/__init__.py
 * and docs/engine.md ("Fused CPU decode") for the design and the measurements.
 *
 * Built by library.py with the system C compiler (-O3 -mavx2 -mfma -mf16c -ffast-math -fopenmp);
 * loaded with ctypes. Every pointer is to contiguous memory in the layout given below. */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* An int4 weight [n, k] (k a multiple of 32, n of 16): w[r, 32 b + j] = d * q + m with q in
 * 0..15, d = scale and m = zero - 8 * scale (fp32) from each group's bf16 scale and zero (the
 * grid w = (q - 8) * scale + zero). qs [n, k / 2]: byte 16 b + j of row r holds q of element
 * 32 b + j in its low nibble and of element 32 b + 16 + j in its high nibble. dm [n, k / 32, 2]
 * bf16 (raw bits): (scale, zero) of each group; the products compute d and m from them as
 * they read a group (8 * scale is exact, so m is the fp32 rounding of zero - 8 * scale).
 * The same values again as panels of 16 output rows (pc_pack_q4_panels), which every product
 * reads (qs and dm are only what the panels are packed from; pc_q4 may leave them NULL):
 * pq [n / 16, k / 2, 16], byte b of step s of panel c
 * holds q of row 16 c + b / 2, input 2 s + b % 2, in its low nibble and of row 16 c + 8 + b / 2
 * in its high one (each row's two inputs side by side, as vpmaddwd sums them); pdm [n / 16,
 * k / 32, 2, 16] bf16: the panel's 16 scales, then its 16 zeros, of each group (0.625 bytes a
 * weight in all, against 0.75 with fp32 d and m). */
typedef struct {
    const uint8_t *qs;
    const uint16_t *dm;
    const uint8_t *pq;
    const uint16_t *pdm;
    int64_t n, k;
} pc_q4;

/* One decoder layer. k_cache / v_cache: the layer's pool, [num_slots, kv_heads, head_dim]
 * (slot = block_id * block_size + offset), fp32, or IEEE fp16 where pc_dims.kv_f16 is 1 (stored
 * rounded to nearest even, read back to fp32: every sum stays fp32). */
typedef struct {
    const float *ln1, *ln2; /* [hidden] RMSNorm weights (input, post-attention) */
    pc_q4 qkv, o, gate_up, down;
    void *k_cache, *v_cache;
} pc_layer;

/* Model sizes; head_dim a multiple of 16, heads a multiple of kv_heads. kv_f16: 1 if the KV
 * pool holds fp16 (F16C's vcvtph2ps / vcvtps2ph convert it), 0 for fp32. */
typedef struct {
    int64_t hidden, heads, kv_heads, head_dim, inter, block_size;
    float eps, scale;
    int32_t nthreads, kv_f16;
} pc_dims;

/* Which keys each row attends to, as tasks (built by plan.py's attention_plan, the same for
 * every layer of a step). Task t reads blocks b0[t] .. b1[t] - 1 of block table table_row[t],
 * keys below position hi[t], for the rows task_rows[rows_start[t] .. rows_start[t+1]] with
 * their queries stacked: several rows when they hold those blocks in common (a shared prompt,
 * or the tokens of one prefill chunk: those K/V are read once for all of them), else one. Entry
 * e = rows_start[t] + i also gives row_hi[e]: that row sees only keys below it (its position + 1,
 * the causal mask), and writes one partial result, part part_of[e]; row m's output merges its
 * parts row_parts[parts_start[m] .. parts_start[m+1]] by log-sum-exp. The attention scratch
 * holds task_floats floats per thread, then the parts. */
typedef struct {
    int64_t num_tasks;
    const int64_t *rows_start, *task_rows, *row_hi, *part_of, *table_row, *b0, *b1, *hi;
    const int64_t *parts_start, *row_parts;
    int64_t task_floats;
} pc_attn_plan;

/* 1 if this CPU runs the AVX2 + FMA + F16C code below. */
int pc_cpu_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
}

/* dst [n] fp32 = src [n] fp16, n a multiple of 8 */
static inline void f16_to_f32(const uint16_t *restrict src, float *restrict dst, int64_t n) {
    for (int64_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
}

/* dst [n] fp16 = src [n] fp32 rounded to nearest even (as torch's .half()), n a multiple of 8 */
static inline void f32_to_f16(const float *restrict src, uint16_t *restrict dst, int64_t n) {
    for (int64_t i = 0; i < n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
}

/* 8 bf16 (raw bits) -> fp32, exactly: the bits are fp32's upper half */
static inline __m256 bf16x8_to_ps(const uint16_t *p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* A panel's group of pdm (16 bf16 scales, then 16 zeros) as fp32 d = scale (rows 0-7 in d[0],
 * 8-15 in d[1]) and m = zero - 8 * scale, rounded once (8 * scale is exact). */
static inline void group_dm(const uint16_t *g, __m256 d[2], __m256 m[2]) {
    const __m256 eight = _mm256_set1_ps(8.f);
    for (int i = 0; i < 2; i++) {
        d[i] = bf16x8_to_ps(g + 8 * i);
        m[i] = _mm256_fnmadd_ps(eight, d[i], bf16x8_to_ps(g + 16 + 8 * i));
    }
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* e^x in 8 lanes, to about 2 ulp (Cephes' expf: x = n ln2 + r, a degree-6 polynomial in r
 * scaled by 2^n); exactly 0 below -87.3 (e^x would be subnormal there), so masked scores
 * (-1e30) weigh nothing. Written out rather than left to libmvec: gcc vectorises expf only in
 * some loops. */
static inline __m256 exp8(__m256 x) {
    const __m256 zero_below = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.f)));
    const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(y), e));
    return _mm256_andnot_ps(zero_below, y);
}

/* s[j] = e^(s[j] - m) for j < n; returns their sum. */
static inline float exp_sub_sum(float *s, int64_t n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
        _mm256_storeu_ps(s + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    float l = hsum(acc);
    if (j < n) {
        float tail[8] = {0}, out[8];
        for (int64_t i = j; i < n; i++) tail[i - j] = s[i] - m;
        _mm256_storeu_ps(out, exp8(_mm256_loadu_ps(tail)));
        for (int64_t i = j; i < n; i++) s[i] = out[i - j], l += out[i - j];
    }
    return l;
}

/* y[0..mr) [16] (rows ldy apart) = a[0..mr) [k] . b [k, 16] (rows ldb apart), mr <= 6: the
 * 6 x 16 register tile of stacked attention's scores (a: six keys, each its own row pointer,
 * b: the transposed queries). Twelve accumulators; per input, one broadcast of each row and two
 * loads of b. */
static inline __attribute__((always_inline)) void tile_6x16(const float *const *a, int64_t mr,
                                                           const float *b, int64_t ldb, int64_t k,
                                                           float *y, int64_t ldy) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    /* rows past mr re-read row 0 (their sums are not stored) */
    const float *a0 = a[0], *a1 = a[mr > 1 ? 1 : 0], *a2 = a[mr > 2 ? 2 : 0];
    const float *a3 = a[mr > 3 ? 3 : 0], *a4 = a[mr > 4 ? 4 : 0], *a5 = a[mr > 5 ? 5 : 0];
    for (int64_t j = 0; j < k; j++, b += ldb) {
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 v = _mm256_broadcast_ss(a0 + j);
        c00 = _mm256_fmadd_ps(v, b0, c00);
        c01 = _mm256_fmadd_ps(v, b1, c01);
        v = _mm256_broadcast_ss(a1 + j);
        c10 = _mm256_fmadd_ps(v, b0, c10);
        c11 = _mm256_fmadd_ps(v, b1, c11);
        v = _mm256_broadcast_ss(a2 + j);
        c20 = _mm256_fmadd_ps(v, b0, c20);
        c21 = _mm256_fmadd_ps(v, b1, c21);
        v = _mm256_broadcast_ss(a3 + j);
        c30 = _mm256_fmadd_ps(v, b0, c30);
        c31 = _mm256_fmadd_ps(v, b1, c31);
        v = _mm256_broadcast_ss(a4 + j);
        c40 = _mm256_fmadd_ps(v, b0, c40);
        c41 = _mm256_fmadd_ps(v, b1, c41);
        v = _mm256_broadcast_ss(a5 + j);
        c50 = _mm256_fmadd_ps(v, b0, c50);
        c51 = _mm256_fmadd_ps(v, b1, c51);
    }
    const __m256 c[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    for (int64_t r = 0; r < mr; r++) {
        _mm256_storeu_ps(y + r * ldy, c[2 * r]);
        _mm256_storeu_ps(y + r * ldy + 8, c[2 * r + 1]);
    }
}

/* Activations as int16 for the panel GEMM: each row's groups of 32 inputs x [M, k] (rows ldx
 * apart) -> qx [M, k] int16 with x ~ dx * qx, dx = max |x| / 32767 over the group (rounded to
 * nearest, ties to even: an error of at most 2^-16 of the group's largest input, where int8, as
 * llama.cpp's Q8_1, has 2^-8), and sx = dx * sum(qx) for the weights' offsets m; dx, sx
 * [M, k / 32]. A group of zeros gets dx = 0 and qx = 0. OpenMP over rows from 32. */
static void quantize_rows(const float *restrict x, int64_t ldx, int64_t M, int64_t k,
                          int16_t *restrict qx, float *restrict dx, float *restrict sx, int nt) {
    const int64_t ng = k / 32;
#pragma omp parallel for num_threads(nt) schedule(static) if (M >= 32)
    for (int64_t m = 0; m < M; m++)
        for (int64_t g = 0; g < ng; g++) {
            const float *v = x + m * ldx + 32 * g;
            const __m256 sign = _mm256_set1_ps(-0.f);
            __m256 a[4], amax = _mm256_setzero_ps();
            for (int i = 0; i < 4; i++) {
                a[i] = _mm256_loadu_ps(v + 8 * i);
                amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, a[i]));
            }
            __m128 h = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
            h = _mm_max_ps(h, _mm_movehl_ps(h, h));
            h = _mm_max_ss(h, _mm_movehdup_ps(h));
            const float d = _mm_cvtss_f32(h) / 32767.f, id = d > 0.f ? 1.f / d : 0.f;
            __m256i q[4], total = _mm256_setzero_si256();
            for (int i = 0; i < 4; i++) {
                q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(a[i], _mm256_set1_ps(id)));
                total = _mm256_add_epi32(total, q[i]);
            }
            /* int32 -> int16 (saturating; |q| <= 32767 already); packs works per 128-bit lane */
            for (int i = 0; i < 2; i++)
                _mm256_storeu_si256(
                    (__m256i *)(qx + m * k + 32 * g + 16 * i),
                    _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2 * i], q[2 * i + 1]), 0xD8));
            __m128i t = _mm_add_epi32(_mm256_castsi256_si128(total),
                                      _mm256_extracti128_si256(total, 1));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
            dx[m * ng + g] = d;
            sx[m * ng + g] = d * (float)_mm_cvtsi128_si32(t);
        }
}

/* f [2] (a panel's 16 output rows) += d * (dx * acc) + m * sx: one group's exact int32 sums acc
 * of one activation row folded into its fp32 accumulators, the same operations in the same
 * order whichever product (panel_gemm's tiles, q4_rows' or q4_rows_vnni's) computed acc, so a
 * row's result does not depend on how many rows the product had. */
static inline __attribute__((always_inline)) void fold_group(const __m256i acc[2],
                                                            const __m256 d[2], const __m256 m[2],
                                                            float dx, float sx, __m256 f[2]) {
    const __m256 xd = _mm256_set1_ps(dx), xs = _mm256_set1_ps(sx);
    for (int i = 0; i < 2; i++) {
        f[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i]), _mm256_mul_ps(d[i], xd), f[i]);
        f[i] = _mm256_fmadd_ps(m[i], xs, f[i]);
    }
}

/* Rows of activations the panel GEMM's register tile takes at a time (measured: 3 and 6 are
 * slower on SmolLM2's shapes). panel_group_sums is written for 4. */
#define PANEL_TILE_ROWS 4
_Static_assert(PANEL_TILE_ROWS == 4, "panel_group_sums holds 4 rows");

/* Two int16 inputs read as one int32 (vpbroadcastd's operand). */
typedef int32_t __attribute__((may_alias, aligned(2))) pair16;

/* One step of panel_group_sums for one row: its two inputs at X broadcast to every lane, times
 * both halves of the panel's step (rows 0-7: %[w0], 8-15: %[w1]) by vpmaddwd, added to the
 * row's accumulators A0, A1 in place. */
#define PANEL_ROW_STEP(X, A0, A1)                                                                 \
    "vpbroadcastd " X ", %[t]\n\t"                                                                \
    "vpmaddwd %[w0], %[t], %[u]\n\t"                                                              \
    "vpaddd %[u], " A0 ", " A0 "\n\t"                                                             \
    "vpmaddwd %[w1], %[t], %[u]\n\t"                                                              \
    "vpaddd %[u], " A1 ", " A1 "\n\t"

/* acc[r] = the exact int32 sums of one group (16 steps of two inputs) of the unpacked panel wg
 * [16, 32] (int16, step s: rows 0-7 then 8-15 of inputs 2 s and 2 s + 1) times the group's
 * inputs xg[r] [32] (int16) of PANEL_TILE_ROWS rows: acc[r][0] rows 0-7, acc[r][1] rows 8-15.
 * Each step is written in assembly so that every accumulator stays in its register: gcc 12
 * compiles the plain intrinsics loop with a register copy of each accumulator per step (8 of
 * the loop's 33 instructions; 16% fewer instructions in SmolLM2's four products at 64 rows,
 * callgrind). The sums are exact integers: the same bits as any other order of the adds. */
static inline __attribute__((always_inline)) void panel_group_sums(const int16_t *restrict wg,
                                                                  const int16_t *const xg[4],
                                                                  __m256i acc[][2]) {
    __m256i a00 = _mm256_setzero_si256(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
    __m256i a30 = a00, a31 = a00, t, u;
    for (int s = 0; s < 16; s++) {
        const __m256i w0 = _mm256_load_si256((const __m256i *)(wg + 32 * s));
        const __m256i w1 = _mm256_load_si256((const __m256i *)(wg + 32 * s + 16));
        __asm__(PANEL_ROW_STEP("%[x0]", "%[a00]", "%[a01]")
                PANEL_ROW_STEP("%[x1]", "%[a10]", "%[a11]")
                PANEL_ROW_STEP("%[x2]", "%[a20]", "%[a21]")
                PANEL_ROW_STEP("%[x3]", "%[a30]", "%[a31]")
                : [a00] "+x"(a00), [a01] "+x"(a01), [a10] "+x"(a10), [a11] "+x"(a11),
                  [a20] "+x"(a20), [a21] "+x"(a21), [a30] "+x"(a30), [a31] "+x"(a31),
                  [t] "=&x"(t), [u] "=&x"(u)
                : [w0] "x"(w0), [w1] "x"(w1), [x0] "m"(*(const pair16 *)(xg[0] + 2 * s)),
                  [x1] "m"(*(const pair16 *)(xg[1] + 2 * s)),
                  [x2] "m"(*(const pair16 *)(xg[2] + 2 * s)),
                  [x3] "m"(*(const pair16 *)(xg[3] + 2 * s)));
    }
    acc[0][0] = a00, acc[0][1] = a01, acc[1][0] = a10, acc[1][1] = a11;
    acc[2][0] = a20, acc[2][1] = a21, acc[3][0] = a30, acc[3][1] = a31;
}
#undef PANEL_ROW_STEP

/* y [M, n] = x W^T with x as quantize_rows left it (qx, dx, sx) and W's int4 panels: OpenMP over
 * panels. Each thread unpacks a panel to int16 (k * 32 bytes: in L1 at k = 576, L2 beyond),
 * then for PANEL_TILE_ROWS rows at a time and each group of 32 inputs sums q_w * q_x exactly
 * in int32 lanes (vpmaddwd: pairs of inputs; at most 32 * 15 * 32767 < 2^24, so the sums
 * convert to fp32 exactly), and adds d * dx * sum + m * sx to fp32 accumulators. Twice the
 * products per instruction of fp32 FMAs: about twice as fast on AVX2 (docs/engine.md, "Fused
 * CPU decode"). */
static void panel_gemm(const pc_q4 *w, const int16_t *restrict qx, const float *restrict dx,
                       const float *restrict sx, int64_t M, float *restrict y, int nthreads) {
    const int64_t n = w->n, k = w->k, ng = k / 32;
#pragma omp parallel num_threads(nthreads)
    {
        int16_t wu[16 * k] __attribute__((aligned(32)));
#pragma omp for schedule(static)
        for (int64_t c = 0; c < n; c += 16) {
            const uint8_t *pq = w->pq + c / 16 * (k / 2) * 16;
            const uint16_t *dm = w->pdm + c / 16 * ng * 32;
            const __m128i mask = _mm_set1_epi8(15);
            for (int64_t s = 0; s < k / 2; s++) { /* rows 0-7, then 8-15, of two inputs */
                const __m128i raw = _mm_loadu_si128((const __m128i *)(pq + 16 * s));
                _mm256_store_si256((__m256i *)(wu + 32 * s),
                                   _mm256_cvtepu8_epi16(_mm_and_si128(raw, mask)));
                _mm256_store_si256(
                    (__m256i *)(wu + 32 * s + 16),
                    _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), mask)));
            }
            for (int64_t m = 0; m < M; m += PANEL_TILE_ROWS) {
                const int64_t mr = M - m < PANEL_TILE_ROWS ? M - m : PANEL_TILE_ROWS;
                int64_t rows[PANEL_TILE_ROWS]; /* rows past mr repeat row m (not stored) */
                for (int r = 0; r < PANEL_TILE_ROWS; r++) rows[r] = m + (r < mr ? r : 0);
                __m256 f[PANEL_TILE_ROWS][2];
                for (int r = 0; r < PANEL_TILE_ROWS; r++)
                    f[r][0] = f[r][1] = _mm256_setzero_ps();
                for (int64_t g = 0; g < ng; g++) {
                    __m256i acc[PANEL_TILE_ROWS][2];
                    const int16_t *xg[PANEL_TILE_ROWS];
                    for (int r = 0; r < PANEL_TILE_ROWS; r++)
                        xg[r] = qx + rows[r] * k + 32 * g;
                    panel_group_sums(wu + g * 16 * 32, xg, acc);
                    __m256 dv[2], mv[2];
                    group_dm(dm + g * 32, dv, mv);
                    for (int r = 0; r < PANEL_TILE_ROWS; r++)
                        fold_group(acc[r], dv, mv, dx[rows[r] * ng + g], sx[rows[r] * ng + g], f[r]);
                }
                for (int64_t r = 0; r < mr; r++) {
                    _mm256_storeu_ps(y + (m + r) * n + c, f[r][0]);
                    _mm256_storeu_ps(y + (m + r) * n + c + 8, f[r][1]);
                }
            }
        }
    }
}

/* Most rows a register tile of the small-product kernel (q4_rows) holds: each row keeps two
 * int32 accumulators in registers (10 of AVX2's 16 at 5 rows, with the two widened weight
 * vectors, the raw codes and the broadcast input beside them). */
#define REG_TILE_MAX 5

/* Without AVX-512 VNNI, products of at most this many rows take q4_rows (the codes widened in
 * registers, once per tile); more rows take panel_gemm (a panel widened once into memory, read
 * by every tile). */
#define SMALL_PRODUCT_ROWS 8

/* y [R, n] (rows n apart) for the R rows m0 .. m0 + R - 1 of x as quantize_rows left it, over the
 * 16 output rows of panel c: the panel's codes are widened to int16 in registers as they are
 * read, once for all R rows (no unpacked copy), and each row gets panel_gemm's exact int32
 * group sums folded by the same fold_group, so a row's output is bit for bit the one it gets
 * alone (R = 1, a decode step at batch 1) or in any other product. R is a compile-time
 * constant at every call (q4_rows' switch), so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void q4_tile_regs(
    const uint8_t *restrict pq, const uint16_t *restrict dm, int64_t k,
    const int16_t *restrict qx, const float *restrict dx, const float *restrict sx, int64_t m0,
    const int R, float *restrict y, int64_t n, int64_t c) {
    const int64_t ng = k / 32;
    const __m128i mask = _mm_set1_epi8(15);
    __m256 f[REG_TILE_MAX][2];
    for (int r = 0; r < R; r++) f[r][0] = f[r][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m256i acc[REG_TILE_MAX][2];
        for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
        const uint8_t *pg = pq + g * 16 * 16;
        const int16_t *xg = qx + m0 * k + 32 * g;
#pragma GCC unroll 4
        for (int s = 0; s < 16; s++) {
            const __m128i raw = _mm_loadu_si128((const __m128i *)(pg + 16 * s));
            const __m256i w0 = _mm256_cvtepu8_epi16(_mm_and_si128(raw, mask));
            const __m256i w1 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), mask));
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                int32_t two;
                __builtin_memcpy(&two, xg + r * k + 2 * s, 4);
                const __m256i a = _mm256_set1_epi32(two);
                acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(w0, a));
                acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(w1, a));
            }
        }
        __m256 dv[2], mv[2];
        group_dm(dm + g * 32, dv, mv);
        for (int r = 0; r < R; r++)
            fold_group(acc[r], dv, mv, dx[(m0 + r) * ng + g], sx[(m0 + r) * ng + g], f[r]);
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(y + (m0 + r) * n + c, f[r][0]);
        _mm256_storeu_ps(y + (m0 + r) * n + c + 8, f[r][1]);
    }
}

/* The AVX-512 VNNI form of q4_tile_regs, for CPUs that have it (pc_set_vnni): vpdpwssd
 * multiplies a 512-bit vector of the panel's 16 rows x 2 inputs by a row's two int16 inputs
 * and adds the pairs into 16 int32 lanes in one instruction, where AVX2 takes a vpmaddwd and a
 * vpaddd for each half; the codes are widened once per step for all R rows (broadcast,
 * shift, mask, vpmovzxbw). The sums are the same exact int32 group sums (vpdpwssd does not
 * saturate, and |sum| < 2^24) and each lane is folded by fold_group's operations in its order
 * (d and m as group_dm makes them), so the outputs are the AVX2 kernels' bit for bit. Each row
 * spreads a group's 16 steps over NACC accumulators (vpdpwssd's latency is 4-5 cycles), added
 * exactly at the group's end. */
#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* Rows a q4_tile_vnni tile holds: one or two accumulators each, of AVX-512's 32 registers. */
#define VNNI_TILE_MAX 8

static inline __attribute__((always_inline)) VNNI_TARGET void q4_tile_vnni(
    const uint8_t *restrict pq, const uint16_t *restrict dm, int64_t k,
    const int16_t *restrict qx, const float *restrict dx, const float *restrict sx, int64_t m0,
    const int R, float *restrict y, int64_t n, int64_t c) {
    enum { NACC = 4 };
    const int A = R <= 2 ? NACC : 2; /* accumulators per row in use */
    const int64_t ng = k / 32;
    const __m256i mask = _mm256_set1_epi8(15);
    const __m256i shift = _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4); /* high nibbles above */
    const __m512 eight = _mm512_set1_ps(8.f);
    __m512 f[VNNI_TILE_MAX];
    for (int r = 0; r < R; r++) f[r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < ng; g++) {
        __m512i acc[VNNI_TILE_MAX][NACC];
        for (int r = 0; r < R; r++)
            for (int i = 0; i < A; i++) acc[r][i] = _mm512_setzero_si512();
        const uint8_t *pg = pq + g * 16 * 16;
        const int16_t *xg = qx + m0 * k + 32 * g;
#pragma GCC unroll 16
        for (int s = 0; s < 16; s++) {
            const __m256i raw =
                _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(pg + 16 * s)));
            const __m512i wv =
                _mm512_cvtepu8_epi16(_mm256_and_si256(_mm256_srlv_epi32(raw, shift), mask));
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                int32_t two;
                __builtin_memcpy(&two, xg + r * k + 2 * s, 4);
                acc[r][s % A] = _mm512_dpwssd_epi32(acc[r][s % A], wv, _mm512_set1_epi32(two));
            }
        }
        const __m512 d = _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(dm + g * 32))), 16));
        const __m512 z = _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(dm + g * 32 + 16))), 16));
        const __m512 m = _mm512_fnmadd_ps(eight, d, z);
        for (int r = 0; r < R; r++) {
            __m512i sum = acc[r][0];
            for (int i = 1; i < A; i++) sum = _mm512_add_epi32(sum, acc[r][i]);
            const __m512 xd = _mm512_set1_ps(dx[(m0 + r) * ng + g]);
            const __m512 xs = _mm512_set1_ps(sx[(m0 + r) * ng + g]);
            f[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, xd), f[r]);
            f[r] = _mm512_fmadd_ps(m, xs, f[r]);
        }
    }
    for (int r = 0; r < R; r++) _mm512_storeu_ps(y + (m0 + r) * n + c, f[r]);
}

/* q4_rows' panel loop with q4_tile_vnni's tiles of up to VNNI_TILE_MAX rows (9 rows: 4 + 5),
 * for any M: a prefill chunk's rows too (about half panel_gemm's time at 9 to 256 rows:
 * pc_matmul over SmolLM2's shapes, 1 thread, paired). */
static VNNI_TARGET void q4_rows_vnni(const pc_q4 *w, const int16_t *restrict qx,
                                     const float *restrict dx, const float *restrict sx,
                                     int64_t M, float *restrict y, int nthreads) {
    const int64_t n = w->n, k = w->k, ng = k / 32;
    const int64_t tiles = (M + VNNI_TILE_MAX - 1) / VNNI_TILE_MAX;
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t c = 0; c < n; c += 16) {
        const uint8_t *pq = w->pq + c / 16 * (k / 2) * 16;
        const uint16_t *dm = w->pdm + c / 16 * ng * 32;
        for (int64_t t = 0, m0 = 0; t < tiles; t++) {
            const int64_t R = (M - m0) / (tiles - t);
            switch (R) {
            case 1: q4_tile_vnni(pq, dm, k, qx, dx, sx, m0, 1, y, n, c); break;
            case 2: q4_tile_vnni(pq, dm, k, qx, dx, sx, m0, 2, y, n, c); break;
            case 3: q4_tile_vnni(pq, dm, k, qx, dx, sx, m0, 3, y, n, c); break;
            case 4: q4_tile_vnni(pq, dm, k, qx, dx, sx, m0, 4, y, n, c); break;
            case 5: q4_tile_vnni(pq, dm, k, qx, dx, sx, m0, 5, y, n, c); break;
            case 6: q4_tile_vnni(pq, dm, k, qx, dx, sx, m0, 6, y, n, c); break;
            case 7: q4_tile_vnni(pq, dm, k, qx, dx, sx, m0, 7, y, n, c); break;
            default: q4_tile_vnni(pq, dm, k, qx, dx, sx, m0, 8, y, n, c); break;
            }
            m0 += R;
        }
    }
}

/* 1 while the int4 products take q4_rows_vnni: from the first product on, where
 * the CPU has AVX-512 F, BW, VL and VNNI, unless pc_set_vnni turned it off; -1 undecided. */
static int vnni_on = -1;

static int vnni_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

/* Let the int4 products use AVX-512 VNNI (on: 1, where the CPU has it) or keep them on AVX2
 * (0; tests run both). Returns 1 if they use VNNI now. The outputs are the same bits either
 * way. */
int pc_set_vnni(int32_t on) {
    vnni_on = on && vnni_supported();
    return vnni_on;
}

/* y [M, n] = x W^T for M <= SMALL_PRODUCT_ROWS rows of x as quantize_rows left it (qx, dx, sx)
 * and W's int4 panels: for each panel, the rows in register tiles of at most REG_TILE_MAX,
 * as even as they divide (6 rows: 3 + 3; 8: 4 + 4), each tile reading the panel's codes once
 * (q4_tile_regs). One row (a decode step at batch 1) is the tile of 1; a verify pass of 1 + k
 * rows at k <= 4 is one tile, whose extra rows cost their multiply-adds only. OpenMP over
 * panels. */
static void q4_rows(const pc_q4 *w, const int16_t *restrict qx, const float *restrict dx,
                    const float *restrict sx, int64_t M, float *restrict y, int nthreads) {
    const int64_t n = w->n, k = w->k, ng = k / 32;
    const int64_t tiles = (M + REG_TILE_MAX - 1) / REG_TILE_MAX;
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t c = 0; c < n; c += 16) {
        const uint8_t *pq = w->pq + c / 16 * (k / 2) * 16;
        const uint16_t *dm = w->pdm + c / 16 * ng * 32;
        for (int64_t t = 0, m0 = 0; t < tiles; t++) {
            const int64_t R = (M - m0) / (tiles - t); /* the rest, shared evenly */
            switch (R) {
            case 1: q4_tile_regs(pq, dm, k, qx, dx, sx, m0, 1, y, n, c); break;
            case 2: q4_tile_regs(pq, dm, k, qx, dx, sx, m0, 2, y, n, c); break;
            case 3: q4_tile_regs(pq, dm, k, qx, dx, sx, m0, 3, y, n, c); break;
            case 4: q4_tile_regs(pq, dm, k, qx, dx, sx, m0, 4, y, n, c); break;
            default: q4_tile_regs(pq, dm, k, qx, dx, sx, m0, 5, y, n, c); break;
            }
            m0 += R;
        }
    }
}

/* Floats of panel_product's qbuf for M rows of k inputs: qx, then dx and sx. */
static inline int64_t matmul_scratch_floats(int64_t k, int64_t M) {
    return (M * k + 1) / 2 + 2 * M * (k / 32);
}

/* y [M, n] = x [M, k] (rows ldx apart) W^T by the panels: x quantised to int16 in qbuf
 * (M * k int16, then dx and sx: M * k / 16 floats), then q4_rows_vnni for any M where the CPU
 * has AVX-512 VNNI, else q4_rows (AVX2) for up to SMALL_PRODUCT_ROWS rows (decode steps,
 * speculative verify passes) and panel_gemm for more (prefill chunks). */
static void panel_product(const pc_q4 *w, const float *x, int64_t ldx, int64_t M, float *y,
                          float *qbuf, int nt) {
    int16_t *qx = (int16_t *)qbuf;
    float *dx = qbuf + (M * w->k + 1) / 2, *sx = dx + M * (w->k / 32);
    quantize_rows(x, ldx, M, w->k, qx, dx, sx, nt);
    if (vnni_on < 0) vnni_on = vnni_supported();
    if (vnni_on)
        q4_rows_vnni(w, qx, dx, sx, M, y, nt);
    else if (M <= SMALL_PRODUCT_ROWS)
        q4_rows(w, qx, dx, sx, M, y, nt);
    else
        panel_gemm(w, qx, dx, sx, M, y, nt);
}

/* y [M, n] = x [M, k] (rows ldx apart) W^T by panel_product. qbuf: pc_scratch_floats' share
 * for it. */
static void matmul(const pc_q4 *w, const float *x, int64_t ldx, float *y, int64_t M, float *qbuf,
                   int nt) {
    panel_product(w, x, ldx, M, y, qbuf, nt);
}

/* out = w * (x / sqrt(mean(x^2) + eps)), as transformers' LlamaRMSNorm in fp32 */
static void rms_norm(const float *restrict x, const float *restrict w, float *restrict out,
                     int64_t n, float eps) {
    float ss = 0.f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const float r = 1.f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = w[i] * (x[i] * r);
}

/* x [heads, d] <- x * cos + roll(x, d / 2) * signed_sin (transformers' rotate_half form) */
static void rope(float *restrict x, int64_t heads, int64_t d, const float *restrict cos,
                 const float *restrict ssin) {
    const int64_t half = d / 2;
    float tmp[d];
    for (int64_t h = 0; h < heads; h++) {
        float *v = x + h * d;
        for (int64_t i = 0; i < d; i++) tmp[i] = v[i];
        for (int64_t i = 0; i < half; i++) v[i] = tmp[i] * cos[i] + tmp[i + half] * ssin[i];
        for (int64_t i = half; i < d; i++) v[i] = tmp[i] * cos[i] + tmp[i - half] * ssin[i];
    }
}

/* s[0..3] = scale * (q . k0), (q . k0 + row), ... (head_dim a multiple of 8) */
static inline void dot4(const float *q, const float *k0, int64_t row, int64_t hd, float scale,
                        float *s) {
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    for (int64_t i = 0; i < hd; i += 8) {
        const __m256 qv = _mm256_loadu_ps(q + i);
        c0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + i), c0);
        c1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + row + i), c1);
        c2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 2 * row + i), c2);
        c3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + 3 * row + i), c3);
    }
    s[0] = hsum(c0) * scale;
    s[1] = hsum(c1) * scale;
    s[2] = hsum(c2) * scale;
    s[3] = hsum(c3) * scale;
}

static inline void prefetch(const void *p, int64_t nbytes) {
    for (int64_t i = 0; i < nbytes; i += 64) _mm_prefetch((const char *)p + i, _MM_HINT_T0);
}

/* Floats a task's scratch ends with to hold K or V read from an fp16 pool as fp32: one block of
 * every KV head (attend_run), or a chunk of one KV head's keys and its values (attend_stacked);
 * 0 for an fp32 pool, which is read in place. */
static inline int64_t convert_floats(const pc_dims *D) {
    if (!D->kv_f16) return 0;
    const int64_t bs = D->block_size, chunk = bs >= 64 ? bs : 64 / bs * bs;
    const int64_t one_block = bs * D->kv_heads * D->head_dim, stacked = 2 * chunk * D->head_dim;
    return one_block > stacked ? one_block : stacked;
}

/* o [gn, 16] += sum_j w_g[j] * v[j * row .. + 16] for up to 4 query heads g (w_g rows `per`
 * floats apart), held in registers over the block's `cnt` keys. */
static inline void pv_block(const float *w0, int64_t per, int64_t gn, const float *v, int64_t row,
                            int64_t cnt, float *o, int64_t hd) {
    const float *w1 = gn > 1 ? w0 + per : w0, *w2 = gn > 2 ? w0 + 2 * per : w0;
    const float *w3 = gn > 3 ? w0 + 3 * per : w0;
    __m256 o00 = _mm256_loadu_ps(o), o01 = _mm256_loadu_ps(o + 8);
    __m256 o10 = _mm256_setzero_ps(), o11 = o10, o20 = o10, o21 = o10, o30 = o10, o31 = o10;
    if (gn > 1) o10 = _mm256_loadu_ps(o + hd), o11 = _mm256_loadu_ps(o + hd + 8);
    if (gn > 2) o20 = _mm256_loadu_ps(o + 2 * hd), o21 = _mm256_loadu_ps(o + 2 * hd + 8);
    if (gn > 3) o30 = _mm256_loadu_ps(o + 3 * hd), o31 = _mm256_loadu_ps(o + 3 * hd + 8);
    for (int64_t j = 0; j < cnt; j++, v += row) {
        const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
        __m256 w = _mm256_set1_ps(w0[j]);
        o00 = _mm256_fmadd_ps(w, v0, o00);
        o01 = _mm256_fmadd_ps(w, v1, o01);
        w = _mm256_set1_ps(w1[j]);
        o10 = _mm256_fmadd_ps(w, v0, o10);
        o11 = _mm256_fmadd_ps(w, v1, o11);
        w = _mm256_set1_ps(w2[j]);
        o20 = _mm256_fmadd_ps(w, v0, o20);
        o21 = _mm256_fmadd_ps(w, v1, o21);
        w = _mm256_set1_ps(w3[j]);
        o30 = _mm256_fmadd_ps(w, v0, o30);
        o31 = _mm256_fmadd_ps(w, v1, o31);
    }
    _mm256_storeu_ps(o, o00);
    _mm256_storeu_ps(o + 8, o01);
    if (gn > 1) _mm256_storeu_ps(o + hd, o10), _mm256_storeu_ps(o + hd + 8, o11);
    if (gn > 2) _mm256_storeu_ps(o + 2 * hd, o20), _mm256_storeu_ps(o + 2 * hd + 8, o21);
    if (gn > 3) _mm256_storeu_ps(o + 3 * hd, o30), _mm256_storeu_ps(o + 3 * hd + 8, o31);
}

/* o[0..qr) [16] (rows hd apart) += sum over keys j < cnt of p[j, 0..qr) * v_j [16], qr <= 6
 * (p rows ldp apart; key j's value row at vb[j / bs] + (j % bs) * row): twelve accumulators. */
static inline void pv_kernel(const float *p, int64_t ldp, int64_t qr, const float *const *vb,
                             int64_t bs, int64_t row, int64_t cnt, float *o, int64_t hd) {
    const int64_t i1 = qr > 1 ? 1 : 0, i2 = qr > 2 ? 2 : 0, i3 = qr > 3 ? 3 : 0;
    const int64_t i4 = qr > 4 ? 4 : 0, i5 = qr > 5 ? 5 : 0;
    __m256 c00 = _mm256_loadu_ps(o), c01 = _mm256_loadu_ps(o + 8);
    __m256 c10 = _mm256_loadu_ps(o + i1 * hd), c11 = _mm256_loadu_ps(o + i1 * hd + 8);
    __m256 c20 = _mm256_loadu_ps(o + i2 * hd), c21 = _mm256_loadu_ps(o + i2 * hd + 8);
    __m256 c30 = _mm256_loadu_ps(o + i3 * hd), c31 = _mm256_loadu_ps(o + i3 * hd + 8);
    __m256 c40 = _mm256_loadu_ps(o + i4 * hd), c41 = _mm256_loadu_ps(o + i4 * hd + 8);
    __m256 c50 = _mm256_loadu_ps(o + i5 * hd), c51 = _mm256_loadu_ps(o + i5 * hd + 8);
    for (int64_t j0 = 0, b = 0; j0 < cnt; j0 += bs, b++) {
        const int64_t end = cnt - j0 < bs ? cnt - j0 : bs;
        const float *v = vb[b];
        for (int64_t j = 0; j < end; j++, v += row, p += ldp) {
            const __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
            __m256 a = _mm256_broadcast_ss(p);
            c00 = _mm256_fmadd_ps(a, v0, c00);
            c01 = _mm256_fmadd_ps(a, v1, c01);
            a = _mm256_broadcast_ss(p + i1);
            c10 = _mm256_fmadd_ps(a, v0, c10);
            c11 = _mm256_fmadd_ps(a, v1, c11);
            a = _mm256_broadcast_ss(p + i2);
            c20 = _mm256_fmadd_ps(a, v0, c20);
            c21 = _mm256_fmadd_ps(a, v1, c21);
            a = _mm256_broadcast_ss(p + i3);
            c30 = _mm256_fmadd_ps(a, v0, c30);
            c31 = _mm256_fmadd_ps(a, v1, c31);
            a = _mm256_broadcast_ss(p + i4);
            c40 = _mm256_fmadd_ps(a, v0, c40);
            c41 = _mm256_fmadd_ps(a, v1, c41);
            a = _mm256_broadcast_ss(p + i5);
            c50 = _mm256_fmadd_ps(a, v0, c50);
            c51 = _mm256_fmadd_ps(a, v1, c51);
        }
    }
    const __m256 c[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
    for (int64_t r = 0; r < qr; r++) { /* rows past qr repeated row 0: not stored */
        _mm256_storeu_ps(o + r * hd, c[2 * r]);
        _mm256_storeu_ps(o + r * hd + 8, c[2 * r + 1]);
    }
}

/* Keys per chunk of attend_stacked: PV_KEYS rounded down to whole blocks (chunks start at block
 * edges), or one block when blocks are longer. */
#define PV_KEYS 64
static inline int64_t chunk_keys(int64_t bs) { return bs >= PV_KEYS ? bs : PV_KEYS / bs * bs; }

/* Padded query count of attend_stacked's transposed scores. */
static inline int64_t pad16(int64_t n) { return (n + 15) / 16 * 16; }

/* attend_run for many stacked queries (nq >= 8 per KV head: shared prompts, prefill tiles),
 * flash-style: the keys go chunk_keys(bs) at a time (64 for 16-token blocks), each chunk's
 * scores kept transposed, st [chunk, nqp] (nqp = nq padded to 16; 12 KB at 64 keys and 48
 * queries, in L1), so neither K nor V is
 * transposed: st = K . Qt with the queries transposed once per KV head (qt [hd, nqp],
 * pre-scaled); the softmax runs with the queries in vector lanes, against a running max (the
 * output and exp-sum so far are rescaled when it grows); then o += st^T . V. Scratch sc:
 * (chunk_keys(bs) + hd) * nqp floats; outputs as attend_run's. */
static void attend_stacked(const pc_dims *D, int64_t nq, int64_t rg, const int64_t *rhi,
                           const float *restrict q, const void *k_cache, const void *v_cache,
                           const int32_t *table, int64_t b0, int64_t b1, int64_t hi, float *pm,
                           float *pl, float *po, float *sc, float *cv) {
    const int64_t kvh = D->kv_heads, hd = D->head_dim, bs = D->block_size, row = kvh * hd;
    const int64_t lo = b0 * bs, nqp = pad16(nq), chunk = chunk_keys(bs);
    const int f16 = D->kv_f16;
    const float *kf = (const float *)k_cache, *vf = (const float *)v_cache;
    const uint16_t *kh16 = (const uint16_t *)k_cache, *vh16 = (const uint16_t *)v_cache;
    /* an fp16 pool: the chunk's keys of this KV head in cv [chunk, hd], its values after them */
    float *kc = cv, *vc = cv + chunk * hd;
    const int64_t vrow = f16 ? hd : row; /* floats between two keys' values as pv_kernel reads */
    if (hi > b1 * bs) hi = b1 * bs;
    const int64_t n = hi > lo ? hi - lo : 0;
    float *qt = sc, *st = sc + hd * nqp;
    /* masked scores: finite, since -ffast-math assumes no infinities */
    const float masked = -1e30f;
    const __m256 none_seen = _mm256_set1_ps(0.5f * masked);
    float cap[nqp], mx[nqp], sum[nqp], scale[nqp];
    int64_t least = hi;
    for (int64_t c = 0; c < nqp; c++) { /* keys j < cap[c] are visible to query c */
        const int64_t h = c >= nq ? hi : (rhi[c / rg] < hi ? rhi[c / rg] : hi);
        cap[c] = (float)(h - lo); /* the padding columns' are never read */
        least = h < least ? h : least;
    }
    for (int64_t hk = 0; hk < kvh; hk++) {
        const float *qh = q + hk * nq * hd;
        float *pmh = pm + hk * nq, *plh = pl + hk * nq, *poh = po + hk * nq * hd;
        for (int64_t d = 0; d < hd; d++)
            for (int64_t c = 0; c < nqp; c++)
                qt[d * nqp + c] = c < nq ? qh[c * hd + d] * D->scale : 0.f;
        for (int64_t c = 0; c < nqp; c++) mx[c] = masked, sum[c] = 0.f;
        for (int64_t i = 0; i < nq * hd; i++) poh[i] = 0.f;
        for (int64_t j0 = 0; j0 < n; j0 += chunk) { /* j0: a block edge */
            const int64_t cnt = n - j0 < chunk ? n - j0 : chunk;
            const float *vb[PV_KEYS];
            if (f16)
                for (int64_t j = 0, b = b0 + j0 / bs, off = 0; j < cnt; j++, off++) {
                    if (off == bs) off = 0, b++;
                    f16_to_f32(kh16 + ((int64_t)table[b] * bs + off) * row + hk * hd, kc + j * hd,
                               hd);
                }
            for (int64_t j = 0, b = b0 + j0 / bs, off = 0; j < cnt; j += 6) { /* six keys a time */
                const int64_t kr = cnt - j < 6 ? cnt - j : 6;
                const float *kp[6];
                for (int64_t r = 0; r < kr; r++, off++) {
                    if (off == bs) off = 0, b++;
                    kp[r] = f16 ? kc + (j + r) * hd
                                : kf + ((int64_t)table[b] * bs + off) * row + hk * hd;
                }
                for (int64_t c = 0; c < nqp; c += 16)
                    tile_6x16(kp, kr, qt + c, nqp, hd, st + j * nqp + c, nqp);
            }
            for (int64_t j = least - lo - j0 > 0 ? least - lo - j0 : 0; j < cnt; j++)
                for (int64_t c = 0; c < nqp; c++) /* the causal mask */
                    if ((float)(j0 + j) >= cap[c]) st[j * nqp + c] = masked;
            int rescale = 0;
            for (int64_t c = 0; c < nqp; c += 8) {
                __m256 m = _mm256_loadu_ps(mx + c), nm = m;
                for (int64_t j = 0; j < cnt; j++)
                    nm = _mm256_max_ps(nm, _mm256_loadu_ps(st + j * nqp + c));
                /* a query that has seen no key yet keeps e^(masked - 0) = 0 weights */
                const __m256 ref = _mm256_blendv_ps(nm, _mm256_setzero_ps(),
                                                    _mm256_cmp_ps(nm, none_seen, _CMP_LE_OQ));
                const __m256 alpha = exp8(_mm256_sub_ps(m, ref));
                rescale |= _mm256_movemask_ps(_mm256_cmp_ps(nm, m, _CMP_NEQ_OQ));
                __m256 l = _mm256_mul_ps(_mm256_loadu_ps(sum + c), alpha);
                for (int64_t j = 0; j < cnt; j++) {
                    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(st + j * nqp + c), ref));
                    _mm256_storeu_ps(st + j * nqp + c, e);
                    l = _mm256_add_ps(l, e);
                }
                _mm256_storeu_ps(sum + c, l);
                _mm256_storeu_ps(scale + c, alpha);
                _mm256_storeu_ps(mx + c, nm);
            }
            if (rescale && j0 > 0) /* the running max grew: rescale the output so far */
                for (int64_t c = 0; c < nq; c++)
                    for (int64_t i = 0; i < hd; i++) poh[c * hd + i] *= scale[c];
            for (int64_t b = 0; b * bs < cnt; b++) {
                const int64_t slot0 = (int64_t)table[b0 + j0 / bs + b] * bs;
                if (f16) {
                    const int64_t keys = cnt - b * bs < bs ? cnt - b * bs : bs;
                    for (int64_t j = 0; j < keys; j++)
                        f16_to_f32(vh16 + (slot0 + j) * row + hk * hd, vc + (b * bs + j) * hd, hd);
                    vb[b] = vc + b * bs * hd;
                } else {
                    vb[b] = vf + slot0 * row + hk * hd;
                }
            }
            for (int64_t c = 0; c < nq; c += 6) /* the chunk's values and weights stay in L1 */
                for (int64_t dc = 0; dc < hd; dc += 16) {
                    const float *vd[PV_KEYS]; /* chunk / bs <= PV_KEYS blocks */
                    for (int64_t b = 0; b * bs < cnt; b++) vd[b] = vb[b] + dc;
                    pv_kernel(st + c, nqp, nq - c < 6 ? nq - c : 6, vd, bs, vrow, cnt,
                              poh + c * hd + dc, hd);
                }
        }
        for (int64_t c = 0; c < nq; c++) pmh[c] = mx[c], plh[c] = sum[c];
    }
}

/* Queries q [kv_heads * nq, hd] (nq per KV head, KV head major; within a KV head, rows of rg
 * queries each) against blocks b0 .. b1 - 1 of `table`, keys below position hi, and for the
 * queries of row i below rhi[i] too (causal). Writes each query's max score pm, exp-sum pl and
 * unnormalised output po [.., hd]; sc: scratch [kv_heads * nq, per], per >= (b1 - b0) * bs. A
 * query that sees no key here gets pl = 0 (skipped by the merge). */
static void attend_run(const pc_dims *D, int64_t nq, int64_t rg, const int64_t *rhi,
                       const float *restrict q, const void *k_cache, const void *v_cache,
                       const int32_t *table, int64_t b0, int64_t b1, int64_t hi, int64_t per,
                       float *pm, float *pl, float *po, float *sc, float *cv) {
    const int64_t kvh = D->kv_heads, hd = D->head_dim, H = kvh * nq, group = nq;
    const int64_t bs = D->block_size, row = kvh * hd, lo = b0 * bs;
    const float scale = D->scale;
    const int f16 = D->kv_f16;
    const int64_t esize = f16 ? 2 : 4; /* bytes an element of the pool */
    const char *kbytes = (const char *)k_cache, *vbytes = (const char *)v_cache;
    if (hi > b1 * bs) hi = b1 * bs;
    for (int64_t i = 0; i < H * hd; i++) po[i] = 0.f;
    for (int64_t j = 0; j < H; j++) pm[j] = -INFINITY, pl[j] = 0.f;
    if (hi <= lo) return;
    for (int64_t b = b0; b < b1; b++) {
        const char *kraw = kbytes + (int64_t)table[b] * bs * row * esize;
        if (b + 1 < b1) prefetch(kbytes + (int64_t)table[b + 1] * bs * row * esize, bs * row * esize);
        const int64_t first = (b - b0) * bs, cnt = (b + 1) * bs < hi ? bs : hi - b * bs;
        if (cnt <= 0) break;
        if (f16) f16_to_f32((const uint16_t *)kraw, cv, cnt * row); /* the block as fp32 */
        const float *kb = f16 ? cv : (const float *)kraw;
        for (int64_t hq = 0; hq < H; hq++) {
            const float *qh = q + hq * hd, *kh = kb + (hq / group) * hd;
            float *s = sc + hq * per + first;
            int64_t j = 0;
            for (; j + 4 <= cnt; j += 4) dot4(qh, kh + j * row, row, hd, scale, s + j);
            for (; j < cnt; j++) {
                __m256 c = _mm256_setzero_ps();
                for (int64_t i = 0; i < hd; i += 8)
                    c = _mm256_fmadd_ps(_mm256_loadu_ps(qh + i), _mm256_loadu_ps(kh + j * row + i), c);
                s[j] = hsum(c) * scale;
            }
        }
    }
    const int64_t n = hi - lo;
    for (int64_t hq = 0; hq < H; hq++) {
        const int64_t cap = rhi[(hq % nq) / rg] - lo;
        const int64_t seen = cap < n ? (cap > 0 ? cap : 0) : n;
        float *s = sc + hq * per, m = -INFINITY, l = 0.f;
        for (int64_t j = 0; j < seen; j++) m = s[j] > m ? s[j] : m;
        if (seen > 0) l = exp_sub_sum(s, seen, m);
        for (int64_t j = seen; j < n; j++) s[j] = 0.f; /* masked: no weight in the PV pass */
        pm[hq] = m;
        pl[hq] = l;
    }
    for (int64_t b = b0; b < b1; b++) {
        const char *vraw = vbytes + (int64_t)table[b] * bs * row * esize;
        if (b + 1 < b1) prefetch(vbytes + (int64_t)table[b + 1] * bs * row * esize, bs * row * esize);
        const int64_t first = (b - b0) * bs, cnt = (b + 1) * bs < hi ? bs : hi - b * bs;
        if (cnt <= 0) break;
        if (f16) f16_to_f32((const uint16_t *)vraw, cv, cnt * row);
        const float *vb = f16 ? cv : (const float *)vraw;
        for (int64_t hk = 0; hk < kvh; hk++)
            for (int64_t gc = 0; gc < group; gc += 4) {
                const int64_t gn = group - gc < 4 ? group - gc : 4, hq = hk * group + gc;
                for (int64_t dc = 0; dc < hd; dc += 16)
                    pv_block(sc + hq * per + first, per, gn, vb + hk * hd + dc, row, cnt,
                             po + hq * hd + dc, hd);
            }
    }
}

/* Floats of scratch one task of R rows over nblocks blocks needs (see attention). */
int64_t pc_task_scratch_floats(const pc_dims *D, int64_t R, int64_t nblocks) {
    const int64_t Hv = D->heads * R, n = nblocks * D->block_size, nq = Hv / D->kv_heads;
    const int64_t chunk = chunk_keys(D->block_size);
    const int64_t scores = nq >= 8 ? (chunk + D->head_dim) * pad16(nq) : Hv * n;
    return Hv * (D->head_dim + 2 + D->head_dim) + scores + convert_floats(D);
}

/* out [M, heads * hd] for the rows' queries (row m at q + m * q_stride) by `plan`. Each thread
 * runs tasks in its own task_floats of `work`; the parts follow at nthreads * task_floats.
 * wanted: NULL for every row, else a byte per row, 0 where its output is not needed: a task
 * none of whose rows is wanted is skipped and such rows are not merged (their out rows are left
 * as they were). A wanted row's tasks run as they would for every row, so its output is the
 * same bits. */
static void attention(const pc_dims *D, int64_t M, const float *q, int64_t q_stride,
                      const void *k_cache, const void *v_cache, const int32_t *tables,
                      int64_t table_stride, const pc_attn_plan *P, float *restrict out,
                      float *restrict work, const uint8_t *wanted) {
    const int64_t hd = D->head_dim, H = D->heads, kvh = D->kv_heads, group = H / kvh;
    float *parts = work + D->nthreads * P->task_floats; /* [num_parts, H, 2 + hd] */
#pragma omp parallel num_threads(D->nthreads)
    {
        float *qb = work + omp_get_thread_num() * P->task_floats;
        float *cv = qb + P->task_floats - convert_floats(D); /* fp16 K/V read as fp32 */
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < P->num_tasks; t++) {
            const int64_t r0 = P->rows_start[t], R = P->rows_start[t + 1] - r0, nq = R * group;
            if (wanted) {
                int64_t any = 0;
                for (int64_t i = 0; i < R && !any; i++) any = wanted[P->task_rows[r0 + i]];
                if (!any) continue;
            }
            const int64_t Hv = H * R, per = (P->b1[t] - P->b0[t]) * D->block_size;
            float *pm = qb + Hv * hd, *pl = pm + Hv, *po = pl + Hv, *sc = po + Hv * hd;
            for (int64_t i = 0; i < R; i++) /* [kv_heads, rows, group, hd]: each KV head's */
                for (int64_t hk = 0; hk < kvh; hk++)
                    for (int64_t g = 0; g < group; g++) {
                        const float *src =
                            q + P->task_rows[r0 + i] * q_stride + (hk * group + g) * hd;
                        float *dst = qb + (hk * nq + i * group + g) * hd;
                        for (int64_t j = 0; j < hd; j++) dst[j] = src[j];
                    }
            const int32_t *table = tables + P->table_row[t] * table_stride;
            if (nq >= 8)
                attend_stacked(D, nq, group, P->row_hi + r0, qb, k_cache, v_cache, table, P->b0[t],
                               P->b1[t], P->hi[t], pm, pl, po, sc, cv);
            else
                attend_run(D, nq, group, P->row_hi + r0, qb, k_cache, v_cache, table, P->b0[t],
                           P->b1[t], P->hi[t], per, pm, pl, po, sc, cv);
            for (int64_t i = 0; i < R; i++) {
                float *part = parts + P->part_of[r0 + i] * H * (2 + hd);
                for (int64_t hk = 0; hk < kvh; hk++)
                    for (int64_t g = 0; g < group; g++) {
                        const int64_t v = hk * nq + i * group + g, hq = hk * group + g;
                        float *dst = part + hq * (2 + hd);
                        dst[0] = pm[v];
                        dst[1] = pl[v];
                        for (int64_t j = 0; j < hd; j++) dst[2 + j] = po[v * hd + j];
                    }
            }
        }
#pragma omp for schedule(static)
        for (int64_t m = 0; m < M; m++)
            for (int64_t hq = 0; hq < H && (!wanted || wanted[m]); hq++) {
                const int64_t p0 = P->parts_start[m], p1 = P->parts_start[m + 1];
                float mx = -INFINITY, l = 0.f;
                for (int64_t p = p0; p < p1; p++) {
                    const float *part = parts + P->row_parts[p] * H * (2 + hd) + hq * (2 + hd);
                    mx = part[1] != 0.f && part[0] > mx ? part[0] : mx;
                }
                float *o = out + m * H * hd + hq * hd;
                for (int64_t i = 0; i < hd; i++) o[i] = 0.f;
                for (int64_t p = p0; p < p1; p++) {
                    const float *part = parts + P->row_parts[p] * H * (2 + hd) + hq * (2 + hd);
                    if (part[1] == 0.f) continue; /* no key of this part is visible */
                    const float w = expf(part[0] - mx);
                    l += w * part[1];
                    for (int64_t i = 0; i < hd; i++) o[i] += w * part[2 + i];
                }
                for (int64_t i = 0; i < hd; i++) o[i] /= l;
            }
    }
}

/* x [n] += t [n] (the residual), on OpenMP threads from 32 rows' worth */
static void add_rows(float *restrict x, const float *restrict t, int64_t n, int nt) {
#pragma omp parallel for num_threads(nt) schedule(static) if (n >= 32 * 512)
    for (int64_t i = 0; i < n; i++) x[i] += t[i];
}

/* The most inputs a product of the layer has (hidden, heads * head_dim or inter). */
static inline int64_t widest_input(const pc_dims *D) {
    const int64_t q = D->heads * D->head_dim, w = D->hidden > D->inter ? D->hidden : D->inter;
    return w > q ? w : q;
}

/* The most rows pc_forward's MLP (gate/up, SwiGLU, down) runs at once: a call of more rows runs
 * it over as few row blocks of at most this many as it can, each a multiple of 8 rows but the
 * last (256 rows: 4 x 64; 218: 3 x 56 + 50; 65: 40 + 25), so its gate/up outputs (2 * inter
 * floats a row, half of a row's scratch for SmolLM2) and the down product's int16 inputs are
 * sized for a block, not for every row. Each row's products are the same bits whatever rows
 * share its call (row-invariant numerics), so the blocks change no output; a block of 8 rows or
 * more fills whole register tiles of the products (PANEL_TILE_ROWS, VNNI_TILE_MAX). */
#define MLP_TILE_ROWS 64

/* Rows of pc_forward's largest MLP block for M rows. */
static inline int64_t mlp_tile_rows(int64_t M) { return M < MLP_TILE_ROWS ? M : MLP_TILE_ROWS; }

/* Floats of scratch pc_forward needs for M rows besides the attention's (plan-sized): h, tmp,
 * qkv and att for every row, gate/up outputs for an MLP block, and the products' quantised
 * inputs (every row's for q/k/v and o, a block's for gate/up and down). */
int64_t pc_scratch_floats(const pc_dims *D, int64_t M) {
    const int64_t q = D->heads * D->head_dim, kv = D->kv_heads * D->head_dim;
    const int64_t T = mlp_tile_rows(M), attn_in = D->hidden > q ? D->hidden : q;
    const int64_t qb_all = matmul_scratch_floats(attn_in, M);
    const int64_t qb_tile = matmul_scratch_floats(widest_input(D), T);
    return M * (2 * D->hidden + (q + 2 * kv) + q) + T * 2 * D->inter +
           (qb_all > qb_tile ? qb_all : qb_tile);
}

/* Run every layer for M new tokens. x [M, hidden]: their embeddings in; out: the last layer's
 * outputs (before the final norm) of the rows keep[0 .. nkeep), ascending (all M when nkeep is
 * M; keep is then not read), in
 * x's first rows: the last layer's o projection and MLP run for those rows only, and its
 * attention only for the plan's tasks that hold one of them (the tasks run as for every row, so
 * the kept rows' outputs are the same bits). cos / ssin [M,
 * head_dim]: RotaryEmbedding's (cos, signed_sin) rows of their positions. slots [M]: where their
 * K/V go (every row's are stored before any row attends, so a prefill chunk's tokens see each
 * other). tables [*, table_stride] int32: the sequences' block ids; plan: what each row attends
 * to. scratch: pc_scratch_floats(D, M) floats, then the plan's. Loops over rows run on OpenMP
 * threads from 32 rows. */
void pc_forward(const pc_layer *layers, int64_t num_layers, const pc_dims *D, int64_t M,
                float *x, const float *cos, const float *ssin, const int64_t *slots,
                const int32_t *tables, int64_t table_stride, const pc_attn_plan *plan,
                const int64_t *keep, int64_t nkeep, float *scratch) {
    const int64_t hid = D->hidden, hd = D->head_dim, qn = D->heads * hd, kvn = D->kv_heads * hd;
    const int64_t inter = D->inter, qkvn = qn + 2 * kvn;
    const int nt = D->nthreads;
    float *h = scratch, *tmp = h + M * hid, *qkv = tmp + M * hid, *att = qkv + M * qkvn;
    float *gu = att + M * qn, *qbuf = gu + mlp_tile_rows(M) * 2 * inter;
    float *work = scratch + pc_scratch_floats(D, M);
    uint8_t wanted[nkeep < M ? M : 1]; /* the last layer's rows whose attention is needed */
    memset(wanted, 0, sizeof wanted);
    for (int64_t L = 0; L < num_layers; L++) {
        const pc_layer *ly = layers + L;
#pragma omp parallel for num_threads(nt) schedule(static) if (M >= 32)
        for (int64_t m = 0; m < M; m++) rms_norm(x + m * hid, ly->ln1, h + m * hid, hid, D->eps);
        matmul(&ly->qkv, h, hid, qkv, M, qbuf, nt);
#pragma omp parallel for num_threads(nt) schedule(static) if (M >= 32)
        for (int64_t m = 0; m < M; m++) {
            float *r = qkv + m * qkvn;
            rope(r, D->heads + D->kv_heads, hd, cos + m * hd, ssin + m * hd);
            if (D->kv_f16) {
                f32_to_f16(r + qn, (uint16_t *)ly->k_cache + slots[m] * kvn, kvn);
                f32_to_f16(r + qn + kvn, (uint16_t *)ly->v_cache + slots[m] * kvn, kvn);
            } else {
                float *kd = (float *)ly->k_cache + slots[m] * kvn;
                float *vd = (float *)ly->v_cache + slots[m] * kvn;
                for (int64_t i = 0; i < kvn; i++) kd[i] = r[qn + i], vd[i] = r[qn + kvn + i];
            }
        }
        const int last = L == num_layers - 1 && nkeep < M;
        if (last) /* the attention of the kept rows only: the other rows' outputs go unused */
            for (int64_t i = 0; i < nkeep; i++) wanted[keep[i]] = 1;
        attention(D, M, qkv, qkvn, ly->k_cache, ly->v_cache, tables, table_stride, plan, att, work,
                  last ? wanted : NULL);
        if (last) { /* only the kept rows go on */
            for (int64_t i = 0; i < nkeep; i++) {
                const int64_t m = keep[i]; /* ascending: row i's source is at or after it */
                for (int64_t j = 0; j < qn; j++) att[i * qn + j] = att[m * qn + j];
                for (int64_t j = 0; j < hid; j++) x[i * hid + j] = x[m * hid + j];
            }
            M = nkeep;
        }
        matmul(&ly->o, att, qn, tmp, M, qbuf, nt);
        add_rows(x, tmp, M * hid, nt);
#pragma omp parallel for num_threads(nt) schedule(static) if (M >= 32)
        for (int64_t m = 0; m < M; m++) rms_norm(x + m * hid, ly->ln2, h + m * hid, hid, D->eps);
        /* the MLP over row blocks of at most MLP_TILE_ROWS (see there); tmp keeps every row's
         * down output, added to x once all blocks ran */
        const int64_t tiles = (M + MLP_TILE_ROWS - 1) / MLP_TILE_ROWS; /* 0 for no kept row */
        const int64_t T = tiles ? ((M + tiles - 1) / tiles + 7) / 8 * 8 : 1; /* <= the most */
        for (int64_t m0 = 0; m0 < M; m0 += T) {
            const int64_t R = M - m0 < T ? M - m0 : T;
            matmul(&ly->gate_up, h + m0 * hid, hid, gu, R, qbuf, nt);
            /* silu(g) * u of each row in place over its gate half [inter] */
#pragma omp parallel for num_threads(nt) schedule(static) if (R >= 32)
            for (int64_t m = 0; m < R; m++) {
                float *g = gu + m * 2 * inter;
                int64_t i = 0;
                for (; i + 8 <= inter; i += 8) {
                    const __m256 gv = _mm256_loadu_ps(g + i);
                    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), gv));
                    const __m256 sig = _mm256_div_ps(gv, _mm256_add_ps(_mm256_set1_ps(1.f), e));
                    _mm256_storeu_ps(g + i, _mm256_mul_ps(sig, _mm256_loadu_ps(g + inter + i)));
                }
                for (; i < inter; i++) g[i] = g[i] / (1.f + expf(-g[i])) * g[inter + i];
            }
            /* the gate halves, in place */
            matmul(&ly->down, gu, 2 * inter, tmp + m0 * hid, R, qbuf, nt);
        }
        add_rows(x, tmp, M * hid, nt);
    }
}

/* An int4 weight in the kernel's layout from its dequantised values [n, k] and the grid's
 * scale / zero [n, k / 32] (w = (q - 8) * scale + zero; fp32 holding bf16 values, whose upper
 * 16 bits dm keeps): q = round((w - zero) / scale) + 8, clamped to 0..15 (values sit within a
 * rounding of their grid point, far from a .5), and dm = (scale, zero) as bf16. One pass,
 * OpenMP over rows. */
void pc_pack_q4(const float *values, const float *scale, const float *zero, int64_t n,
                int64_t k, uint8_t *qs, uint16_t *dm, int32_t nthreads) {
    const int64_t ng = k / 32;
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t r = 0; r < n; r++)
        for (int64_t g = 0; g < ng; g++) {
            const int64_t i = r * ng + g;
            const float sc = scale[i], z = zero[i], *v = values + r * k + 32 * g;
            uint8_t q[32];
            for (int j = 0; j < 32; j++) {
                float t = nearbyintf((v[j] - z) / sc) + 8.f;
                t = t < 0.f ? 0.f : (t > 15.f ? 15.f : t);
                q[j] = (uint8_t)t;
            }
            for (int j = 0; j < 16; j++) qs[i * 16 + j] = (uint8_t)(q[j] | (q[j + 16] << 4));
            uint32_t bits[2];
            __builtin_memcpy(&bits[0], &sc, 4);
            __builtin_memcpy(&bits[1], &z, 4);
            dm[2 * i] = (uint16_t)(bits[0] >> 16);
            dm[2 * i + 1] = (uint16_t)(bits[1] >> 16);
        }
}

/* The panels (pq, pdm; see pc_q4) of the weight pc_pack_q4 packed as qs, dm [n, k]. */
void pc_pack_q4_panels(const uint8_t *qs, const uint16_t *dm, int64_t n, int64_t k, uint8_t *pq,
                       uint16_t *pdm, int32_t nthreads) {
    const int64_t ng = k / 32;
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t c = 0; c < n; c += 16) {
        for (int64_t s = 0; s < k / 2; s++)
            for (int64_t b = 0; b < 16; b++) {
                uint8_t v[2];
                for (int64_t h = 0; h < 2; h++) { /* row c + b / 2, then c + 8 + b / 2 */
                    const int64_t r = c + b / 2 + 8 * h, j = 2 * s + b % 2, g = j / 32, e = j % 32;
                    const uint8_t q = qs[(r * ng + g) * 16 + e % 16];
                    v[h] = e < 16 ? q & 15 : q >> 4;
                }
                pq[(c / 16 * (k / 2) + s) * 16 + b] = (uint8_t)(v[0] | (v[1] << 4));
            }
        for (int64_t g = 0; g < ng; g++)
            for (int64_t t = 0; t < 16; t++) {
                const int64_t i = (c + t) * ng + g;
                uint16_t *o = pdm + (c / 16 * ng + g) * 32;
                o[t] = dm[2 * i];
                o[16 + t] = dm[2 * i + 1];
            }
    }
}

/* The forward pass's two kernels on their own, for tests: y = x W^T (as pc_forward picks the
 * kernel for M rows), and one layer's attention. */
void pc_matmul(const pc_dims *D, const pc_q4 *w, const float *x, float *y, int64_t M,
               float *scratch) {
    matmul(w, x, w->k, y, M, scratch, D->nthreads);
}

/* Floats of scratch pc_matmul needs for M rows of k inputs. */
int64_t pc_matmul_scratch_floats(int64_t k, int64_t M) { return matmul_scratch_floats(k, M); }

void pc_paged_attention(const pc_dims *D, int64_t M, const float *q, const void *k_cache,
                        const void *v_cache, const int32_t *tables, int64_t table_stride,
                        const pc_attn_plan *plan, float *out, float *work) {
    attention(D, M, q, D->heads * D->head_dim, k_cache, v_cache, tables, table_stride, plan, out,
              work, NULL);
}
