# The CUDA consumer of find_package/ and subdirectory/ (included by both): main.cu, whose own
# kernels instantiate blockscale's warp tile, compiled for the architectures of blockscale's own
# CUDA build (unless the caller names others), with the project's warnings as errors.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  set(CMAKE_CUDA_ARCHITECTURES 80 90 100a 120a)
endif()
enable_language(CUDA)
add_executable(blockscale_consumer_cuda ${CMAKE_CURRENT_LIST_DIR}/main.cu)
target_link_libraries(blockscale_consumer_cuda PRIVATE blockscale::blockscale)
set_target_properties(blockscale_consumer_cuda PROPERTIES CUDA_STANDARD 17
                                                          CUDA_STANDARD_REQUIRED ON)
target_compile_options(blockscale_consumer_cuda
                       PRIVATE -Xcompiler=-Wall,-Wextra,-Werror --Werror=all-warnings)
