/* One decode step of a Llama-architecture decoder (one new token for each of M sequences) on an
 * x86-64 CPU with AVX2 and FMA: every decoder layer (RMSNorm, int4 q/k/v, RoPE, KV store, paged
 * attention, o, RMSNorm, int4 gate/up, SwiGLU, down) in one call, fp32 activations throughout.
 *
 * Why it exists: at batch 1 the torch path makes about 1,400 aten calls a step, and torch's CPU
 * int4 kernel and flash attention are slow at decode shapes; see engine/cpu_decode/__init__.py
 * and docs/engine.md ("Fused CPU decode") for the design and the measurements.
 *
 * Built by library.py with the system C compiler (-O3 -mavx2 -mfma -ffast-math -fopenmp);
 * loaded with ctypes. Every pointer is to contiguous memory in the layout given below. */
#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* An int4 weight [n, k] (k a multiple of 32): w[r, 32 b + j] = d * q + m with q in 0..15.
 * qs [n, k / 2]: byte 16 b + j of row r holds q of element 32 b + j in its low nibble and of
 * element 32 b + 16 + j in its high nibble. dm [n, k / 32, 2] fp32: (d, m) of each group. */
typedef struct {
    const uint8_t *qs;
    const float *dm;
    int64_t n, k;
} pc_q4;

/* One decoder layer. k_cache / v_cache: the layer's pool, [num_slots, kv_heads, head_dim] fp32
 * (slot = block_id * block_size + offset). */
typedef struct {
    const float *ln1, *ln2; /* [hidden] RMSNorm weights (input, post-attention) */
    pc_q4 qkv, o, gate_up, down;
    float *k_cache, *v_cache;
} pc_layer;

/* Model sizes; head_dim a multiple of 16, heads a multiple of kv_heads. */
typedef struct {
    int64_t hidden, heads, kv_heads, head_dim, inter, block_size;
    float eps, scale;
    int32_t nthreads;
} pc_dims;

/* Which keys each row attends to, as tasks (built by fused.py's attention_plan, the same for
 * every layer of a step). Task t reads blocks b0[t] .. b1[t] - 1 of row table_row[t]'s block
 * table, keys below position hi[t], for the rows task_rows[rows_start[t] .. rows_start[t+1]]
 * with their queries stacked: several rows when they hold those blocks in common (a shared
 * prompt: its K/V are read once for all of them), else one. Each (task, row) writes one
 * partial result, part part_of[rows_start[t] + i]; row m's output merges its parts
 * row_parts[parts_start[m] .. parts_start[m+1]] by log-sum-exp. Offsets are in floats into
 * the attention scratch: task t's at scratch_of[t], the parts' at parts_at. */
typedef struct {
    int64_t num_tasks;
    const int64_t *rows_start, *task_rows, *part_of, *table_row, *b0, *b1, *hi, *scratch_of;
    const int64_t *parts_start, *row_parts;
    int64_t parts_at;
} pc_attn_plan;

