/* tfstack.dll: `!tfstack` as a debugger extension command, for WinDbg (classic and the new
 * one), cdb and kd, with no JavaScript provider and no pykd bootstrapper.
 *
 *     .load C:\path\to\windbg_scripts\tfstack.dll
 *     !tfstack [--all] [--thread TID] [--json] [--rows N] [--max-frames N] [--plain]
 *              [--image-path DIR]... [--symbol-path SPEC]...
 *     !tfstack.help
 *
 * It finds the Python that has pykd 0.3.4.15: the folder in the environment variable
 * DUMPKIT_PYTHON, else the python.org installs registered under
 * Software\Python\PythonCore\<version>\InstallPath (PEP 514; HKCU, then HKLM; 3.9, then
 * 3.8). It loads that Python's DLL by full path (so its folder's DLLs are found), then
 * its pykd.pyd (Lib\site-packages\pykd\pykd.pyd), which is itself a debugger extension
 * (DebugExtensionInitialize and `py`), and runs tfstack.py (next to this DLL) with
 * pykd's `py -g`: in the main interpreter, whose imports stay loaded between runs.
 *
 * The options go to tfstack.py in the environment variable DUMPKIT_TFSTACK_ARGS
 * ("!tfstack " + the text as typed), set for the run only: pykd 0.3.4.15's `py` hands a
 * script's arguments to Python from strings it has already freed. tfstack.py prints
 * through pykd, so its DML reaches the debugger as DML.
 *
 * When no Python fits it prints one line saying what it looked for and how to fix it.
 *
 * Built by windbg_scripts/build_tfstack_dll.sh with mingw-w64 (x64, C, no C runtime
 * beyond msvcrt); the built DLL is committed next to this file.
 */
#define INITGUID
#include <windows.h>
#include <stdio.h>
#include <stdarg.h>
#include <wchar.h>
#include <dbgeng.h>

#define EXPORT __declspec(dllexport)
#define ARGS_ENV L"DUMPKIT_TFSTACK_ARGS"
#define PYTHON_ENV L"DUMPKIT_PYTHON"
#define PYKD_RELATIVE L"\\Lib\\site-packages\\pykd\\pykd.pyd"
#define BIG 4096

typedef HRESULT(CALLBACK *ExtensionInit)(PULONG, PULONG);

static HMODULE g_pykd;          /* pykd.pyd, once loaded */
static PDEBUG_EXTENSION_CALL g_py; /* its `py` command */
static WCHAR g_python[MAX_PATH];   /* the Python folder it came from */

static void say(PDEBUG_CLIENT client, ULONG mask, const char *format, ...)
{
    char text[BIG * 2];
    va_list args;
    va_start(args, format);
    _vsnprintf(text, sizeof text - 1, format, args);
    va_end(args);
    text[sizeof text - 1] = 0;
    IDebugControl *control = NULL;
    if (client && SUCCEEDED(client->lpVtbl->QueryInterface(client, &IID_IDebugControl, (void **)&control))) {
        control->lpVtbl->Output(control, mask, "%s", text);
        control->lpVtbl->Release(control);
    }
}

static int exists(const WCHAR *path)
{
    return GetFileAttributesW(path) != INVALID_FILE_ATTRIBUTES;
}

/* UTF-16 -> the ANSI code page, for the debugger's output and pykd's `py` */
static void narrow(const WCHAR *in, char *out, int size)
{
    if (!WideCharToMultiByte(CP_ACP, 0, in, -1, out, size, NULL, NULL))
        out[0] = 0;
}

static int has_pykd(const WCHAR *folder)
{
    WCHAR path[MAX_PATH + 64];
    if (!folder[0] || wcslen(folder) >= MAX_PATH)
        return 0;
    _snwprintf(path, MAX_PATH + 63, L"%ls%ls", folder, PYKD_RELATIVE);
    path[MAX_PATH + 63] = 0;
    return exists(path);
}

static void strip_slash(WCHAR *folder)
{
    size_t n = wcslen(folder);
    while (n > 0 && (folder[n - 1] == L'\\' || folder[n - 1] == L'/'))
        folder[--n] = 0;
}

