# cmake -DPTX=<file.ptx> -DOUT=<file.cpp> -DSYMBOL=<name> -P embed_ptx.cmake
# Writes a C++ source defining `extern const char <SYMBOL>[]` holding the PTX
# text, so the workload binaries carry their kernel image with them.
file(READ "${PTX}" ptx_text)
string(FIND "${ptx_text}" ")egpu_ptx\"" collision)
if(NOT collision EQUAL -1)
  message(FATAL_ERROR "embed_ptx: ${PTX} contains the raw-string delimiter")
endif()
file(WRITE "${OUT}.tmp"
  "// Generated from ${PTX} by embed_ptx.cmake; do not edit.\n"
  "namespace egpu::workload {\n"
  "extern const char ${SYMBOL}[];\n"
  "const char ${SYMBOL}[] = R\"egpu_ptx(${ptx_text})egpu_ptx\";\n"
  "}  // namespace egpu::workload\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