/* 1 if this CPU runs the AVX2 + FMA code below. */
int pc_cpu_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static inline __m256 u8x8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* sum over one group of q[j] * x[j] (32 products, 8 lanes; d and m applied by the caller) */
static inline __m256 q4_group_dot(const uint8_t *qs, const float *x, __m128i mask) {
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    const __m128i lo = _mm_and_si128(raw, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
    __m256 s = _mm256_mul_ps(u8x8_to_ps(lo), _mm256_loadu_ps(x));
    __m256 t = _mm256_mul_ps(u8x8_to_ps(_mm_srli_si128(lo, 8)), _mm256_loadu_ps(x + 8));
    s = _mm256_fmadd_ps(u8x8_to_ps(hi), _mm256_loadu_ps(x + 16), s);
    t = _mm256_fmadd_ps(u8x8_to_ps(_mm_srli_si128(hi, 8)), _mm256_loadu_ps(x + 24), t);
    return _mm256_add_ps(s, t);
}

/* y [n] = W x [k]: sum over groups of d * (q . x_group) + m * sum(x_group). Rows go four at a
 * time (four independent FMA chains); xsum: scratch [k / 32]. */
static void q4_gemv(const pc_q4 *w, const float *restrict x, float *restrict y,
                    float *restrict xsum, int nthreads) {
    const int64_t ng = w->k / 32, n = w->n, quads = n / 4;
    for (int64_t g = 0; g < ng; g++) {
        float s = 0.f;
        for (int j = 0; j < 32; j++) s += x[32 * g + j];
        xsum[g] = s;
    }
    const uint8_t *qs = w->qs;
    const float *dm = w->dm;
#pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t r4 = 0; r4 < quads; r4++) {
        const __m128i mask = _mm_set1_epi8(15);
        const int64_t r = 4 * r4;
        const uint8_t *q = qs + r * ng * 16;
        const float *p = dm + r * ng * 2;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        float m0 = 0.f, m1 = 0.f, m2 = 0.f, m3 = 0.f;
        for (int64_t g = 0; g < ng; g++) {
            const float *xg = x + 32 * g;
            const int64_t g1 = ng + g, g2 = 2 * ng + g, g3 = 3 * ng + g;
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[2 * g]), q4_group_dot(q + 16 * g, xg, mask), a0);
            a1 = _mm256_fmadd_ps(_mm256_set1_ps(p[2 * g1]), q4_group_dot(q + 16 * g1, xg, mask), a1);
            a2 = _mm256_fmadd_ps(_mm256_set1_ps(p[2 * g2]), q4_group_dot(q + 16 * g2, xg, mask), a2);
            a3 = _mm256_fmadd_ps(_mm256_set1_ps(p[2 * g3]), q4_group_dot(q + 16 * g3, xg, mask), a3);
            m0 += p[2 * g + 1] * xsum[g];
            m1 += p[2 * g1 + 1] * xsum[g];
            m2 += p[2 * g2 + 1] * xsum[g];
            m3 += p[2 * g3 + 1] * xsum[g];
        }
        y[r] = hsum(a0) + m0;
        y[r + 1] = hsum(a1) + m1;
        y[r + 2] = hsum(a2) + m2;
        y[r + 3] = hsum(a3) + m3;
    }
    const __m128i mask = _mm_set1_epi8(15);
    for (int64_t r = 4 * quads; r < n; r++) {
        __m256 a = _mm256_setzero_ps();
        float m = 0.f;
        for (int64_t g = 0; g < ng; g++) {
            const int64_t i = r * ng + g;
            a = _mm256_fmadd_ps(_mm256_set1_ps(dm[2 * i]), q4_group_dot(qs + 16 * i, x + 32 * g, mask), a);
            m += dm[2 * i + 1] * xsum[g];
        }
        y[r] = hsum(a) + m;
    }
}

/* y [M, n] = x [M, k] W^T for M >= 2 rows: each thread dequantises four weight rows into an
 * L1-resident fp32 buffer, then multiplies every activation row by them, two rows at a time
 * (eight FMA chains: the products, not the unpacking, take the time). */
