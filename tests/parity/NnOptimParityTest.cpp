// Optimizer parity with PyTorch: 100-step trajectories recorded by gen_optim_parity.py.
//
// The problem (data/problem.json) is a 5-7-3 tanh MLP with fixed weights, a batch of 8 and the
// mean softmax cross-entropy. Both sides run in float64, so a 1e-5 relative agreement after 100
// steps checks the update rules themselves (eps placement, bias correction, dampening, decay),
// which rounding in float32 would blur.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

using namespace sj;
using nlohmann::json;

namespace {

std::string data_dir() {
    return std::string(SJ_TEST_DATA_DIR) + "/parity/data";
}

json read_json(const std::string &path) {
    std::ifstream f(path);
    if (!f)
        throw std::runtime_error("cannot open " + path);
    return json::parse(f);
}

/// The configurations gen_optim_parity.py records (the test below checks the lists agree).
const std::vector<std::string> kConfigs{"sgd",
                                        "sgd_wd",
                                        "momentum",
                                        "momentum_wd",
                                        "momentum_dampening",
                                        "nesterov",
                                        "nesterov_wd",
                                        "adam",
                                        "adam_wd",
                                        "amsgrad",
                                        "amsgrad_wd",
                                        "adam_eps",
                                        "adamw",
                                        "adamw_amsgrad",
                                        "rmsprop",
                                        "rmsprop_wd",
                                        "rmsprop_eps",
                                        "rmsprop_centered_momentum",
                                        "adagrad",
                                        "adagrad_wd",
                                        "adagrad_eps",
                                        "adagrad_init_acc"};

/// The symjax optimizer for a PyTorch class name and its keyword arguments.
std::unique_ptr<nn::optim::Optimizer> make_optimizer(const std::string &cls, const json &o) {
    double lr = o.at("lr");
    double wd = o.value("weight_decay", 0.0);
    if (cls == "SGD")
        return std::make_unique<nn::optim::SGD>(
            lr, nn::optim::SGDOptions{.momentum = o.value("momentum", 0.0),
                                  .dampening = o.value("dampening", 0.0),
                                  .nesterov = o.value("nesterov", false),
                                  .weight_decay = wd});
    if (cls == "Adam" || cls == "AdamW") {
        std::vector<double> betas = o.value("betas", std::vector<double>{0.9, 0.999});
        nn::optim::AdamOptions a{.beta1 = betas[0],
                             .beta2 = betas[1],
                             .eps = o.value("eps", 1e-8),
                             .weight_decay = wd,
                             .amsgrad = o.value("amsgrad", false)};
        if (cls == "Adam")
            return std::make_unique<nn::optim::Adam>(lr, a);
        return std::make_unique<nn::optim::AdamW>(
            lr, nn::optim::AdamWOptions{.beta1 = a.beta1,
                                    .beta2 = a.beta2,
                                    .eps = a.eps,
                                    .weight_decay = o.value("weight_decay", 1e-2), // PyTorch's
                                    .amsgrad = a.amsgrad});
    }
    if (cls == "RMSprop")
        return std::make_unique<nn::optim::RMSprop>(
            lr, nn::optim::RMSpropOptions{.alpha = o.value("alpha", 0.99),
                                      .eps = o.value("eps", 1e-8),
                                      .momentum = o.value("momentum", 0.0),
                                      .centered = o.value("centered", false),
                                      .weight_decay = wd});
    if (cls == "Adagrad")
        return std::make_unique<nn::optim::Adagrad>(
            lr,
            nn::optim::AdagradOptions{.lr_decay = o.value("lr_decay", 0.0),
                                  .initial_accumulator = o.value("initial_accumulator_value", 0.0),
                                  .eps = o.value("eps", 1e-10),
                                  .weight_decay = wd});
    throw std::runtime_error("unknown optimizer class " + cls);
}

Array optim_array(const json& j, const Shape& shape) {
    std::vector<double> v;
    for (const auto &row : j) {
        if (row.is_array())
            for (const auto &x : row)
                v.push_back(x.get<double>());
        else
            v.push_back(row.get<double>());
    }
    return Array(v, shape);
}

/// |a - b| <= 1e-5 |b| + 1e-9 (the floor keeps values that cross zero well-posed); returns the
/// relative difference for the report.
double expect_close(double a, double b, const std::string &what) {
    EXPECT_NEAR(a, b, 1e-5 * std::abs(b) + 1e-9) << what;
    return std::abs(a - b) / std::max(std::abs(b), 1e-3);
}

class NnOptimParity : public ::testing::TestWithParam<std::string> {};

} // namespace

