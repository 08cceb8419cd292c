// The cores' AVX-512 FMA peak: each thread runs 12 independent chains of fused multiply-adds on
// 16-float vectors (enough to cover the FMA latency on two pipes), and the program prints the
// GFLOP/s of the team. What docs/performance.md compares the MLP's GEMMs against.
//   gcc -O3 -march=native -fopenmp bench/fma_peak.c -o /tmp/fma_peak
//   OMP_NUM_THREADS=1 /tmp/fma_peak; OMP_NUM_THREADS=2 /tmp/fma_peak
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>

int main(void) {
    const long n = 200000000; // multiply-adds per lane per thread, in chains of 12
    double t0 = 0;
#pragma omp parallel
    {
        __m512 a[12];
        for (int i = 0; i < 12; i++)
            a[i] = _mm512_set1_ps(i * 0.001f);
        const __m512 b = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(0.0001f);
#pragma omp barrier
#pragma omp master
        t0 = omp_get_wtime();
        for (long k = 0; k < n / 12; k++)
            for (int i = 0; i < 12; i++)
                a[i] = _mm512_fmadd_ps(a[i], b, c);
#pragma omp barrier
#pragma omp master
        {
            const double t = omp_get_wtime() - t0;
            const int threads = omp_get_num_threads();
            printf("{\"bench\": \"fma_peak\", \"threads\": %d, \"value\": %.1f, \"unit\": \"GFLOP/s\"}\n",
                   threads, (double)(n / 12 * 12) * 32 * threads / t / 1e9);
        }
        float s = 0; // keep the chains alive
        for (int i = 0; i < 12; i++)
            s += _mm512_reduce_add_ps(a[i]);
        if (s == 1.2345f)
            printf("%f\n", s);
    }
    return 0;
}
