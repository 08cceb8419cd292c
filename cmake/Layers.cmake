# The library's layers (docs/architecture.md, "Layers"): which folder of src/ belongs to which
# layer, and which layers each may use. CMakeLists.txt builds one object library per layer from
# this table, and cmake/CheckLayers.cmake (run by every build) fails the build when a file
# includes a header of a layer its own does not use, or a third-party header its layer does not
# own. Included by both.

# path under src/ -> layer; the first matching prefix wins
set(SJ_LAYER_MAP
  backend/reference/Interpreter.cpp reference_backend
  backend/reference/                reference
  backend/cpu/                      cpu
  backend/llvm/                     codegen
  backend/cuda/                     cuda
  backend/                          backend
  core/                             ir
  ops/                              ir
  autodiff/                         ir
  api/                              ir
  compiler/                         compiler
  runtime/                          runtime
  nn/                               nn
  data/                             data
  io/                               data
  startup/                          env
  dist/                             dist)

# The layers in build order, each with every layer it may use (transitively closed).
#   dist               the MPI world and its collectives on buffers (MPI is private to it)
#   ir                 graph IR, op rows and type rules, autodiff, the tensor API, IR text
#   reference          reference kernels (the oracle; constant folding runs them)
#   compiler           passes, fusion, kernel IR, memory plan -> ExecPlan, the Target interface
#   backend            the Executable interface and the backend registry
#   reference_backend  the reference interpreter as a backend
#   codegen            the kernel IR's per-point expression as LLVM IR, shared by the targets
#                      that render kernels through LLVM (cpu, cuda)
#   cpu                the cpu target and runner: LLVM JIT, oneDNN, BLAS/LAPACK, OpenMP
#   cuda               the GPU target and runner (libsymjax_cuda.so, a plugin the registry
#                      loads when "cuda" is asked for): NVPTX kernels, the CUDA driver API
#   runtime            function(), variables, Tensor::eval
#   nn                 layers, losses, optimizers, schedules
#   data               data loaders, checkpoints, graph export
#   env                libsymjax_env.so (the OpenMP wait policy; a library of its own)
set(SJ_LAYERS dist ir reference compiler backend reference_backend codegen cpu cuda runtime nn data env)
set(SJ_LAYER_DEPS_dist "")
set(SJ_LAYER_DEPS_ir dist)
set(SJ_LAYER_DEPS_reference ir dist)
set(SJ_LAYER_DEPS_compiler reference ir dist)
set(SJ_LAYER_DEPS_backend ir dist)
set(SJ_LAYER_DEPS_reference_backend backend reference ir dist)
set(SJ_LAYER_DEPS_codegen compiler reference ir dist)
set(SJ_LAYER_DEPS_cpu codegen compiler backend reference ir dist)
set(SJ_LAYER_DEPS_cuda codegen compiler backend reference ir dist)
set(SJ_LAYER_DEPS_runtime backend ir dist)
set(SJ_LAYER_DEPS_nn runtime backend ir dist)
set(SJ_LAYER_DEPS_data runtime backend ir dist)
set(SJ_LAYER_DEPS_env "")

# Third-party headers (prefixes of <...> includes) only the named layers ("a|b": either) may
# include.
set(SJ_EXTERNAL_MAP
  llvm/     codegen|cpu|cuda
  cuda.h    cuda
  cublas    cuda
  cudnn     cuda
  dnnl      cpu
  oneapi/   cpu
  omp.h     cpu
  cblas     cpu
  lapacke   cpu
  png.h     data
  jpeglib.h data
  zlib.h    data
  mpi.h     dist)

# sj_prefix_lookup(<list of prefix value pairs> <text> <out>): the value of the first prefix that
# starts <text>, or "" when none does.
function(sj_prefix_lookup map text out)
  list(LENGTH map n)
  math(EXPR last "${n} - 1")
  foreach(i RANGE 0 ${last} 2)
    math(EXPR j "${i} + 1")
    list(GET map ${i} prefix)
    string(FIND "${text}" "${prefix}" pos)
    if(pos EQUAL 0)
      list(GET map ${j} value)
      set(${out} ${value} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()
