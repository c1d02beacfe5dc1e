/* The LM head's ranking product on an x86-64 CPU with AVX2: y [M, n] = x [M, k] W^T for an
 * int8 weight W [n, k] with one bf16 scale per row (Int8Linear's qweight and scale_bf16: the
 * head and the tied token embedding, one copy of the vocabulary matrix).
 *
 * Each row of x is rounded to int16 with one scale for the whole row (dx = max |x| / 32767,
 * an error of at most 2^-16 of the row's largest input), and the products are summed exactly in
 * int32 (vpmaddwd over the int8 codes widened to int16: |x q| <= 32767 * 127, and each lane sums
 * at most 512 of them before its sum moves to int64), so y[m, j] = (sum) * dx[m] * scale[j]
 * differs from the exact x . (q * scale) by the activations' rounding alone. The head ranks its
 * logits by these values and recomputes the largest exactly (Int8Linear.refine_top); torch's
 * int8 kernel rounds activations and outputs to bf16 (2^-9 of each), and reads the same bytes.
 *
 * Rows of x are taken TILE at a time against each weight row (the weight row widened once for
 * all of them), the same integer sums whatever M: a row's output is bit for bit the same alone
 * or among others. OpenMP over weight rows.
 *
 * Compiled with decode_step.c into one library (library.py). */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#define TILE 8

/* Inputs summed in int32 before the sums move to int64: a lane sums 2 of every 16 inputs, so
 * 512 products of at most 32767 * 127 each (2,130,641,408 in all, under 2^31). */
#define CHUNK_INPUTS 4096

static inline int64_t hsum_epi32_i64(__m256i v) {
    int32_t lanes[8];
    _mm256_storeu_si256((__m256i *)lanes, v);
    int64_t s = 0;
    for (int i = 0; i < 8; i++) s += lanes[i];
    return s;
}

/* y[m0 + r, j] for r < R: weight row w [k] (int8) against R rows of qx (k apart). */
static inline __attribute__((always_inline)) void tile_rows(const int8_t *restrict w, int64_t k,
                                                           const int16_t *restrict qx,
                                                           const int R, int64_t *restrict out) {
    for (int r = 0; r < R; r++) out[r] = 0;
    for (int64_t c0 = 0; c0 < k; c0 += CHUNK_INPUTS) {
        const int64_t c1 = c0 + CHUNK_INPUTS < k ? c0 + CHUNK_INPUTS : k;
        __m256i acc[TILE];
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int64_t i = c0; i < c1; i += 16) {
            const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + i)));
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const __m256i a = _mm256_loadu_si256((const __m256i *)(qx + r * k + i));
                acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(wv, a));
            }
        }
        for (int r = 0; r < R; r++) out[r] += hsum_epi32_i64(acc[r]);
    }
}

/* y [M, n] (fp32) = x [M, k] (fp32, rows k apart) times the int8 rows q [n, k] scaled by
 * scale [n] (bf16, raw bits), k a multiple of 16; as the file's comment says. Returns 0, or -1
 * if its scratch (M * k int16 and M floats) could not be allocated. */
int pc_int8_rows_product(const float *x, int64_t M, const int8_t *q, const uint16_t *scale,
                         int64_t n, int64_t k, float *y, int32_t nthreads) {
    int16_t *qx = malloc((size_t)(M * k) * sizeof(int16_t));
    float *dx = malloc((size_t)M * sizeof(float));
    if (qx == NULL || dx == NULL) {
        free(qx);
        free(dx);
        return -1;
    }
    for (int64_t m = 0; m < M; m++) {
        const float *v = x + m * k;
        float amax = 0.f;
        for (int64_t i = 0; i < k; i++) {
            const float a = v[i] < 0.f ? -v[i] : v[i];
            amax = a > amax ? a : amax;
        }
        const float d = amax / 32767.f, id = d > 0.f ? 1.f / d : 0.f;
        dx[m] = d;
        const __m256 vid = _mm256_set1_ps(id);
        for (int64_t i = 0; i < k; i += 16) {
            const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + i), vid));
            const __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + i + 8), vid));
            _mm256_storeu_si256((__m256i *)(qx + m * k + i),
                                _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8));
        }
    }
#pragma omp parallel for num_threads(nthreads) schedule(static, 64)
    for (int64_t j = 0; j < n; j++) {
        union {
            uint32_t u;
            float f;
        } s = {.u = (uint32_t)scale[j] << 16};
        const int8_t *w = q + j * k;
        int64_t sums[TILE];
        for (int64_t m0 = 0; m0 < M; m0 += TILE) {
            const int64_t R = M - m0 < TILE ? M - m0 : TILE;
            const int16_t *xr = qx + m0 * k;
            switch (R) {
            case 1: tile_rows(w, k, xr, 1, sums); break;
            case 2: tile_rows(w, k, xr, 2, sums); break;
            case 3: tile_rows(w, k, xr, 3, sums); break;
            case 4: tile_rows(w, k, xr, 4, sums); break;
            case 5: tile_rows(w, k, xr, 5, sums); break;
            case 6: tile_rows(w, k, xr, 6, sums); break;
            case 7: tile_rows(w, k, xr, 7, sums); break;
            default: tile_rows(w, k, xr, TILE, sums); break;
            }
            for (int64_t r = 0; r < R; r++)
                y[(m0 + r) * n + j] = (float)((double)sums[r] * dx[m0 + r]) * s.f;
        }
    }
    free(qx);
    free(dx);
    return 0;
}
