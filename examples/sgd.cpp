// Example: the SymJAX paper's SGD toy, a compiled function that updates a variable in place.
//
// We minimise cost(mu) = exp(-(mu - 1)^2) by gradient descent:
//     mu <- mu - 0.2 * d cost / d mu.
// The gradient is symbolic (it is more graph, built once), and the update is applied by the
// compiled function after each call, Theano style. The program repeats the iteration in plain
// C++ double precision, using the hand-derived gradient -2 (mu - 1) exp(-(mu - 1)^2), and prints
// "sgd: OK" when the two agree.
#include <symjax/symjax.h>

#include <cmath>
#include <cstdio>

using namespace sj;

int main() {
    // The variable to optimise: persistent state that lives between calls. (The paper starts
    // from a random draw; a fixed start makes the printed numbers reproducible.)
    Variable mu(Array::scalar(0.0f), "mu");

    // The cost and its gradient, both symbolic tensors.
    Tensor cost = exp(-pow(mu - 1.0, 2.0));
    Tensor grad = gradients(cost, mu);

    // A function with no inputs, one output, and one update. The output is computed from the
    // value of mu before the call; the update is applied afterwards.
    Function step = function({}, {cost}, {{mu, mu - 0.2 * grad}});

    double mu_ref = 0.0; // the same iteration by hand, in double
    int failures = 0;
    std::printf("%4s %12s %12s %14s\n", "step", "cost", "mu", "closed form");
    for (int t = 0; t < 10; ++t) {
        float mu_before = mu.value().item<float>();
        float c = step()[0].item<float>();

        double c_ref = std::exp(-(mu_ref - 1.0) * (mu_ref - 1.0));
        std::printf("%4d %12.6f %12.6f %14.6f\n", t, c, mu_before, c_ref);
        if (std::abs(c - c_ref) > 1e-5 * c_ref || std::abs(mu_before - mu_ref) > 1e-5) {
            std::printf("FAILED at step %d: cost %.9g mu %.9g, expected cost %.9g mu %.9g\n", t,
                        c, mu_before, c_ref, mu_ref);
            ++failures;
        }
        double g_ref = -2.0 * (mu_ref - 1.0) * c_ref; // d/dmu exp(-(mu - 1)^2)
        mu_ref -= 0.2 * g_ref;
    }
    float mu_final = mu.value().item<float>();
    std::printf("final mu %.6f (closed form %.6f)\n", mu_final, mu_ref);
    if (std::abs(mu_final - mu_ref) > 1e-5 * std::abs(mu_ref)) {
        std::printf("FAILED: final mu %.9g, expected %.9g\n", mu_final, mu_ref);
        ++failures;
    }
    if (failures > 0) {
        std::printf("sgd: %d check(s) FAILED\n", failures);
        return 1;
    }
    std::printf("sgd: OK\n");
    return 0;
}
