# The man pages (man/*.<section>, roff written by hand), compressed with `gzip -9n` as Debian
# installs them, each in the package of what it documents. SAN_MAN_PAGES is also the list
# tests/install/man_pages_test.sh renders and checks against each program's --help.
set(SAN_MAN_PAGES
  "sanrun.1 sanlib-tools"
  "sanstat.8 sanlib-tools"
  "ftp_client.1 sanlib-tools"
  "san.7 sanlib-tools"
  "libsan.3 libsan-dev"
  "rpcgen_via.1 rpcgen-via"
  "rpcvia.3 librpcvia-dev"
  "ftpd.8 sanlib-ftpd"
  "drpc.1 sanlib-drpc"
  "drpcd.8 sanlib-drpc")
find_program(SAN_GZIP gzip REQUIRED)
set(man_out ${PROJECT_BINARY_DIR}/man)
foreach(entry IN LISTS SAN_MAN_PAGES)
  separate_arguments(entry)
  list(GET entry 0 page)
  list(GET entry 1 component)
  string(REGEX REPLACE "^.*\\." "" section ${page})
  set(source ${PROJECT_SOURCE_DIR}/man/${page})
  add_custom_command(OUTPUT ${man_out}/${page}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${man_out}
    COMMAND ${SAN_GZIP} -9nc ${source} > ${man_out}/${page}.gz
    DEPENDS ${source} COMMENT "gzip ${page}")
  list(APPEND man_outputs ${man_out}/${page}.gz)
  install(FILES ${man_out}/${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section}
          COMPONENT ${component})
endforeach()
add_custom_target(man_pages ALL DEPENDS ${man_outputs})