static void q4_gemm(const pc_q4 *w, const float *restrict x, float *restrict y, int64_t M,
                    int nthreads) {
    const int64_t ng = w->k / 32, n = w->n, k = w->k, quads = (n + 3) / 4;
#pragma omp parallel num_threads(nthreads)
    {
        float wbuf[4 * k];
#pragma omp for schedule(static)
        for (int64_t r4 = 0; r4 < quads; r4++) {
            const __m128i mask = _mm_set1_epi8(15);
            const int64_t r = 4 * r4, nr = n - r < 4 ? n - r : 4;
            for (int64_t i = 0; i < 4; i++) {
                float *dst = wbuf + i * k;
                if (i >= nr) { /* a partial quad: zero rows, never stored */
                    for (int64_t j = 0; j < k; j++) dst[j] = 0.f;
                    continue;
                }
                const uint8_t *q = w->qs + (r + i) * ng * 16;
                const float *p = w->dm + (r + i) * ng * 2;
                for (int64_t g = 0; g < ng; g++) {
                    const __m128i raw = _mm_loadu_si128((const __m128i *)(q + 16 * g));
                    const __m128i lo = _mm_and_si128(raw, mask);
                    const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
                    const __m256 d = _mm256_set1_ps(p[2 * g]), m = _mm256_set1_ps(p[2 * g + 1]);
                    float *o = dst + 32 * g;
                    _mm256_storeu_ps(o, _mm256_fmadd_ps(u8x8_to_ps(lo), d, m));
                    _mm256_storeu_ps(o + 8, _mm256_fmadd_ps(u8x8_to_ps(_mm_srli_si128(lo, 8)), d, m));
                    _mm256_storeu_ps(o + 16, _mm256_fmadd_ps(u8x8_to_ps(hi), d, m));
                    _mm256_storeu_ps(o + 24, _mm256_fmadd_ps(u8x8_to_ps(_mm_srli_si128(hi, 8)), d, m));
                }
            }
            const float *w0 = wbuf, *w1 = wbuf + k, *w2 = wbuf + 2 * k, *w3 = wbuf + 3 * k;
            int64_t a = 0;
            for (; a + 2 <= M; a += 2) {
                const float *x0 = x + a * k, *x1 = x0 + k;
                __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00;
                __m256 c10 = c00, c11 = c00, c12 = c00, c13 = c00;
                for (int64_t j = 0; j < k; j += 8) {
                    const __m256 u = _mm256_loadu_ps(x0 + j), v = _mm256_loadu_ps(x1 + j);
                    const __m256 b0 = _mm256_loadu_ps(w0 + j), b1 = _mm256_loadu_ps(w1 + j);
                    const __m256 b2 = _mm256_loadu_ps(w2 + j), b3 = _mm256_loadu_ps(w3 + j);
                    c00 = _mm256_fmadd_ps(u, b0, c00);
                    c01 = _mm256_fmadd_ps(u, b1, c01);
                    c02 = _mm256_fmadd_ps(u, b2, c02);
                    c03 = _mm256_fmadd_ps(u, b3, c03);
                    c10 = _mm256_fmadd_ps(v, b0, c10);
                    c11 = _mm256_fmadd_ps(v, b1, c11);
                    c12 = _mm256_fmadd_ps(v, b2, c12);
                    c13 = _mm256_fmadd_ps(v, b3, c13);
                }
                const float s0[4] = {hsum(c00), hsum(c01), hsum(c02), hsum(c03)};
                const float s1[4] = {hsum(c10), hsum(c11), hsum(c12), hsum(c13)};
                for (int64_t i = 0; i < nr; i++) y[a * n + r + i] = s0[i], y[(a + 1) * n + r + i] = s1[i];
            }
            for (; a < M; a++) {
                const float *x0 = x + a * k;
                __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
                for (int64_t j = 0; j < k; j += 8) {
                    const __m256 u = _mm256_loadu_ps(x0 + j);
                    c0 = _mm256_fmadd_ps(u, _mm256_loadu_ps(w0 + j), c0);
                    c1 = _mm256_fmadd_ps(u, _mm256_loadu_ps(w1 + j), c1);
                    c2 = _mm256_fmadd_ps(u, _mm256_loadu_ps(w2 + j), c2);
                    c3 = _mm256_fmadd_ps(u, _mm256_loadu_ps(w3 + j), c3);
                }
                const float s0[4] = {hsum(c0), hsum(c1), hsum(c2), hsum(c3)};
                for (int64_t i = 0; i < nr; i++) y[a * n + r + i] = s0[i];
            }
        }
    }
}

