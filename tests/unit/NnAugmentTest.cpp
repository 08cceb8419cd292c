// Tests of the augmentation layers RandomCrop and RandomFlip (any axes of any rank, one draw per
// example) and of the upsampling layers. Expected values are closed forms: a crop is a window of
// the padded input, a flip a reversal, an upsampling layer the resize it documents.
#include <gtest/gtest.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <set>

using namespace sj;

TEST(NnAugment, RandomCropTakesAWindowOfThePaddedImage) {
    Scope s("nnconv_crop");
    const int64_t n = 16, c = 2, h = 5, w = 6, p = 2;
    nn::RandomCrop crop({.padding = {{p, p}}, .seed = 11});
    Placeholder x({-1, c, h, w}, f32, "x");
    EXPECT_EQ(crop(x, nn::Mode::Eval).node(), x.node()); // identity in eval mode
    Function f = function({x}, {crop(x, nn::Mode::Train)});
    // distinct positive values, so the offset of each crop can be recovered
    std::vector<float> xv(static_cast<size_t>(n * c * h * w));
    for (size_t i = 0; i < xv.size(); ++i)
        xv[i] = float(i + 1);
    Array xa(xv, {n, c, h, w});
    std::set<std::pair<int, int>> offsets;
    for (int call = 0; call < 4; ++call) {
        std::vector<float> y = f(xa)[0].to_vector<float>();
        ASSERT_EQ(y.size(), xv.size());
        for (int64_t e = 0; e < n; ++e) {
            bool found = false;
            for (int dy = 0; dy <= 2 * p && !found; ++dy)
                for (int dx = 0; dx <= 2 * p && !found; ++dx) {
                    bool ok = true;
                    for (int64_t ch = 0; ch < c && ok; ++ch)
                        for (int64_t i = 0; i < h && ok; ++i)
                            for (int64_t j = 0; j < w && ok; ++j) {
                                int64_t si = i + dy - p, sj = j + dx - p;
                                float want = (si < 0 || si >= h || sj < 0 || sj >= w)
                                                 ? 0.f
                                                 : xv[((e * c + ch) * h + si) * w + sj];
                                ok = y[((e * c + ch) * h + i) * w + j] == want;
                            }
                    if (ok)
                        found = true, offsets.insert({dy, dx});
                }
            EXPECT_TRUE(found) << "example " << e << " of call " << call
                               << " is not a window of the padded image";
        }
    }
    // 64 draws over 25 offsets: seeing fewer than 10 distinct ones has probability < 1e-9
    EXPECT_GE(offsets.size(), 10u);
}

TEST(NnAugment, RandomFlipFlipsAboutHalf) {
    Scope s("nnconv_flip");
    nn::RandomFlip flip({.p = 0.5, .seed = 3});
    Placeholder x({-1, 1, 2, 3}, f32, "x");
    EXPECT_EQ(flip(x, nn::Mode::Eval).node(), x.node());
    Function f = function({x}, {flip(x, nn::Mode::Train)});
    const int n = 200;
    std::vector<float> xv(n * 6);
    for (size_t i = 0; i < xv.size(); ++i)
        xv[i] = float(i % 6); // rows 0 1 2 / 3 4 5
    std::vector<float> y = f(Array(xv, {n, 1, 2, 3}))[0].to_vector<float>();
    int flipped = 0;
    for (int e = 0; e < n; ++e) {
        const float* r = &y[e * 6];
        bool same = r[0] == 0 && r[1] == 1 && r[2] == 2 && r[3] == 3 && r[4] == 4 && r[5] == 5;
        bool mirrored = r[0] == 2 && r[1] == 1 && r[2] == 0 && r[3] == 5 && r[4] == 4 && r[5] == 3;
        EXPECT_TRUE(same || mirrored) << "example " << e;
        flipped += mirrored;
    }
    // Binomial(200, 0.5): 100 +- 7; outside [60, 140] has probability < 1e-8
    EXPECT_GT(flipped, 60);
    EXPECT_LT(flipped, 140);
}

TEST(NnAugment, RandomCropOnAnyAxisWithASmallerWindow) {
    // [N, 7, 3]: crop axis 1 to 4 samples with padding (1, 0); axis 2 untouched
    Scope s("nnaug_crop1d");
    const int64_t n = 64, len = 7, ch = 3, size = 4, lo = 1;
    nn::RandomCrop crop({.padding = {{lo, 0}}, .size = {size}, .axes = {1}, .seed = 5});
    Placeholder x({-1, len, ch}, f32, "seq");
    std::vector<float> xv(static_cast<size_t>(n * len * ch));
    for (size_t i = 0; i < xv.size(); ++i)
        xv[i] = float(i + 1);
    Array xa(xv, {n, len, ch});
    std::vector<Array> r = function({x}, {crop(x, nn::Mode::Train), crop(x, nn::Mode::Eval)})(xa);
    ASSERT_EQ(r[0].shape(), (Shape{n, size, ch}));
    ASSERT_EQ(r[1].shape(), (Shape{n, size, ch}));
    std::vector<float> y = r[0].to_vector<float>(), ev = r[1].to_vector<float>();
    auto padded = [&](int64_t e, int64_t i, int64_t c) { // i indexes the padded axis
        const int64_t si = i - lo;
        return si < 0 ? 0.f : xv[(e * len + si) * ch + c];
    };
    std::set<int64_t> offsets;
    const int64_t range = lo + len - size; // offsets 0..4
    for (int64_t e = 0; e < n; ++e) {
        int64_t found = -1;
        for (int64_t off = 0; off <= range && found < 0; ++off) {
            bool ok = true;
            for (int64_t i = 0; i < size && ok; ++i)
                for (int64_t c = 0; c < ch && ok; ++c)
                    ok = y[(e * size + i) * ch + c] == padded(e, i + off, c);
            if (ok)
                found = off;
        }
        EXPECT_GE(found, 0) << "example " << e << " is not a window of the padded sequence";
        offsets.insert(found);
        // eval: the centre window, offset range / 2
        for (int64_t i = 0; i < size; ++i)
            for (int64_t c = 0; c < ch; ++c)
                EXPECT_EQ(ev[(e * size + i) * ch + c], padded(e, i + range / 2, c));
    }
    EXPECT_EQ(offsets.size(), size_t(range + 1)); // 64 draws over 5 offsets: all seen
}

