# CTest checks that run the example programs and match their printed results.
# Included from tests/CMakeLists.txt when SJ_BUILD_EXAMPLES is on. Each example prints its
# checked values and a final "<name>: OK" line only when every check passed; a line containing
# "FAILED" fails the test whatever else was printed. The regexes are ordered (CMake's '.' also
# matches newlines), so one pattern asserts several printed values and the OK line together.

add_test(NAME example_mvn_pdf COMMAND mvn_pdf)
set_tests_properties(example_mvn_pdf PROPERTIES
  PASS_REGULAR_EXPRESSION
    "centre density 0\\.159155.*neighbour density 0\\.006993.*peak density 0\\.124279.*mvn_pdf: OK"
  FAIL_REGULAR_EXPRESSION "FAILED"
  TIMEOUT 120)

# cost_t = exp(-(mu_t - 1)^2) with mu_0 = 0 and mu_{t+1} = mu_t + 0.4 (mu_t - 1) cost_t:
# 0.367879 at step 0, 0.051723 at step 9.
add_test(NAME example_sgd COMMAND sgd)
set_tests_properties(example_sgd PROPERTIES
  PASS_REGULAR_EXPRESSION
    "0 +0\\.367879 +0\\.000000.*1 +0\\.268217 +-0\\.147152.*9 +0\\.051723 +-0\\.721001.*sgd: OK"
  FAIL_REGULAR_EXPRESSION "FAILED"
  TIMEOUT 120)
