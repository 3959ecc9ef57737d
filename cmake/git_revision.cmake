# Writes OUT (a header defining ODMOE_GIT_REVISION) from `git describe` of SRC,
# touching it only when the revision changed. Run at every build.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE failed ERROR_QUIET)
if(failed OR rev STREQUAL "")
  set(rev "unknown")
endif()
set(text "#define ODMOE_GIT_REVISION \"${rev}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