TEST(NnAugment, RandomFlipOnSeveralAxesOfAVolume) {
    Scope s("nnaug_flip3d");
    nn::RandomFlip flip({.p = 0.5, .axes = {1, -1}, .seed = 9});
    Placeholder x({-1, 2, 1, 3}, f64, "vol");
    const int n = 100;
    std::vector<double> xv(n * 6);
    for (size_t i = 0; i < xv.size(); ++i)
        xv[i] = double(i % 6); // [[0 1 2], [3 4 5]] per example
    std::vector<double> y =
        function({x}, {flip(x, nn::Mode::Train)})(Array(xv, {n, 2, 1, 3}))[0].to_vector<double>();
    int flipped = 0;
    for (int e = 0; e < n; ++e) {
        const double* r = &y[e * 6];
        bool same = true, both = true;
        for (int k = 0; k < 6; ++k)
            same &= r[k] == k, both &= r[k] == 5 - k; // both axes reversed: 5 4 3 / 2 1 0
        EXPECT_TRUE(same || both) << "example " << e;
        flipped += both;
    }
    EXPECT_GT(flipped, 25); // Binomial(100, 0.5) outside [25, 75]: probability < 1e-6
    EXPECT_LT(flipped, 75);
    EXPECT_EQ(flip(x, nn::Mode::Eval).node(), x.node());
}

TEST(NnAugment, OptionErrorsNameTheLayer) {
    Scope s("nnaug_err");
    EXPECT_THROW(nn::RandomCrop({.padding = {{-1, 0}}}), InputError);
    EXPECT_THROW(nn::RandomCrop({.padding = {{1, 1}, {1, 1}, {1, 1}}}), InputError); // 2 axes
    EXPECT_THROW(nn::RandomCrop({.size = {0}}), InputError);
    EXPECT_THROW(nn::RandomFlip({.p = 1.5}), InputError);
    Placeholder x({-1, 3, 8}, f32, "feats");
    try {
        nn::RandomFlip({.axes = {0}})(x);
        FAIL() << "expected an InputError";
    } catch (const InputError& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("batch axis"), std::string::npos) << m;
        EXPECT_NE(m.find("feats"), std::string::npos) << m;
    }
    EXPECT_THROW(nn::RandomFlip({.axes = {3}})(x), ShapeError);
    EXPECT_THROW(nn::RandomCrop({.size = {9}, .axes = {-1}})(x), ShapeError); // 9 > 8
    Placeholder dyn({-1, -1, 8}, f32, "dyn");
    EXPECT_THROW(nn::RandomCrop({.padding = {{1, 1}}, .axes = {-1}})(dyn), ShapeError);
}

TEST(NnAugment, UpsampleLayersAreTorchUpsample) {
    Scope s("nnaug_up");
    Placeholder x({-1, 2, 3, 4}, f32, "img");
    Placeholder v({-1, 2, 5}, f32, "sig");
    nn::Upsample2D nearest({2});
    nn::Upsample2D bilinear({2, 3},
                            {.method = interpolation::Method::Linear, .align_corners = true});
    nn::Upsample1D linear(3, {.method = interpolation::Method::Linear});
    std::vector<float> xv(24), vv(10);
    for (size_t i = 0; i < xv.size(); ++i)
        xv[i] = float(i) * 0.5f - 3;
    for (size_t i = 0; i < vv.size(); ++i)
        vv[i] = float(i * i) * 0.25f;
    Array xa(xv, {1, 2, 3, 4}), va(vv, {1, 2, 5});
    std::vector<Array> r =
        function({x, v}, {nearest(x), bilinear(x), linear(v),
                          interpolation::resize(x, {6, 12}, interpolation::Method::Linear, true),
                          interpolation::resize(v, {15}, interpolation::Method::Linear)})(xa, va);
    ASSERT_EQ(r[0].shape(), (Shape{1, 2, 6, 8}));
    ASSERT_EQ(r[1].shape(), (Shape{1, 2, 6, 12}));
    ASSERT_EQ(r[2].shape(), (Shape{1, 2, 15}));
    // nearest x2: each pixel becomes a 2 x 2 block
    std::vector<float> nv = r[0].to_vector<float>();
    for (int c = 0; c < 2; ++c)
        for (int i = 0; i < 6; ++i)
            for (int j = 0; j < 8; ++j)
                EXPECT_EQ(nv[(c * 6 + i) * 8 + j], xv[(c * 3 + i / 2) * 4 + j / 2]);
    EXPECT_TRUE(r[1].equals(r[3])); // align_corners bilinear x (2, 3) = resize to 6 x 12
    EXPECT_TRUE(r[2].equals(r[4]));
    EXPECT_THROW(nn::Upsample2D({2, 2, 2}), InputError);
    EXPECT_THROW(nn::Upsample1D(0), InputError);
    EXPECT_THROW(nearest(v), ShapeError);
}
