# Install-time half of san_install_configured (SanInstallConfigured.cmake): runs inside
# cmake_install.cmake, where CMAKE_INSTALL_PREFIX is the prefix being installed to and DESTDIR
# (applied by file(INSTALL)) the staging root. Templates may use:
#   @SAN_PREFIX@ @SAN_BINDIR@ @SAN_SBINDIR@ @SAN_LIBDIR@ @SAN_LIBEXECDIR@ @SAN_INCLUDEDIR@
#   @SAN_DATADIR@ @SAN_SYSCONFDIR@ @SAN_VERSION@ @SAN_STATIC_LIBS@
set(SAN_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(dir BINDIR SBINDIR LIBDIR LIBEXECDIR INCLUDEDIR DATADIR)
  if(IS_ABSOLUTE "${SAN_REL_${dir}}")
    set(SAN_${dir} "${SAN_REL_${dir}}")
  else()
    set(SAN_${dir} "${SAN_PREFIX}/${SAN_REL_${dir}}")
  endif()
endforeach()
# /usr's configuration is in /etc and its units in /lib/systemd/system (Debian policy, and what
# GNUInstallDirs does for /usr); any other prefix keeps both inside itself.
if(IS_ABSOLUTE "${SAN_REL_SYSCONFDIR}")
  set(SAN_SYSCONFDIR "${SAN_REL_SYSCONFDIR}")
elseif(SAN_PREFIX STREQUAL "/usr")
  set(SAN_SYSCONFDIR "/etc")
else()
  set(SAN_SYSCONFDIR "${SAN_PREFIX}/${SAN_REL_SYSCONFDIR}")
endif()
if(SAN_PREFIX STREQUAL "/usr")
  set(SAN_SYSTEMDDIR "/lib/systemd/system")
else()
  set(SAN_SYSTEMDDIR "${SAN_PREFIX}/lib/systemd/system")
endif()

if(SAN_DESTINATION STREQUAL "SYSTEMD")
  set(san_destination "${SAN_SYSTEMDDIR}")
elseif(SAN_DESTINATION MATCHES "^SYSCONF(/.*)?$")
  set(san_destination "${SAN_SYSCONFDIR}${CMAKE_MATCH_1}")
else()
  set(san_destination "${SAN_PREFIX}/${SAN_DESTINATION}")
endif()
configure_file("${SAN_TEMPLATE}" "${SAN_OUTPUT}" @ONLY)
file(INSTALL "${SAN_OUTPUT}" DESTINATION "${san_destination}")