/* The Python folder that has pykd, into `folder`; else 0 and what was looked at in `seen`. */
static int find_python(WCHAR *folder, char *seen, size_t seen_size)
{
    static const WCHAR *versions[] = {L"3.9", L"3.8"};
    static const struct {
        HKEY hive;
        const char *name;
    } hives[] = {{HKEY_CURRENT_USER, "HKCU"}, {HKEY_LOCAL_MACHINE, "HKLM"}};
    char part[MAX_PATH * 2];
    seen[0] = 0;
    DWORD n = GetEnvironmentVariableW(PYTHON_ENV, folder, MAX_PATH);
    if (n > 0 && n < MAX_PATH) {
        strip_slash(folder);
        if (has_pykd(folder))
            return 1;
        char shown[MAX_PATH * 2];
        narrow(folder, shown, sizeof shown);
        _snprintf(part, sizeof part, "DUMPKIT_PYTHON=%s has no Lib\\site-packages\\pykd\\pykd.pyd; ", shown);
    } else {
        _snprintf(part, sizeof part, "DUMPKIT_PYTHON is not set; ");
    }
    part[sizeof part - 1] = 0;
    strncat(seen, part, seen_size - strlen(seen) - 1);
    int registered = 0;
    for (int h = 0; h < 2; h++) {
        for (int v = 0; v < 2; v++) {
            WCHAR key[128];
            _snwprintf(key, 127, L"Software\\Python\\PythonCore\\%ls\\InstallPath", versions[v]);
            key[127] = 0;
            DWORD size = MAX_PATH * sizeof(WCHAR);
            folder[0] = 0;
            if (RegGetValueW(hives[h].hive, key, NULL, RRF_RT_REG_SZ, NULL, folder, &size) != ERROR_SUCCESS)
                continue;
            registered++;
            strip_slash(folder);
            if (has_pykd(folder))
                return 1;
            char shown[MAX_PATH * 2];
            narrow(folder, shown, sizeof shown);
            _snprintf(part, sizeof part, "%s %ls at %s has no pykd; ", hives[h].name, versions[v], shown);
            part[sizeof part - 1] = 0;
            strncat(seen, part, seen_size - strlen(seen) - 1);
        }
    }
    if (!registered)
        strncat(seen, "no Python 3.9 or 3.8 registered under HKCU or HKLM\\Software\\Python\\PythonCore; ",
                seen_size - strlen(seen) - 1);
    folder[0] = 0;
    return 0;
}

/* python3X.dll in `folder` (not the stable-ABI python3.dll), into `dll` */
static int python_dll(const WCHAR *folder, WCHAR *dll)
{
    WCHAR pattern[MAX_PATH + 32];
    WIN32_FIND_DATAW found;
    _snwprintf(pattern, MAX_PATH + 31, L"%ls\\python3*.dll", folder);
    pattern[MAX_PATH + 31] = 0;
    HANDLE h = FindFirstFileW(pattern, &found);
    if (h == INVALID_HANDLE_VALUE)
        return 0;
    int ok = 0;
    do {
        if (_wcsicmp(found.cFileName, L"python3.dll") != 0) {
            _snwprintf(dll, MAX_PATH, L"%ls\\%ls", folder, found.cFileName);
            dll[MAX_PATH - 1] = 0;
            ok = 1;
        }
    } while (!ok && FindNextFileW(h, &found));
    FindClose(h);
    return ok;
}

/* pykd.pyd of `folder`, loaded and initialized as the debugger would an extension */
static int load_pykd(PDEBUG_CLIENT client, const WCHAR *folder)
{
    WCHAR dll[MAX_PATH], pyd[MAX_PATH + 64];
    char shown[MAX_PATH * 2];
    narrow(folder, shown, sizeof shown);
    if (!python_dll(folder, dll)) {
        say(client, DEBUG_OUTPUT_ERROR, "tfstack: error: no python3X.dll in %s (the folder of a 64-bit CPython 3.8 or 3.9 install)\n", shown);
        return 0;
    }
    /* by full path, with its own folder first for its dependencies (vcruntime140.dll);
     * pykd.pyd's import of python3X.dll then finds it loaded */
    if (!LoadLibraryExW(dll, NULL, LOAD_WITH_ALTERED_SEARCH_PATH)) {
        say(client, DEBUG_OUTPUT_ERROR, "tfstack: error: cannot load %ls (Windows error %lu); a 64-bit debugger needs a 64-bit Python\n",
            dll, GetLastError());
        return 0;
    }
    _snwprintf(pyd, MAX_PATH + 63, L"%ls%ls", folder, PYKD_RELATIVE);
    pyd[MAX_PATH + 63] = 0;
    /* Python finds its standard library from PYTHONHOME while pykd starts it (the
     * debugger's own folder is not a Python's); any PYTHONHOME of the user's is put back. */
    WCHAR saved[BIG];
    DWORD had = GetEnvironmentVariableW(L"PYTHONHOME", saved, BIG);
    SetEnvironmentVariableW(L"PYTHONHOME", folder);
    HMODULE pykd = LoadLibraryExW(pyd, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
    HRESULT hr = E_FAIL;
    ExtensionInit init = NULL;
    if (pykd) {
        init = (ExtensionInit)(void *)GetProcAddress(pykd, "DebugExtensionInitialize");
        g_py = (PDEBUG_EXTENSION_CALL)(void *)GetProcAddress(pykd, "py");
        if (init && g_py) {
            ULONG version = 0, flags = 0;
            hr = init(&version, &flags);
        }
    }
    SetEnvironmentVariableW(L"PYTHONHOME", had > 0 && had < BIG ? saved : NULL);
    if (!pykd) {
        say(client, DEBUG_OUTPUT_ERROR, "tfstack: error: cannot load %ls (Windows error %lu)\n", pyd, GetLastError());
        return 0;
    }
    if (!init || !g_py || FAILED(hr)) {
        say(client, DEBUG_OUTPUT_ERROR,
            "tfstack: error: %ls did not start (%s 0x%08lx); pykd 0.3.4.15 is the version tfstack needs\n", pyd,
            init && g_py ? "DebugExtensionInitialize failed" : "not a pykd extension", (unsigned long)hr);
        g_py = NULL;
        return 0;
    }
    g_pykd = pykd;
    lstrcpynW(g_python, folder, MAX_PATH);
    return 1;
}

static int script_path(WCHAR *script)
{
    HMODULE self = NULL;
    if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
                            (LPCWSTR)(void *)script_path, &self))
        return 0;
    DWORD n = GetModuleFileNameW(self, script, MAX_PATH);
    if (n == 0 || n >= MAX_PATH)
        return 0;
    while (n > 0 && script[n - 1] != L'\\' && script[n - 1] != L'/')
        n--;
    if (n + 11 >= MAX_PATH)
        return 0;
    lstrcpyW(script + n, L"tfstack.py");
    return 1;
}