TEST(NnOptimParityData, ConfigListMatchesRecordedFiles) {
    std::set<std::string> files;
    for (const auto &e : std::filesystem::directory_iterator(data_dir())) {
        std::string name = e.path().stem().string();
        if (e.path().extension() == ".json" && name != "problem")
            files.insert(name);
    }
    EXPECT_EQ(files, std::set<std::string>(kConfigs.begin(), kConfigs.end()));
}

TEST_P(NnOptimParity, MatchesPyTorchTrajectory) {
    const std::string name = GetParam();
    json problem = read_json(data_dir() + "/problem.json");
    json rec = read_json(data_dir() + "/" + name + ".json");
    const int steps = rec.at("steps");

    Scope scope("parity_" + name);
    nn::Dense d1(5, 7, {.init = nn::init::zeros(), .dtype = f64}),
        d2(7, 3, {.init = nn::init::zeros(), .dtype = f64});
    d1.weights().assign(optim_array(problem["W1"], {5, 7}));
    d1.bias().assign(optim_array(problem["b1"], {7}));
    d2.weights().assign(optim_array(problem["W2"], {7, 3}));
    d2.bias().assign(optim_array(problem["b2"], {3}));
    nn::Sequential net{d1, nn::Tanh(), d2};

    Placeholder x({8, 5}, f64, "x");
    Placeholder y({8}, i64, "y");
    Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, net(x)));
    auto opt = make_optimizer(rec.at("optimizer"), rec.at("options"));
    std::vector<Variable> params{d1.weights(), d1.bias(), d2.weights(), d2.bias()};
    Function train = function({x, y}, {loss}, opt->minimize(loss, params));

    Array xa = optim_array(problem["x"], {8, 5});
    std::vector<int64_t> labels = problem["y"].get<std::vector<int64_t>>();
    Array ya(labels);
    const auto &losses = rec.at("losses");
    ASSERT_EQ(int(losses.size()), steps);
    double worst = 0;
    for (int i = 0; i < steps; ++i) {
        double l = train(xa, ya)[0].item<double>();
        worst = std::max(worst, expect_close(l, losses[i].get<double>(),
                                             name + ": loss at step " + std::to_string(i)));
    }
    const char *names[] = {"W1", "b1", "W2", "b2"};
    for (size_t k = 0; k < params.size(); ++k) {
        std::vector<double> got = params[k].value().to_vector<double>();
        std::vector<double> want = rec.at("final").at(names[k]).get<std::vector<double>>();
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
            worst = std::max(
                worst, expect_close(got[i], want[i],
                                    name + ": final " + names[k] + "[" + std::to_string(i) + "]"));
    }
    RecordProperty("max_relative_difference", std::to_string(worst));
    if (std::getenv("SJ_PARITY_VERBOSE"))
        std::printf("%-28s max relative difference %.2e\n", name.c_str(), worst);
    EXPECT_EQ(opt->step().value().item<int64_t>(), steps);
}

INSTANTIATE_TEST_SUITE_P(NnPyTorch, NnOptimParity, ::testing::ValuesIn(kConfigs),
                         [](const ::testing::TestParamInfo<std::string> &i) { return i.param; });
