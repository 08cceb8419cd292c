// A short OpenMP spin before a thread sleeps, by default: the constructor of libsymjax_env.so,
// which runs before libgomp's.
#include <cstdlib>

// Note [OpenMP wait policy]
// libgomp's default makes a thread that reaches the end of a parallel region spin (GOMP_SPINCOUNT
// 300,000 iterations) before it sleeps. On a quiet machine that keeps the team hot between the
// short regions of a training step; on a busy one it is ruinous: with 2 threads on 2 cores and
// a busy process per core, every region ends waiting for a descheduled thread while the spinning
// one burns the core it needs. Passive waits (spin count 0) fix that but pay a futex wake-up
// per region on a quiet machine. A short spin has both: the threads stay hot across the
// microseconds between the regions of a step and sleep soon when the core is wanted elsewhere.
// Measured on 2 threads (AMD EPYC, 2026-12-01, symjax_bench, images/s or steps/s):
//
//   GOMP_SPINCOUNT         0      3,000   10,000   30,000   100,000   300,000 (libgomp's)
//   MLP train step       476        541      550      544       505       550
//   symjax CNN train    2601       3123     3265     3209      3093      2882
//   brief CNN train     1388          .     1750        .         .      1757   quiet
//   brief CNN train  432-597          .  445-454        .         .   411-505   2 busy loops,
//                                                                             3 runs each
//
// So unless the environment chooses (OMP_WAIT_POLICY or GOMP_SPINCOUNT), a program that links
// symjax starts libgomp with GOMP_SPINCOUNT=10000: the quiet speed of the default spin, 14-25%
// above passive waits. Beside a busy process per core no setting keeps more than a third of the
// quiet speed (passive waits do a little better there, within the runs' spread); that needs
// fewer, larger parallel regions, not a wait policy (docs/reliability.md, "Gaps"). It changes
// the process's environment, so OpenMP code of the user's in the same program spins as briefly
// too.
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
// tree, start with GOMP_SPINCOUNT '10000', and that OMP_WAIT_POLICY=active still wins.
namespace {
[[gnu::constructor]] void short_openmp_spin() {
    if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT"))
        setenv("GOMP_SPINCOUNT", "10000", 0);
}
} // namespace
