// Passive OpenMP waits by default: the constructor of libsymjax_env.so, which runs before
// libgomp's.
#include <cstdlib>

// Note [OpenMP wait policy]
// libgomp's default makes a thread that reaches the end of a parallel region spin (about
// 300,000 iterations) before it sleeps. On a quiet machine that keeps the team hot between the
// short regions of a training step. On a busy one it is ruinous: with 2 threads on 2 cores and
// one other process, every region ends waiting for a descheduled thread while the spinning one
// burns the core it needs (the brief CNN's step fell to 50-75 images/s, against 650-700 with
// passive waits, in the same minutes). So unless the environment chooses (OMP_WAIT_POLICY or
// GOMP_SPINCOUNT), a program that links symjax starts libgomp with passive waits. It changes the
// process's environment, so OpenMP code of the user's in the same program waits passively too.
//
// libgomp reads its environment once, in its own initialiser, so the variable must be set
// before that runs, and after libc's (which sets `environ` back to the array the kernel passed,
// dropping anything setenv added earlier). Measured with OMP_DISPLAY_ENV=verbose, which prints
// GOMP_SPINCOUNT ('0' when passive, '300000' by default):
// - an entry in the executable's .preinit_array (what symjax did while it was a static library)
//   runs before libc's initialiser: its setenv was lost, every program spun;
// - a constructor in libsymjax.so runs after libgomp's, which it depends on: too late;
// - this file's constructor, in a library of its own that needs only libc and that libsymjax
//   lists after libgomp (CMakeLists.txt, "symjax_env"), runs in between: the loader initialises
//   a library's dependencies first and, among the others, the later loaded first. It works as
//   well when the program itself links libgomp (it is then loaded earlier still).
// tests/install checks that a program built against the installed package, and one in the build
// tree, start with GOMP_SPINCOUNT '0', and that OMP_WAIT_POLICY=active still wins.
namespace {
[[gnu::constructor]] void passive_openmp_waits() {
    if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT"))
        setenv("OMP_WAIT_POLICY", "passive", 0);
}
} // namespace
