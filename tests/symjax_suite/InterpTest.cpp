// Port of SymJAX's tests/interp_test.py.
#include "symjax_suite/SuiteUtil.h"

using namespace sj;
using namespace sj::suite;

// resample_images of a 3 x 2 x 2 and a 3 x 4 x 4 image to 4 x 4: the first one's samples at
// rows and columns 0 and 3 are its own pixels, exactly; the second one is unchanged. (SymJAX
// draws the pixels with np.random.rand; any values do, these come from hash_uniform.)
TEST(SymjaxInterp, Image) {
    Array im1 = hash_uniform(30, {3, 2, 2}, 0, 1, DType::F64);
    Array im2 = hash_uniform(31, {3, 4, 4}, 0, 1, DType::F64);
    Array images = data::resample_images({im1, im2}, {4, 4});
    ASSERT_EQ(images.shape(), (Shape{2, 3, 4, 4}));
    // images[0, :, ::3, ::3] == im1
    for (int64_t c = 0; c < 3; ++c)
        for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 2; ++j)
                EXPECT_EQ(images.at(((0 * 3 + c) * 4 + 3 * i) * 4 + 3 * j),
                          im1.at((c * 2 + i) * 2 + j))
                    << c << " " << i << " " << j;
    // images[1] == im2
    for (int64_t k = 0; k < 3 * 4 * 4; ++k)
        EXPECT_EQ(images.at(48 + k), im2.at(k)) << k;
}