EXPORT HRESULT CALLBACK DebugExtensionInitialize(PULONG version, PULONG flags)
{
    *version = DEBUG_EXTENSION_VERSION(1, 0);
    *flags = 0;
    return S_OK;
}

EXPORT void CALLBACK DebugExtensionUninitialize(void)
{
    /* pykd.pyd stays loaded: finalizing the Python it started inside the debugger is
     * what kills it (pykd's own unload does Py_Finalize) */
}

EXPORT HRESULT CALLBACK help(PDEBUG_CLIENT client, PCSTR args)
{
    (void)args;
    say(client, DEBUG_OUTPUT_NORMAL,
        "!tfstack [options]   what killed this process: verdict, recursion, frame sizes, stack budget, stacks\n"
        "  --all               every thread's stack\n"
        "  --thread TID        also this thread's stack (OS thread id; hex with 0x)\n"
        "  --json              the JSON report (as dumpkit analyze --format json)\n"
        "  --rows N            frames shown per stack (default 40)\n"
        "  --max-frames N      most frames walked on the crashing thread (default 2,000,000)\n"
        "  --image-path DIR    folder searched for module images (repeatable)\n"
        "  --symbol-path SPEC  symbol store folder or srv*cache*url\n"
        "  --plain             plain text instead of DML\n"
        "  --help              tfstack.py's own usage\n"
        "Runs windbg_scripts\\tfstack.py (next to tfstack.dll) in the Python that has pykd 0.3.4.15:\n"
        "the folder in DUMPKIT_PYTHON, else python.org's 3.9 or 3.8 registered in HKCU/HKLM\\Software\\Python\\PythonCore.\n"
        "Set-up: py -3.9 -m pip install \"dumpkit[windbg]\"  (windbg_scripts\\README.md)\n");
    return S_OK;
}

EXPORT HRESULT CALLBACK tfstack(PDEBUG_CLIENT client, PCSTR args)
{
    WCHAR script[MAX_PATH];
    if (!script_path(script) || !exists(script)) {
        say(client, DEBUG_OUTPUT_ERROR, "tfstack: error: tfstack.py is not next to tfstack.dll; keep the windbg_scripts folder together\n");
        return S_OK;
    }
    if (!g_py) {
        WCHAR folder[MAX_PATH];
        char seen[BIG];
        if (!find_python(folder, seen, sizeof seen)) {
            say(client, DEBUG_OUTPUT_ERROR,
                "tfstack: no Python with pykd found (%sthe python.org 3.9/3.8 x64 installs are looked up in the registry); "
                "fix: install 64-bit Python 3.9 or 3.8 from python.org and run py -3.9 -m pip install \"dumpkit[windbg]\", "
                "or set DUMPKIT_PYTHON to the folder of a Python that has pykd 0.3.4.15 and restart the debugger\n",
                seen);
            return S_OK;
        }
        if (!load_pykd(client, folder))
            return S_OK;
    }
    /* the options, as typed, for tfstack.py to read (pykd's own `py` would garble them) */
    int n = MultiByteToWideChar(CP_ACP, 0, args ? args : "", -1, NULL, 0);
    WCHAR *typed = (WCHAR *)HeapAlloc(GetProcessHeap(), 0, (n + 16) * sizeof(WCHAR));
    if (!typed)
        return E_OUTOFMEMORY;
    lstrcpyW(typed, L"!tfstack ");
    MultiByteToWideChar(CP_ACP, 0, args ? args : "", -1, typed + 9, n);
    SetEnvironmentVariableW(ARGS_ENV, typed);
    HeapFree(GetProcessHeap(), 0, typed);
    /* pykd's `py -g "script"`: -g runs it in the main interpreter (pykd 0.3.4.15 deletes a
     * script's sub-interpreter in a way CPython 3.8 answers with a fatal error) */
    char command[MAX_PATH * 2 + 16], path[MAX_PATH * 2];
    narrow(script, path, sizeof path);
    _snprintf(command, sizeof command, "-g \"%s\"", path);
    command[sizeof command - 1] = 0;
    HRESULT hr = g_py(client, command);
    SetEnvironmentVariableW(ARGS_ENV, NULL);
    return hr;
}
