# Writes OUTPUT, a C file defining the test kernels' image as a byte array
# (ordo_cuda_kernels_image, ordo_cuda_kernels_size) from the fat binary
# INPUT, or, when INPUT is empty, an empty image and the reason MISSING
# (ordo_cuda_kernels_missing).
if(INPUT)
  file(READ "${INPUT}" hex HEX)
  string(LENGTH "${hex}" digits)
  math(EXPR size "${digits} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n    "
         bytes "${bytes}")
  set(body "/* Generated from the test kernels (tests/cuda_kernels.cu) by nvcc. */
#include <stddef.h>

/* 8-byte aligned: a fat binary image is read as 64-bit words. */
_Alignas(8) const unsigned char ordo_cuda_kernels_image[${size}] = {
    ${bytes}
};
const size_t ordo_cuda_kernels_size = ${size};
const char ordo_cuda_kernels_missing[] = \"\";
")
else()
  set(body "/* The test kernels were not compiled. */
#include <stddef.h>

_Alignas(8) const unsigned char ordo_cuda_kernels_image[1] = {0};
const size_t ordo_cuda_kernels_size = 0;
const char ordo_cuda_kernels_missing[] = \"${MISSING}\";
")
endif()
file(WRITE "${OUTPUT}" "${body}")
