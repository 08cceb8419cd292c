// The deep-learning layer: modules, layers, activations, initializers, losses, metrics,
// optimizers and schedules.
//
//   #include <symjax/symjax.h>
//   #include <symjax/nn.h>
//   using namespace sj;
//
//   Placeholder x({-1, 784}, f32, "x");
//   Placeholder y({-1}, i32, "y");
//   nn::Sequential net{nn::Dense(784, 128), nn::ReLU(), nn::Dropout(0.1), nn::Dense(128, 10)};
//   Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, net(x, nn::Mode::Train)));
//   nn::optim::Adam adam(1e-3);
//   Function train = function({x, y}, {loss},
//                             adam.minimize(loss, net.trainable_variables()) +
//                             state_updates(loss));
//   Function acc = function({x, y}, {nn::metrics::accuracy(y, net(x, nn::Mode::Eval))});
#pragma once

#include <symjax/nn/Activations.h>
#include <symjax/nn/Augment.h>
#include <symjax/nn/Conv.h>
#include <symjax/nn/DataParallel.h>
#include <symjax/nn/Init.h>
#include <symjax/nn/Layers.h>
#include <symjax/nn/Losses.h>
#include <symjax/nn/Metrics.h>
#include <symjax/nn/Module.h>
#include <symjax/nn/MovingAverage.h>
#include <symjax/nn/Optim.h>
#include <symjax/nn/Recurrent.h>
#include <symjax/nn/Schedules.h>
#include <symjax/nn/Upsample.h>
