# Reads a name list of the registry (include/blockscale/contract/registry.hpp) into a CMake list,
# so that what CMake makes per format follows the one declaration:
#   blockscale_registry_names(<out-var> <array>)   e.g. (formats scalar_format_names)
# The array must be declared as `inline constexpr const char* <array>[] = {"a", "b", ...};`.
function(blockscale_registry_names out array)
  set(registry ${PROJECT_SOURCE_DIR}/include/blockscale/contract/registry.hpp)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${registry})
  file(READ ${registry} text)
  if(NOT text MATCHES "${array}\\[\\] = {([^}]*)}")
    message(FATAL_ERROR "blockscale_registry_names: no array '${array}' in ${registry}")
  endif()
  string(REGEX MATCHALL "\"[A-Za-z0-9_]+\"" quoted "${CMAKE_MATCH_1}")
  string(REPLACE "\"" "" names "${quoted}")
  if(NOT names)
    message(FATAL_ERROR "blockscale_registry_names: '${array}' in ${registry} lists no names")
  endif()
  set(${out} ${names} PARENT_SCOPE)
endfunction()
