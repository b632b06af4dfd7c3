# cmake/ui_notices.cmake - the third-party notices of the libraries bundled into the explorer
# (cmake -P): for each package of PACKAGES (a |-separated list) under MODULES (node_modules), its
# name, version and licence text, written to OUT, served as /assets/licenses.txt.
string(REPLACE "|" ";" PACKAGES "${PACKAGES}")
set(body "Third-party software bundled into the weft explorer's app.js\n")
foreach(pkg IN LISTS PACKAGES)
  file(READ "${MODULES}/${pkg}/package.json" manifest)
  string(JSON version GET "${manifest}" version)
  file(GLOB licence "${MODULES}/${pkg}/LICENSE*")
  if(NOT licence)
    message(FATAL_ERROR "${MODULES}/${pkg} has no LICENSE file")
  endif()
  list(GET licence 0 licence)
  file(READ "${licence}" text)
  string(APPEND body "\n== ${pkg} ${version} ==\n\n${text}\n")
endforeach()
file(WRITE "${OUT}" "${body}")
