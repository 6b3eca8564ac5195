/* gpuext.pyd - the native part of a GPU backend: a CPython extension module that delay-loads
 * its CUDA libraries, as ML libraries do (the DLLs are only needed once a GPU function runs).
 *
 * Linked against the stable ABI's python3.dll (limited API only, an import library made with
 * dlltool from python3.def), so the same .pyd loads in 3.10 and 3.12, and against two
 * DELAY-loaded CUDA DLLs through dlltool's delay-import libraries:
 *
 *   x86_64-w64-mingw32-dlltool -d src/python3.def -l $CACHE/libpython3.a
 *   cd $CACHE/delay   # dlltool names its labels after the output: __tailMerge_cudnn64_8_dll
 *   x86_64-w64-mingw32-dlltool -d src/cudnn64_8.def -y cudnn64_8_dll
 *   x86_64-w64-mingw32-dlltool -d src/cudart64_110.def -y cudart64_110_dll
 *   x86_64-w64-mingw32-gcc -O2 -fno-optimize-sibling-calls -g0 -shared -nostdlib \
 *       -e DllMain -Wl,--strip-debug -o bin/gpuext.pyd src/gpuext.c \
 *       $CACHE/delay/cudnn64_8_dll $CACHE/delay/cudart64_110_dll $CACHE/libpython3.a \
 *       -lmingwex -lkernel32
 *   python3 src/set_delay_dir.py bin/gpuext.pyd
 *
 * The first call of a delay-loaded function (`call *__imp_<function>`) goes through its load
 * stub (dlltool's, unnamed, right after the function's jmp thunk: `lea __imp_<function>,%rax;
 * jmp __tailMerge_<dll>`) and __tailMerge_<dll> to mingw-w64's __delayLoadHelper2
 * (libmingwex.a, delayimp.o), which does LoadLibraryA(dll) and GetProcAddress(function).
 * When either fails (and no failure hook is set) it raises
 *   0xC06D007E  VcppException(ERROR_SEVERITY_ERROR, ERROR_MOD_NOT_FOUND)   the DLL is missing
 *   0xC06D007F  VcppException(ERROR_SEVERITY_ERROR, ERROR_PROC_NOT_FOUND)  the DLL lacks the function
 * with one parameter, the address of its DelayLoadInfo on the stack. Nothing handles it: the
 * process dies of an unhandled exception.
 *
 *   gpuext.cudnn_version()  -> cudnnGetVersion()          cudnn64_8.dll is nowhere -> 0xC06D007E
 *   gpuext.alloc_async(n)   -> cudaRuntimeGetVersion(&v)  the old cudart64_110.dll has it
 *                           -> cudaMallocAsync(&p, n, 0)  ... but not this -> 0xC06D007F
 * GNU ld leaves the PE's Delay Import Directory entry (DataDirectory[13]) zero; build.sh sets
 * it afterwards with src/set_delay_dir.py, from the __DELAY_IMPORT_DESCRIPTOR_* symbols and the
 * zero descriptor at the end of this file (the Windows loader never reads the entry; tools do).
 * No Python headers: the few declarations are written out for the x64 layout.
 */
#include <windows.h>
#include <stddef.h>

#define NOINLINE __attribute__((noinline))

typedef ptrdiff_t Py_ssize_t;
typedef struct _object { Py_ssize_t ob_refcnt; void *ob_type; } PyObject;
typedef PyObject *(*PyCFunction)(PyObject *, PyObject *);

typedef struct {
    const char *ml_name;
    PyCFunction ml_meth;
    int ml_flags;
    const char *ml_doc;
} PyMethodDef;

typedef struct {
    PyObject ob_base;
    PyObject *(*m_init)(void);
    Py_ssize_t m_index;
    PyObject *m_copy;
} PyModuleDef_Base;

typedef struct {
    PyModuleDef_Base m_base;
    const char *m_name;
    const char *m_doc;
    Py_ssize_t m_size;
    PyMethodDef *m_methods;
    void *m_slots;
    void *m_traverse;
    void *m_clear;
    void *m_free;
} PyModuleDef;

#define METH_NOARGS 0x0004
#define METH_O 0x0008
#define PYTHON_ABI_VERSION 3

/* python3.dll (stable ABI) */
__declspec(dllimport) PyObject *PyModule_Create2(PyModuleDef *def, int module_api_version);
__declspec(dllimport) PyObject *PyLong_FromLong(long value);
__declspec(dllimport) PyObject *PyLong_FromVoidPtr(void *p);
__declspec(dllimport) Py_ssize_t PyLong_AsSsize_t(PyObject *value);
__declspec(dllimport) PyObject *PyErr_Occurred(void);
__declspec(dllimport) void PyErr_SetString(PyObject *type, const char *message);
__declspec(dllimport) extern PyObject *PyExc_RuntimeError;

/* cudnn64_8.dll, delay-loaded */
__declspec(dllimport) size_t cudnnGetVersion(void);
/* cudart64_110.dll, delay-loaded */
typedef int cudaError_t;
__declspec(dllimport) cudaError_t cudaRuntimeGetVersion(int *runtime_version);
__declspec(dllimport) cudaError_t cudaMallocAsync(void **dev_ptr, size_t size, void *stream);

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)instance; (void)reason; (void)reserved;
    return TRUE;
}

/* gpuext.cudnn_version(): the cuDNN version number (8xxx) */
static NOINLINE PyObject *gpuext_cudnn_version(PyObject *self, PyObject *unused)
{
    (void)self; (void)unused;
    size_t version = cudnnGetVersion();
    return PyLong_FromLong((long)version);
}

/* gpuext.alloc_async(n): n bytes of device memory from the stream-ordered allocator */
static NOINLINE PyObject *gpuext_alloc_async(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n < 0 && PyErr_Occurred())
        return NULL;
    int runtime = 0;
    if (cudaRuntimeGetVersion(&runtime) != 0 || runtime < 11000) {
        PyErr_SetString(PyExc_RuntimeError, "gpuext: no CUDA 11 runtime");
        return NULL;
    }
    void *p = NULL;
    cudaError_t status = cudaMallocAsync(&p, (size_t)n, NULL);
    if (status != 0) {
        PyErr_SetString(PyExc_RuntimeError, "gpuext: cudaMallocAsync failed");
        return NULL;
    }
    return PyLong_FromVoidPtr(p);
}

static PyMethodDef gpuext_methods[] = {
    { "cudnn_version", gpuext_cudnn_version, METH_NOARGS, "cudnnGetVersion()" },
    { "alloc_async", gpuext_alloc_async, METH_O, "cudaMallocAsync(&p, n, 0)" },
    { NULL, NULL, 0, NULL },
};

static PyModuleDef gpuext_module = {
    { { 1, NULL }, NULL, 0, NULL },
    "gpuext", "GPU backend (CUDA 11, cuDNN 8; delay-loaded)", -1, gpuext_methods,
    NULL, NULL, NULL, NULL,
};

__declspec(dllexport) NOINLINE PyObject *PyInit_gpuext(void)
{
    return PyModule_Create2(&gpuext_module, PYTHON_ABI_VERSION);
}

/* The zero ImgDelayDescr that ends the delay import descriptors: dlltool's descriptors are
 * in .text$2, this one follows them in .text$3 (ld sorts .text$*), for set_delay_dir.py. */
__attribute__((section(".text$3"), aligned(4), used))
const unsigned char _NULL_DELAY_IMPORT_DESCRIPTOR[32] = { 0 };
