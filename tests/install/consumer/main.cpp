// A program built against an installed symjax: a gradient through a JIT-compiled kernel and a
// matrix product through the library calls.
#include <symjax/symjax.h>

#include <cstdio>

int main() {
    using namespace sj;
    Placeholder x({3}, f32, "x");
    Tensor y = sum(x * x);
    Tensor m = matmul(reshape(x, {1, 3}), reshape(x, {3, 1}));
    Function f = function({x}, {y, gradients(y, x), m});
    std::vector<Array> r = f(Array(std::vector<float>{1, 2, 3}));
    std::printf("%s %s %s\n", r[0].str().c_str(), r[1].str().c_str(), r[2].str().c_str());
}
