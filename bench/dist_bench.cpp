// symjax's all_reduce (sum of f32) on 4 B to 64 MiB, as a compiled function of one collective
// and on host arrays; bench/allreduce_bound.cpp is OpenMPI's own. Run under mpirun; rank 0
// prints one JSON line per size and form: latency (us) and algorithm bandwidth (bytes / time).
#include <symjax/Dist.h>
#include <symjax/symjax.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

using namespace sj;

int main() {
    using Clock = std::chrono::steady_clock;
    for (int64_t n = 1; n <= (int64_t(16) << 20); n *= 8) {
        Placeholder x({n}, f32, "x");
        Function f = function({x}, {dist::all_reduce(x)});
        Array a = Array::full(f32, {n}, 1.0);
        int reps = n < 65536 ? 200 : 10;
        for (const char* form : {"graph", "array"}) {
            std::vector<double> t;
            for (int r = 0; r < reps + 3; ++r) {
                dist::barrier();
                auto t0 = Clock::now();
                if (form[0] == 'g')
                    f(a);
                else
                    dist::all_reduce(a);
                if (r >= 3)
                    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
            }
            std::sort(t.begin(), t.end());
            double med = t[t.size() / 2];
            if (dist::is_root())
                std::printf(
                    "{\"bench\": \"dist_allreduce\", \"impl\": \"symjax_%s\", \"ranks\": %d, "
                    "\"bytes\": %lld, \"us\": %.2f, \"GBps\": %.3f}\n",
                    form, dist::size(), static_cast<long long>(n * 4), med * 1e6,
                    double(n * 4) / med / 1e9);
        }
    }
    return 0;
}
