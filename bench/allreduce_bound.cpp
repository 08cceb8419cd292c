// The bound of `symjax_bench dist`: OpenMPI's own MPI_Allreduce (sum of f32) on buffers of
// 4 B to 64 MiB, timed as the median of repeated calls after a barrier. Run under mpirun; rank 0
// prints one JSON line per size: latency (us) and algorithm bandwidth (bytes / time, GB/s).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (long n = 1; n <= (16L << 20); n *= 8) {
        std::vector<float> buf(size_t(n), 1.0f);
        int reps = n < 65536 ? 200 : 10;
        std::vector<double> t;
        for (int r = 0; r < reps + 3; ++r) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            if (r >= 3)
                t.push_back(MPI_Wtime() - t0);
        }
        std::sort(t.begin(), t.end());
        double med = t[t.size() / 2];
        if (rank == 0)
            std::printf("{\"bench\": \"dist_allreduce\", \"impl\": \"mpi\", \"ranks\": %d, "
                        "\"bytes\": %ld, \"us\": %.2f, \"GBps\": %.3f}\n",
                        size, n * 4, med * 1e6, double(n * 4) / med / 1e9);
    }
    MPI_Finalize();
    return 0;
}
