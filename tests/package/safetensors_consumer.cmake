# The safetensors component's consumer (safetensors_consumer.cpp), where the component exists:
# asked for by name (find_package) or present as a target (add_subdirectory). It runs as part of
# the build, so a failure fails the package test.
if(TARGET blockscale::safetensors)
  add_executable(blockscale_safetensors_consumer ${CMAKE_CURRENT_LIST_DIR}/safetensors_consumer.cpp)
  target_link_libraries(blockscale_safetensors_consumer PRIVATE blockscale::safetensors)
  add_custom_command(TARGET blockscale_safetensors_consumer POST_BUILD
                     COMMAND blockscale_safetensors_consumer ${CMAKE_CURRENT_BINARY_DIR})
endif()
