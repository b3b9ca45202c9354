# upsim::warnings — the warning set every upsim target compiles with.
add_library(upsim_warnings INTERFACE)
add_library(upsim::warnings ALIAS upsim_warnings)
target_compile_options(upsim_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wsuggest-override
  -Wold-style-cast -Wcast-align -Wunused -Woverloaded-virtual
  -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
if(UPSIM_WARNINGS_AS_ERRORS)
  target_compile_options(upsim_warnings INTERFACE -Werror)
endif()

# upsim::sanitize — address + undefined behaviour sanitizers when UPSIM_SANITIZE is ON.
add_library(upsim_sanitize INTERFACE)
add_library(upsim::sanitize ALIAS upsim_sanitize)
if(UPSIM_SANITIZE)
  target_compile_options(upsim_sanitize INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(upsim_sanitize INTERFACE -fsanitize=address,undefined)
endif()
