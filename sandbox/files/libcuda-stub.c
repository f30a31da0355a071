/* SANDBOX STAND-IN -- NOT NVIDIA's libcuda.
 * An empty shared object installed as libcuda.so.1 in sandbox nodes so that
 * link steps (-lcuda) and "is libcuda present" checks behave as on a GPU
 * node. It exports no CUDA driver API: anything that calls into it fails. */
const char sandbox_libcuda_stub[] =
    "SANDBOX STAND-IN: empty libcuda.so.1 built by python3 -m sandbox";
