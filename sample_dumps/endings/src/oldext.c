/* oldext.dll - the native part of an extension built for CPython 3.9, loaded into another
 * Python. It is linked against python39.dll (an import library made with dlltool from
 * python39.def: only the names it uses) and its module init calls the C API of that DLL.
 *
 *   x86_64-w64-mingw32-dlltool -d src/python39.def -l $CACHE/libpython39.a
 *   x86_64-w64-mingw32-gcc -O2 -fno-optimize-sibling-calls -g0 -shared -nostdlib \
 *       -e DllMain -o bin/oldext.dll src/oldext.c $CACHE/libpython39.a -lkernel32
 *
 * CPython refuses a .pyd whose direct import is another pythonXY.dll ("Module use of
 * python39.dll conflicts with this version of Python"), so the program loads it with ctypes
 * (as a helper DLL of an extension would be loaded): the Windows loader then maps the
 * python39.dll next to it into the python311.dll process. That python39.dll was never
 * initialised: no thread state, no interpreter, and PyModule_Create2 reads the
 * interpreter through a NULL thread state.
 * No Python headers: the few declarations are written out for the x64 layout.
 */
#include <windows.h>
#include <stddef.h>

typedef struct _object { ptrdiff_t ob_refcnt; void *ob_type; } PyObject;

typedef struct {
    PyObject ob_base;
    PyObject *(*m_init)(void);
    ptrdiff_t m_index;
    PyObject *m_copy;
} PyModuleDef_Base;

typedef struct {
    PyModuleDef_Base m_base;
    const char *m_name;
    const char *m_doc;
    ptrdiff_t m_size;
    void *m_methods;
    void *m_slots;
    void *m_traverse;
    void *m_clear;
    void *m_free;
} PyModuleDef;

__declspec(dllimport) PyObject *PyModule_Create2(PyModuleDef *def, int module_api_version);

#define PYTHON_API_VERSION 1013

static PyModuleDef oldext_module = {
    { { 1, NULL }, NULL, 0, NULL },
    "oldext", "fast CSV helpers (built for CPython 3.9)", -1, NULL, NULL, NULL, NULL, NULL,
};

BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved)
{
    (void)instance; (void)reason; (void)reserved;
    return TRUE;
}

__declspec(dllexport) __attribute__((noinline)) PyObject *PyInit_oldext(void)
{
    return PyModule_Create2(&oldext_module, PYTHON_API_VERSION);
}