/* y [M, n] = x [M, k] W^T: the matrix-vector kernel for one row, the GEMM for more. */
static void q4_matmul(const pc_q4 *w, const float *x, float *y, int64_t M, float *xsum,
                      int nthreads) {
    if (M == 1)
        q4_gemv(w, x, y, xsum, nthreads);
    else
        q4_gemm(w, x, y, M, nthreads);
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

static inline void prefetch(const float *p, int64_t nfloats) {
    for (int64_t i = 0; i < nfloats; i += 16) _mm_prefetch((const char *)(p + i), _MM_HINT_T0);
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

/* Scores of nq queries q [nq, hd] (one KV head's, stacked) against one block's cnt <= 16 keys
 * (rows `row` floats apart): sc [nq rows `per` apart] = scale * q k^T. The block is transposed
 * once into kt [hd, 16] so that each query's 16 scores are two vectors of FMAs over hd (no
 * horizontal sums): worth it for many queries (stacked rows), not for one row's few. */
static void qk_block_stacked(const float *restrict q, int64_t nq, const float *k, int64_t row,
                             int64_t cnt, int64_t hd, float scale, float *sc, int64_t per) {
    float kt[hd * 16];
    for (int64_t d = 0; d < hd; d++)
        for (int64_t t = 0; t < 16; t++) kt[d * 16 + t] = t < cnt ? k[t * row + d] : 0.f;
    const __m256 vs = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 4 <= nq; i += 4) {
        const float *q0 = q + i * hd, *q1 = q0 + hd, *q2 = q1 + hd, *q3 = q2 + hd;
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00;
        __m256 a20 = a00, a21 = a00, a30 = a00, a31 = a00;
        for (int64_t d = 0; d < hd; d++) {
            const __m256 k0 = _mm256_loadu_ps(kt + d * 16), k1 = _mm256_loadu_ps(kt + d * 16 + 8);
            __m256 b = _mm256_broadcast_ss(q0 + d);
            a00 = _mm256_fmadd_ps(b, k0, a00);
            a01 = _mm256_fmadd_ps(b, k1, a01);
            b = _mm256_broadcast_ss(q1 + d);
            a10 = _mm256_fmadd_ps(b, k0, a10);
            a11 = _mm256_fmadd_ps(b, k1, a11);
            b = _mm256_broadcast_ss(q2 + d);
            a20 = _mm256_fmadd_ps(b, k0, a20);
            a21 = _mm256_fmadd_ps(b, k1, a21);
            b = _mm256_broadcast_ss(q3 + d);
            a30 = _mm256_fmadd_ps(b, k0, a30);
            a31 = _mm256_fmadd_ps(b, k1, a31);
        }
        float tmp[4][16];
        _mm256_storeu_ps(tmp[0], _mm256_mul_ps(a00, vs));
        _mm256_storeu_ps(tmp[0] + 8, _mm256_mul_ps(a01, vs));
        _mm256_storeu_ps(tmp[1], _mm256_mul_ps(a10, vs));
        _mm256_storeu_ps(tmp[1] + 8, _mm256_mul_ps(a11, vs));
        _mm256_storeu_ps(tmp[2], _mm256_mul_ps(a20, vs));
        _mm256_storeu_ps(tmp[2] + 8, _mm256_mul_ps(a21, vs));
        _mm256_storeu_ps(tmp[3], _mm256_mul_ps(a30, vs));
        _mm256_storeu_ps(tmp[3] + 8, _mm256_mul_ps(a31, vs));
        for (int64_t r = 0; r < 4; r++)
            for (int64_t t = 0; t < cnt; t++) sc[(i + r) * per + t] = tmp[r][t];
    }
    for (; i < nq; i++) {
        const float *q0 = q + i * hd;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        for (int64_t d = 0; d < hd; d++) {
            const __m256 b = _mm256_broadcast_ss(q0 + d);
            a0 = _mm256_fmadd_ps(b, _mm256_loadu_ps(kt + d * 16), a0);
            a1 = _mm256_fmadd_ps(b, _mm256_loadu_ps(kt + d * 16 + 8), a1);
        }
        float tmp[16];
        _mm256_storeu_ps(tmp, _mm256_mul_ps(a0, vs));
        _mm256_storeu_ps(tmp + 8, _mm256_mul_ps(a1, vs));
        for (int64_t t = 0; t < cnt; t++) sc[i * per + t] = tmp[t];
    }
}

/* Queries q [kv_heads * nq, hd] (nq per KV head, KV head major) against blocks b0 .. b1 - 1 of
 * `table`, keys below position hi. Writes each query's max score pm, exp-sum pl and
 * unnormalised output po [.., hd]; sc: scratch [kv_heads * nq, per], per >= (b1 - b0) * bs. An
 * empty run leaves pl = 0 (skipped by the merge). */
static void attend_run(const pc_dims *D, int64_t nq, const float *restrict q, const float *k_cache,
                       const float *v_cache, const int32_t *table, int64_t b0, int64_t b1,
                       int64_t hi, int64_t per, float *pm, float *pl, float *po, float *sc) {
    const int64_t kvh = D->kv_heads, hd = D->head_dim, H = kvh * nq, group = nq;
    const int64_t bs = D->block_size, row = kvh * hd, lo = b0 * bs;
    const float scale = D->scale;
    if (hi > b1 * bs) hi = b1 * bs;
    for (int64_t i = 0; i < H * hd; i++) po[i] = 0.f;
    for (int64_t j = 0; j < H; j++) pm[j] = -INFINITY, pl[j] = 0.f;
    if (hi <= lo) return;
    for (int64_t b = b0; b < b1; b++) {
        const float *kb = k_cache + (int64_t)table[b] * bs * row;
        if (b + 1 < b1) prefetch(k_cache + (int64_t)table[b + 1] * bs * row, bs * row);
        const int64_t first = (b - b0) * bs, cnt = (b + 1) * bs < hi ? bs : hi - b * bs;
        if (cnt <= 0) break;
        if (group >= 8 && bs <= 16) { /* many stacked queries: the transposed block */
            for (int64_t hk = 0; hk < kvh; hk++)
                qk_block_stacked(q + hk * group * hd, group, kb + hk * hd, row, cnt, hd, scale,
                                 sc + hk * group * per + first, per);
            continue;
        }
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
        float *s = sc + hq * per, m = -INFINITY, l = 0.f;
        for (int64_t j = 0; j < n; j++) m = s[j] > m ? s[j] : m;
        for (int64_t j = 0; j < n; j++) {
            s[j] = expf(s[j] - m);
            l += s[j];
        }
        pm[hq] = m;
        pl[hq] = l;
    }
    for (int64_t b = b0; b < b1; b++) {
        const float *vb = v_cache + (int64_t)table[b] * bs * row;
        if (b + 1 < b1) prefetch(v_cache + (int64_t)table[b + 1] * bs * row, bs * row);
        const int64_t first = (b - b0) * bs, cnt = (b + 1) * bs < hi ? bs : hi - b * bs;
        if (cnt <= 0) break;
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
    const int64_t Hv = D->heads * R;
    return Hv * (D->head_dim + 2 + D->head_dim + nblocks * D->block_size);
}

/* out [M, heads * hd] for the rows' queries (row m at q + m * q_stride) by `plan`. */
static void attention(const pc_dims *D, int64_t M, const float *q, int64_t q_stride,
                      const float *k_cache, const float *v_cache, const int32_t *tables,
                      int64_t table_stride, const pc_attn_plan *P, float *restrict out,
                      float *restrict work) {
    const int64_t hd = D->head_dim, H = D->heads, kvh = D->kv_heads, group = H / kvh;
    float *parts = work + P->parts_at; /* [num_parts, H, 2 + hd]: max, sum, output */
#pragma omp parallel for num_threads(D->nthreads) schedule(dynamic, 1)
    for (int64_t t = 0; t < P->num_tasks; t++) {
        const int64_t r0 = P->rows_start[t], R = P->rows_start[t + 1] - r0, nq = R * group;
        const int64_t Hv = H * R, per = (P->b1[t] - P->b0[t]) * D->block_size;
        float *qb = work + P->scratch_of[t], *pm = qb + Hv * hd, *pl = pm + Hv, *po = pl + Hv;
        float *sc = po + Hv * hd;
        for (int64_t i = 0; i < R; i++) /* [kv_heads, rows, group, hd]: each KV head's queries */
            for (int64_t hk = 0; hk < kvh; hk++)
                for (int64_t g = 0; g < group; g++) {
                    const float *src = q + P->task_rows[r0 + i] * q_stride + (hk * group + g) * hd;
                    float *dst = qb + (hk * nq + i * group + g) * hd;
                    for (int64_t j = 0; j < hd; j++) dst[j] = src[j];
                }
        attend_run(D, nq, qb, k_cache, v_cache, tables + P->table_row[t] * table_stride,
                   P->b0[t], P->b1[t], P->hi[t], per, pm, pl, po, sc);
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
    for (int64_t m = 0; m < M; m++)
        for (int64_t hq = 0; hq < H; hq++) {
            const int64_t p0 = P->parts_start[m], p1 = P->parts_start[m + 1];
            float mx = -INFINITY, l = 0.f;
            for (int64_t p = p0; p < p1; p++) {
                const float *part = parts + P->row_parts[p] * H * (2 + hd) + hq * (2 + hd);
                mx = part[0] > mx ? part[0] : mx;
            }
            float *o = out + m * H * hd + hq * hd;
            for (int64_t i = 0; i < hd; i++) o[i] = 0.f;
            for (int64_t p = p0; p < p1; p++) {
                const float *part = parts + P->row_parts[p] * H * (2 + hd) + hq * (2 + hd);
                if (part[1] == 0.f) continue; /* a run past the last key */
                const float w = expf(part[0] - mx);
                l += w * part[1];
                for (int64_t i = 0; i < hd; i++) o[i] += w * part[2 + i];
            }
            for (int64_t i = 0; i < hd; i++) o[i] /= l;
        }
}

/* Floats of scratch pc_decode_step needs for M rows besides the attention's (plan-sized). */
int64_t pc_scratch_floats(const pc_dims *D, int64_t M) {
    const int64_t q = D->heads * D->head_dim, kv = D->kv_heads * D->head_dim;
    const int64_t widest = D->hidden > D->inter ? D->hidden : D->inter;
    return M * (2 * D->hidden + (q + 2 * kv) + q + 2 * D->inter) + widest / 32 + 1;
}

/* Run every layer for M tokens, one per sequence. x [M, hidden]: their embeddings in, the last
 * layer's outputs out (before the final norm). cos / ssin [M, head_dim]: RotaryEmbedding's
 * (cos, signed_sin) rows of their positions. slots [M]: where their K/V go. tables [M,
 * table_stride] int32: the sequences' block ids; plan: what each row attends to (its keys
 * including the new token). scratch: pc_scratch_floats(D, M) floats, then the plan's. */
void pc_decode_step(const pc_layer *layers, int64_t num_layers, const pc_dims *D, int64_t M,
                    float *x, const float *cos, const float *ssin, const int64_t *slots,
                    const int32_t *tables, int64_t table_stride, const pc_attn_plan *plan,
                    float *scratch) {
    const int64_t hid = D->hidden, hd = D->head_dim, qn = D->heads * hd, kvn = D->kv_heads * hd;
    const int64_t inter = D->inter, qkvn = qn + 2 * kvn, nt = D->nthreads;
    float *h = scratch, *tmp = h + M * hid, *qkv = tmp + M * hid, *att = qkv + M * qkvn;
    float *gu = att + M * qn, *act = gu + M * 2 * inter;
    float *xsum = act, *work = scratch + pc_scratch_floats(D, M);
    for (int64_t L = 0; L < num_layers; L++) {
        const pc_layer *ly = layers + L;
        for (int64_t m = 0; m < M; m++) rms_norm(x + m * hid, ly->ln1, h + m * hid, hid, D->eps);
        q4_matmul(&ly->qkv, h, qkv, M, xsum, nt);
        for (int64_t m = 0; m < M; m++) {
            float *r = qkv + m * qkvn;
            rope(r, D->heads + D->kv_heads, hd, cos + m * hd, ssin + m * hd);
            float *kd = ly->k_cache + slots[m] * kvn, *vd = ly->v_cache + slots[m] * kvn;
            for (int64_t i = 0; i < kvn; i++) kd[i] = r[qn + i], vd[i] = r[qn + kvn + i];
        }
        attention(D, M, qkv, qkvn, ly->k_cache, ly->v_cache, tables, table_stride, plan, att, work);
        q4_matmul(&ly->o, att, tmp, M, xsum, nt);
        for (int64_t i = 0; i < M * hid; i++) x[i] += tmp[i];
        for (int64_t m = 0; m < M; m++) rms_norm(x + m * hid, ly->ln2, h + m * hid, hid, D->eps);
        q4_matmul(&ly->gate_up, h, gu, M, xsum, nt);
        for (int64_t m = 0; m < M; m++) {
            float *g = gu + m * 2 * inter, *a = gu + m * inter;
            /* in place, row by row: row m's output [inter] lands over its own gate half or an
             * earlier row's already-consumed values, never over inputs still to be read */
            for (int64_t i = 0; i < inter; i++) a[i] = g[i] / (1.f + expf(-g[i])) * g[inter + i];
        }
        q4_matmul(&ly->down, gu, tmp, M, xsum, nt);
        for (int64_t i = 0; i < M * hid; i++) x[i] += tmp[i];
    }
}

/* An int4 weight in the kernel's layout from its dequantised values [n, k] and the grid's
 * scale / zero [n, k / 32] (w = (q - 8) * scale + zero): q = round((w - zero) / scale) + 8,
 * clamped to 0..15 (values sit within a rounding of their grid point, far from a .5), and
 * dm = (scale, zero - 8 * scale). One pass, OpenMP over rows. */
void pc_pack_q4(const float *values, const float *scale, const float *zero, int64_t n,
                int64_t k, uint8_t *qs, float *dm, int32_t nthreads) {
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
            dm[2 * i] = sc;
            dm[2 * i + 1] = z - 8.f * sc;
        }
}

/* The step's two kernels on their own, for tests: y = x W^T, and one layer's attention. */
void pc_q4_matmul(const pc_q4 *w, const float *x, float *y, int64_t M, float *xsum,
                  int32_t nthreads) {
    q4_matmul(w, x, y, M, xsum, nthreads);
}

void pc_paged_attention(const pc_dims *D, int64_t M, const float *q, const float *k_cache,
                        const float *v_cache, const int32_t *tables, int64_t table_stride,
                        const pc_attn_plan *plan, float *out, float *work) {
    attention(D, M, q, D->heads * D->head_dim, k_cache, v_cache, tables, table_stride, plan, out,
              work);
}
