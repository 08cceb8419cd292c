# Fuzzing inside the test suite (docs/reliability.md, "Tools that keep it so"): each libFuzzer
# target is built with clang 14 from its harness and the one source file of the parser it
# drives, both instrumented (coverage, ASan, UBSan), and linked against the regular library:
# the executable's instrumented copy of the parser takes the place of the library's (its
# definitions come first), everything the parser calls is the library's. A minute of building
# instead of a whole instrumented library, so ctest runs every target for SJ_CI_FUZZ_SECONDS
# from its seed corpus (fuzz/corpus/<target>); tools/fuzz.sh is the long, fully instrumented run.
# Needs clang-14 and libclang-rt-14-dev (tools/install-deps.sh installs both); quietly off
# without them, and in sanitizer or fuzz builds of the whole library.
find_program(SJ_CLANGXX14 clang++-14)
file(GLOB SJ_LIBFUZZER /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a)
set(SJ_CI_FUZZ_DEFAULT OFF)
if(SJ_CLANGXX14 AND SJ_LIBFUZZER AND BUILD_SHARED_LIBS AND NOT SJ_SANITIZE AND NOT SJ_TSAN
   AND NOT SJ_FUZZ)
  set(SJ_CI_FUZZ_DEFAULT ON)
endif()
option(SJ_CI_FUZZ "Build the parsers' fuzz targets with clang 14 and run them in ctest"
       ${SJ_CI_FUZZ_DEFAULT})
set(SJ_CI_FUZZ_SECONDS 20 CACHE STRING "How long ctest runs each fuzz target")
if(SJ_CI_FUZZ)
  if(NOT SJ_CLANGXX14 OR NOT SJ_LIBFUZZER)
    message(FATAL_ERROR "SJ_CI_FUZZ needs clang++-14 and libclang-rt-14-dev")
  endif()
  set(_fz_flags -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
      -fno-sanitize-recover=undefined -w -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/src
      -I${PROJECT_BINARY_DIR}/generated)
  # target -> the parser's source file
  set(_fz_idx src/data/Idx.cpp)
  set(_fz_cifar src/data/Cifar.cpp)
  set(_fz_image src/data/ImageFolder.cpp)
  set(_fz_safetensors src/io/Checkpoint.cpp)
  set(_fz_ir_text src/core/IrText.cpp)
  set(_fz_kernel_cache src/backend/llvm/KernelCache.cpp)
  set(_fz_dir ${PROJECT_BINARY_DIR}/fuzz-ci)
  foreach(t idx cifar image safetensors ir_text kernel_cache)
    set(_objs)
    foreach(src fuzz/fuzz_${t}.cpp ${_fz_${t}})
      get_filename_component(_name ${src} NAME_WE)
      set(_o ${_fz_dir}/${t}/${_name}.o)
      add_custom_command(OUTPUT ${_o}
        COMMAND ${SJ_CLANGXX14} ${_fz_flags} -MD -MF ${_o}.d -c ${PROJECT_SOURCE_DIR}/${src} -o ${_o}
        DEPENDS ${PROJECT_SOURCE_DIR}/${src} DEPFILE ${_o}.d
        COMMENT "clang++-14 (fuzzing): ${src}" VERBATIM)
      list(APPEND _objs ${_o})
    endforeach()
    set(_exe ${_fz_dir}/fuzz_${t})
    add_custom_command(OUTPUT ${_exe}
      COMMAND ${SJ_CLANGXX14} -fsanitize=fuzzer,address,undefined ${_objs} -o ${_exe}
              $<TARGET_FILE:symjax> -Wl,-rpath,$<TARGET_FILE_DIR:symjax> -lz -lpng -ljpeg
      DEPENDS ${_objs} symjax COMMENT "linking fuzz_${t} (fuzzing)" VERBATIM)
    add_custom_target(fuzz_${t}_ci ALL DEPENDS ${_exe})
    file(MAKE_DIRECTORY ${_fz_dir}/${t}/new ${_fz_dir}/findings)
    # new inputs go to a scratch corpus in the build folder; a finding is kept in findings/
    add_test(NAME fuzz.${t}
      COMMAND ${_exe} -max_total_time=${SJ_CI_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048
              -max_len=65536 -print_final_stats=1 -artifact_prefix=${_fz_dir}/findings/${t}-
              ${_fz_dir}/${t}/new ${PROJECT_SOURCE_DIR}/fuzz/corpus/${t})
    set_tests_properties(fuzz.${t} PROPERTIES LABELS fuzz TIMEOUT 300)
  endforeach()
endif()
