// symjax: symbolic tensor programming and deep learning in C++.
//
//   #include <symjax/symjax.h>
//   using namespace sj;
//
//   Placeholder x({-1, 3}, f32, "x");               // -1: any size, bound at call time
//   Variable w(Array(std::vector<float>{1, 2, 3}), "w");
//   Tensor cost = sum(tanh(matmul(x, w)));
//   Tensor g = gradients(cost, w);                  // symbolic: more graph
//   Function step = function({x}, {cost}, {{w, w - 0.1 * g}});
//   float c = step(Array(std::vector<float>(6, 1.f), {2, 3}))[0].item<float>();
//
// Graphs are hash-consed and immutable; functions compute outputs and updates from the values
// before the call, then apply every update at once.
#pragma once

#include <symjax/Array.h>
#include <symjax/Autodiff.h>
#include <symjax/Checkpoint.h>
#include <symjax/ControlFlow.h>
#include <symjax/DType.h>
#include <symjax/Data.h>
#include <symjax/Dist.h>
#include <symjax/Error.h>
#include <symjax/Function.h>
#include <symjax/Graph.h>
#include <symjax/Interpolation.h>
#include <symjax/Interrupt.h>
#include <symjax/Ops.h>
#include <symjax/Random.h>
#include <symjax/Scope.h>
#include <symjax/Search.h>
#include <symjax/Shape.h>
#include <symjax/Tensor.h>
#include <symjax/Threads.h>
#include <symjax/Variable.h>
#include <symjax/Vmap.h>
