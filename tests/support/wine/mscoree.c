/* A stand-in mscoree.dll for running pykd under Wine without a .NET runtime.

   pykd.pyd imports mscoree!CLRCreateInstance statically and, when its module
   initialises, raises "CLRCreateInstance failed" unless the call returns S_OK.
   Wine has no CLR without wine-mono (not packaged in Debian). pykd only uses the
   CLR for optional .NET features, so this DLL answers S_OK with one COM object
   whose every method (after IUnknown's three) returns E_NOTIMPL: pykd then finds
   no runtime and carries on.

   Build: x86_64-w64-mingw32-gcc -shared -O2 -s -o mscoree.dll mscoree.c */

#include <windows.h>

#define METHODS 64 /* more slots than ICLRMetaHost, ICLRRuntimeInfo... have */

typedef HRESULT(STDMETHODCALLTYPE *method_fn)(void *self);

static HRESULT STDMETHODCALLTYPE query_interface(void *self, REFIID riid, void **out)
{
    (void)riid;
    if (out == NULL)
        return E_POINTER;
    *out = self; /* every interface asked for is this object */
    return S_OK;
}

static ULONG STDMETHODCALLTYPE add_ref(void *self)
{
    (void)self;
    return 1; /* static object: never freed */
}

static ULONG STDMETHODCALLTYPE release(void *self)
{
    (void)self;
    return 1;
}

/* Methods take different arguments, but under the x64 calling convention the
   caller cleans the stack, so one body that ignores them serves every slot. */
static HRESULT STDMETHODCALLTYPE not_implemented(void *self)
{
    (void)self;
    return E_NOTIMPL;
}

static void *vtable[METHODS];

static struct {
    void **vtbl;
} instance = {vtable};

static void fill_vtable(void)
{
    int i;
    vtable[0] = (void *)query_interface;
    vtable[1] = (void *)add_ref;
    vtable[2] = (void *)release;
    for (i = 3; i < METHODS; i++)
        vtable[i] = (void *)not_implemented;
}

__declspec(dllexport) HRESULT WINAPI CLRCreateInstance(REFCLSID clsid, REFIID riid, void **out)
{
    (void)clsid;
    (void)riid;
    if (out == NULL)
        return E_POINTER;
    fill_vtable();
    *out = &instance;
    return S_OK;
}

BOOL WINAPI DllMain(HINSTANCE dll, DWORD reason, void *reserved)
{
    (void)dll;
    (void)reason;
    (void)reserved;
    return TRUE;
}
