# san_public_headers(TARGET DIR...): TARGET's headers are included by their path from the
# repository root ("ftp/protocol/reply.h", "drpc/node/auth.h"), and only by TARGET and the targets
# that link it. Each DIR (relative to the repository root) is linked into a view of its own under
# the build tree, and that view, holding TARGET's directories alone, is TARGET's public include
# root: an include of a part the target does not link (sideways or upwards) does not compile.
function(san_public_headers target)
  set(view ${CMAKE_BINARY_DIR}/include_views/${target})
  foreach(dir ${ARGN})
    get_filename_component(parent ${view}/${dir} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${dir} ${view}/${dir} SYMBOLIC)
  endforeach()
  target_include_directories(${target} PUBLIC ${view})
endfunction()
