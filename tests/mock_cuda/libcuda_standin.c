/*
 * libcuda_standin.c - the mock build's stand-in for the CUDA driver,
 * built as libcuda.so.1 (soname included) in the mock build's lib/mockdriver/.
 *
 * It does nothing: it exists so that the mock runtime can load it when it
 * initialises, as the real runtime loads the driver, and ccl's own check
 * "is libcuda.so mapped in this process?" (dev_cuda_loaded) answers as on
 * a machine with a driver, with no test hook in the library. The driver
 * calls themselves are the mock runtime's (mock_driver.c).
 */
__attribute__((visibility("default"))) const char mockcuda_standin[] = "mock CUDA driver stand-in (tests/mock_cuda)";
