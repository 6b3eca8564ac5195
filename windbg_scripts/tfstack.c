/* tfstack.dll: `!tfstack` as a debugger extension command, for WinDbg (classic and the new
 * one), cdb and kd, in whatever 64-bit CPython 3.8-3.13 the user has dumpkit in.
 *
 *     .load C:\path\to\tfstack.dll
 *     !tfstack [--all] [--thread TID] [--json] [--rows N] [--max-frames N] [--plain]
 *              [--image-path DIR]... [--symbol-path SPEC]...
 *     !tfstack.help          (also says which Python it found)
 *
 * The Python, looked for on the first `!tfstack`:
 * 1. the folder in the environment variable DUMPKIT_PYTHON: a Python installation (it has
 *    python3X.dll), or a virtual environment (its pyvenv.cfg names the installation in
 *    `home`; the environment's Lib\site-packages is added to sys.path);
 * 2. else the Python this DLL was installed into by `pip install dumpkit`, when it sits in
 *    that Python's share\dumpkit\windbg folder (an installation or a virtual environment);
 * 3. else the Pythons registered under Software\Python (PEP 514; HKCU, then HKLM;
 *    python.org's PythonCore first, then other distributors): 64-bit, 3.8 to 3.13,
 *    newest first, the first with dumpkit installed (Lib\site-packages\dumpkit, a
 *    dumpkit-*.dist-info there or in the user's site-packages), else the newest.
 *
 * It is started once per debugger process and never finalized (a Python finalized inside
 * the debugger takes the debugger with it): python3X.dll is loaded by full path,
 * Py_SetPythonHome names its folder (unless a python3X._pth there says what sys.path
 * is, as in python.org's embeddable distribution), Py_InitializeEx(0) starts it without signal
 * handlers (Ctrl-C and Ctrl-Break stay the debugger's), and the GIL is released until a
 * command needs it. A Python already running in the process (one an earlier load of this
 * DLL started, or pykd's) is used as it is.
 *
 * Each `!tfstack` takes the GIL (PyGILState_Ensure) and runs tfstack.py (next to this DLL)
 * as the module _dumpkit_tfstack, calling its run_with_engine(client, options as typed)
 * with the engine's IDebugClient for this call as an integer; dumpkit reads
 * the session through the engine's COM interfaces (dumpkit/sources/dbgeng.py) and writes
 * the report through IDebugControl. The call runs in PyRun_StringFlags with its own dict
 * and every exception is caught in Python, so nothing reaches PyErr_Print (which exits
 * the process on SystemExit); an error comes back as one line, printed here.
 *
 * pykd is not needed (it remains a route of its own: `!py -g ...\tfstack.py`).
 *
 * When no Python fits it prints one line saying what it looked at and how to fix it.
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
#define PYTHON_ENV L"DUMPKIT_PYTHON"
#define MIN_MINOR 8
#define MAX_MINOR 13
#define MAX_CANDIDATES 64
#define BIG 4096
#define PY_FILE_INPUT 257

typedef void PyObject;
static int script_path(WCHAR *script);
typedef int (*Fn_Py_IsInitialized)(void);
typedef void (*Fn_Py_SetPythonHome)(const wchar_t *);
typedef void (*Fn_Py_InitializeEx)(int);
typedef void *(*Fn_PyEval_SaveThread)(void);
typedef int (*Fn_PyGILState_Ensure)(void);
typedef void (*Fn_PyGILState_Release)(int);
typedef PyObject *(*Fn_PyDict_New)(void);
typedef int (*Fn_PyDict_SetItemString)(PyObject *, const char *, PyObject *);
typedef PyObject *(*Fn_PyDict_GetItemString)(PyObject *, const char *);
typedef PyObject *(*Fn_PyLong_FromUnsignedLongLong)(unsigned long long);
typedef PyObject *(*Fn_PyBytes_FromStringAndSize)(const char *, long long);
typedef PyObject *(*Fn_PyImport_ImportModule)(const char *);
typedef PyObject *(*Fn_PyRun_StringFlags)(const char *, int, PyObject *, PyObject *, void *);
typedef const char *(*Fn_PyUnicode_AsUTF8)(PyObject *);
typedef void (*Fn_Py_DecRef)(PyObject *);
typedef void (*Fn_PyErr_Clear)(void);

/* the Python C API this DLL calls, from the python3X.dll it loaded */
static struct {
    Fn_Py_IsInitialized Py_IsInitialized;
    Fn_Py_SetPythonHome Py_SetPythonHome;
    Fn_Py_InitializeEx Py_InitializeEx;
    Fn_PyEval_SaveThread PyEval_SaveThread;
    Fn_PyGILState_Ensure PyGILState_Ensure;
    Fn_PyGILState_Release PyGILState_Release;
    Fn_PyDict_New PyDict_New;
    Fn_PyDict_SetItemString PyDict_SetItemString;
    Fn_PyDict_GetItemString PyDict_GetItemString;
    Fn_PyLong_FromUnsignedLongLong PyLong_FromUnsignedLongLong;
    Fn_PyBytes_FromStringAndSize PyBytes_FromStringAndSize;
    Fn_PyImport_ImportModule PyImport_ImportModule;
    Fn_PyRun_StringFlags PyRun_StringFlags;
    Fn_PyUnicode_AsUTF8 PyUnicode_AsUTF8;
    Fn_Py_DecRef Py_DecRef;
    Fn_PyErr_Clear PyErr_Clear;
} py;

static const char *const API_NAMES[] = {
    "Py_IsInitialized", "Py_SetPythonHome", "Py_InitializeEx", "PyEval_SaveThread", "PyGILState_Ensure",
    "PyGILState_Release", "PyDict_New", "PyDict_SetItemString", "PyDict_GetItemString",
    "PyLong_FromUnsignedLongLong", "PyBytes_FromStringAndSize", "PyImport_ImportModule", "PyRun_StringFlags",
    "PyUnicode_AsUTF8", "Py_DecRef", "PyErr_Clear",
};

typedef struct {
    WCHAR home[MAX_PATH]; /* the installation: python3X.dll and the standard library */
    WCHAR site[MAX_PATH]; /* a virtual environment's site-packages, else empty */
    int minor;
    char origin[160]; /* where it was found, for messages */
} Python;

static int g_ready;             /* the Python below is running and usable */
static Python g_python;
static WCHAR g_home_for_python[MAX_PATH]; /* Py_SetPythonHome keeps the pointer */

/* The Python code each command runs (in a dict of its own holding client, args, script,
 * site): a virtual environment's site-packages first on sys.path (once, before anything
 * is imported from it), tfstack.py as the module _dumpkit_tfstack (loaded once, again when
 * another tfstack.py is asked for), then its run_with_engine, which answers None or one
 * line to print. */
static const char RUN_CODE[] =
    "import sys\n"
    "try:\n"
    "    _site = site.decode('utf-8')\n"
    "    if _site and _site not in sys.path:\n"
    "        import site as _sites\n"
    "        _sites.addsitedir(_site)\n"
    "        sys.path.remove(_site)\n"
    "        sys.path.insert(0, _site)\n"
    "    _path = script.decode('utf-8')\n"
    "    _module = sys.modules.get('_dumpkit_tfstack')\n"
    "    if _module is None or getattr(_module, '__file__', None) != _path:\n"
    "        import importlib.util\n"
    "        _spec = importlib.util.spec_from_file_location('_dumpkit_tfstack', _path)\n"
    "        _module = importlib.util.module_from_spec(_spec)\n"
    "        _spec.loader.exec_module(_module)\n"
    "        sys.modules['_dumpkit_tfstack'] = _module\n"
    "    error = _module.run_with_engine(client, args.decode('mbcs', 'replace'))\n"
    "except BaseException as _e:\n"
    "    error = 'tfstack: error: %s: %s' % (type(_e).__name__, ' '.join(str(_e).split())[:500])\n";

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

static int any_match(const WCHAR *pattern)
{
    WIN32_FIND_DATAW found;
    HANDLE h = FindFirstFileW(pattern, &found);
    if (h == INVALID_HANDLE_VALUE)
        return 0;
    FindClose(h);
    return 1;
}

/* UTF-16 -> the ANSI code page (what the debugger's Output takes) or UTF-8 */
static void narrow(const WCHAR *in, char *out, int size, UINT page)
{
    if (!WideCharToMultiByte(page, 0, in, -1, out, size, NULL, NULL))
        out[0] = 0;
}

static void strip_slash(WCHAR *folder)
{
    size_t n = wcslen(folder);
    while (n > 0 && (folder[n - 1] == L'\\' || folder[n - 1] == L'/'))
        folder[--n] = 0;
}

static void join(WCHAR *out, const WCHAR *folder, const WCHAR *name)
{
    _snwprintf(out, MAX_PATH - 1, L"%ls\\%ls", folder, name);
    out[MAX_PATH - 1] = 0;
}

/* The minor version of the python3X.dll in `folder` (the highest, not the stable-ABI
 * python3.dll nor a free-threaded python3Xt.dll); 0 when there is none. */
static int dll_minor(const WCHAR *folder)
{
    WCHAR pattern[MAX_PATH];
    WIN32_FIND_DATAW found;
    join(pattern, folder, L"python3*.dll");
    HANDLE h = FindFirstFileW(pattern, &found);
    if (h == INVALID_HANDLE_VALUE)
        return 0;
    int best = 0;
    do {
        const WCHAR *p = found.cFileName + 7; /* after "python3" */
        int minor = 0, digits = 0;
        while (*p >= L'0' && *p <= L'9' && digits < 3) {
            minor = minor * 10 + (*p++ - L'0');
            digits++;
        }
        if (digits > 0 && _wcsicmp(p, L".dll") == 0 && minor > best)
            best = minor;
    } while (FindNextFileW(h, &found));
    FindClose(h);
    return best;
}

static void dll_path(const Python *p, WCHAR *out)
{
    WCHAR name[32];
    _snwprintf(name, 31, L"python3%d.dll", p->minor);
    name[31] = 0;
    join(out, p->home, name);
}

/* Whether the folder is a site-packages holding dumpkit (installed, or editable). */
static int dumpkit_in(const WCHAR *site)
{
    WCHAR path[MAX_PATH];
    if (!site[0])
        return 0;
    join(path, site, L"dumpkit\\__init__.py");
    if (exists(path))
        return 1;
    join(path, site, L"dumpkit-*.dist-info");
    return any_match(path);
}

static int has_dumpkit(const Python *p)
{
    WCHAR site[MAX_PATH], user[MAX_PATH], sub[64];
    join(site, p->home, L"Lib\\site-packages");
    if (dumpkit_in(site) || dumpkit_in(p->site))
        return 1;
    DWORD n = GetEnvironmentVariableW(L"APPDATA", user, MAX_PATH);
    if (n == 0 || n >= MAX_PATH - 40)
        return 0;
    _snwprintf(sub, 63, L"Python\\Python3%d\\site-packages", p->minor);
    sub[63] = 0;
    join(site, user, sub);
    return dumpkit_in(site);
}

/* A virtual environment: `folder` (or its parent, for ...\Scripts) holds pyvenv.cfg;
 * its `home` line names the installation. */
static int from_venv(const WCHAR *folder, Python *p)
{
    WCHAR cfg[MAX_PATH], venv[MAX_PATH];
    lstrcpynW(venv, folder, MAX_PATH);
    for (int up = 0; up < 2; up++) {
        join(cfg, venv, L"pyvenv.cfg");
        if (exists(cfg))
            break;
        WCHAR *slash = wcsrchr(venv, L'\\');
        if (!slash || up == 1)
            return 0;
        *slash = 0;
    }
    HANDLE f = CreateFileW(cfg, GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING, 0, NULL);
    if (f == INVALID_HANDLE_VALUE)
        return 0;
    char text[BIG];
    DWORD got = 0;
    BOOL ok = ReadFile(f, text, sizeof text - 1, &got, NULL);
    CloseHandle(f);
    if (!ok)
        return 0;
    text[got] = 0;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        while (*line == ' ' || *line == '\t')
            line++;
        if (_strnicmp(line, "home", 4) == 0) {
            char *eq = strchr(line, '=');
            if (eq) {
                eq++;
                while (*eq == ' ' || *eq == '\t')
                    eq++;
                size_t n = strlen(eq);
                while (n > 0 && (eq[n - 1] == '\r' || eq[n - 1] == ' ' || eq[n - 1] == '\t'))
                    eq[--n] = 0;
                if (!MultiByteToWideChar(CP_UTF8, 0, eq, -1, p->home, MAX_PATH))
                    return 0;
                strip_slash(p->home);
                join(p->site, venv, L"Lib\\site-packages");
                return 1;
            }
        }
        line = next;
    }
    return 0;
}

static int add_candidate(Python *list, int *count, const WCHAR *home, int minor, const char *origin)
{
    if (*count >= MAX_CANDIDATES || !home[0] || wcslen(home) >= MAX_PATH - 40)
        return 0;
    Python *p = &list[*count];
    memset(p, 0, sizeof *p);
    lstrcpynW(p->home, home, MAX_PATH);
    strip_slash(p->home);
    for (int i = 0; i < *count; i++)
        if (_wcsicmp(list[i].home, p->home) == 0)
            return 0; /* the same installation under two keys */
    p->minor = minor;
    lstrcpynA(p->origin, origin, sizeof p->origin);
    (*count)++;
    return 1;
}

/* "3.12" -> 12; "3.12-32" (a 32-bit install) and "3.13t" (free-threaded) -> 0 */
static int tag_minor(const WCHAR *tag)
{
    if (tag[0] != L'3' || tag[1] != L'.')
        return 0;
    int minor = 0, digits = 0;
    const WCHAR *p = tag + 2;
    while (*p >= L'0' && *p <= L'9' && digits < 3) {
        minor = minor * 10 + (*p++ - L'0');
        digits++;
    }
    return digits && *p == 0 ? minor : 0;
}

/* One distributor's registered Pythons (PEP 514: <company>\<tag>\InstallPath, with
 * SysVersion and SysArchitecture where the distributor sets them). */
static void scan_company(HKEY hive, const char *hive_name, const WCHAR *company, Python *list, int *count,
                         char *seen, size_t seen_size)
{
    WCHAR key[300];
    HKEY h;
    _snwprintf(key, 299, L"Software\\Python\\%ls", company);
    key[299] = 0;
    if (RegOpenKeyExW(hive, key, 0, KEY_READ, &h) != ERROR_SUCCESS)
        return;
    for (DWORD i = 0; i < 256; i++) {
        WCHAR tag[128], value[MAX_PATH], sub[300];
        DWORD tag_size = 127, size;
        if (RegEnumKeyExW(h, i, tag, &tag_size, NULL, NULL, NULL, NULL) != ERROR_SUCCESS)
            break;
        tag[127] = 0;
        int minor = 0;
        size = sizeof value;
        if (RegGetValueW(h, tag, L"SysVersion", RRF_RT_REG_SZ, NULL, value, &size) == ERROR_SUCCESS)
            minor = tag_minor(value);
        else if (_wcsicmp(company, L"PythonCore") == 0)
            minor = tag_minor(tag);
        size = sizeof value;
        if (RegGetValueW(h, tag, L"SysArchitecture", RRF_RT_REG_SZ, NULL, value, &size) == ERROR_SUCCESS &&
            _wcsicmp(value, L"64bit") != 0)
            continue;
        _snwprintf(sub, 299, L"%ls\\InstallPath", tag);
        sub[299] = 0;
        size = sizeof value;
        if (RegGetValueW(h, sub, NULL, RRF_RT_REG_SZ, NULL, value, &size) != ERROR_SUCCESS)
            continue;
        char origin[160], shown[MAX_PATH * 2];
        _snprintf(origin, sizeof origin, "%s %ls\\%ls", hive_name, company, tag);
        origin[sizeof origin - 1] = 0;
        if (minor < MIN_MINOR || minor > MAX_MINOR) {
            narrow(value, shown, sizeof shown, CP_ACP);
            char part[MAX_PATH * 3];
            _snprintf(part, sizeof part, "%s at %s is not 3.%d-3.%d; ", origin, shown, MIN_MINOR, MAX_MINOR);
            part[sizeof part - 1] = 0;
            strncat(seen, part, seen_size - strlen(seen) - 1);
            continue;
        }
        strip_slash(value);
        if (dll_minor(value) < MIN_MINOR) {
            narrow(value, shown, sizeof shown, CP_ACP);
            char part[MAX_PATH * 3];
            _snprintf(part, sizeof part, "%s at %s has no python3%d.dll; ", origin, shown, minor);
            part[sizeof part - 1] = 0;
            strncat(seen, part, seen_size - strlen(seen) - 1);
            continue;
        }
        add_candidate(list, count, value, minor, origin);
    }
    RegCloseKey(h);
}

static void scan_registry(Python *list, int *count, char *seen, size_t seen_size)
{
    static const struct {
        HKEY hive;
        const char *name;
    } hives[] = {{HKEY_CURRENT_USER, "HKCU"}, {HKEY_LOCAL_MACHINE, "HKLM"}};
    for (int h = 0; h < 2; h++) { /* python.org's own first */
        scan_company(hives[h].hive, hives[h].name, L"PythonCore", list, count, seen, seen_size);
    }
    for (int h = 0; h < 2; h++) {
        HKEY root;
        if (RegOpenKeyExW(hives[h].hive, L"Software\\Python", 0, KEY_READ, &root) != ERROR_SUCCESS)
            continue;
        for (DWORD i = 0; i < 64; i++) {
            WCHAR company[128];
            DWORD size = 127;
            if (RegEnumKeyExW(root, i, company, &size, NULL, NULL, NULL, NULL) != ERROR_SUCCESS)
                break;
            company[127] = 0;
            if (_wcsicmp(company, L"PythonCore") != 0 && _wcsicmp(company, L"PyLauncher") != 0)
                scan_company(hives[h].hive, hives[h].name, company, list, count, seen, seen_size);
        }
        RegCloseKey(root);
    }
}

/* The Python this DLL was installed into: pip puts it (with tfstack.py) in
 * <prefix>\share\dumpkit\windbg, where <prefix> is the installation (python3X.dll) or
 * the virtual environment (pyvenv.cfg) that `pip install dumpkit` ran in. */
static int from_own_prefix(Python *p)
{
    WCHAR folder[MAX_PATH];
    if (!script_path(folder))
        return 0;
    static const WCHAR *const expected[] = {L"windbg", L"dumpkit", L"share"};
    for (int i = 0; i < 4; i++) {
        WCHAR *slash = wcsrchr(folder, L'\\');
        if (!slash)
            return 0;
        if (i > 0 && _wcsicmp(slash + 1, expected[i - 1]) != 0)
            return 0;
        *slash = 0;
    }
    memset(p, 0, sizeof *p);
    int minor = dll_minor(folder);
    if (minor >= MIN_MINOR) {
        lstrcpynW(p->home, folder, MAX_PATH);
    } else if (from_venv(folder, p)) {
        minor = dll_minor(p->home);
    }
    if (minor < MIN_MINOR)
        return 0;
    p->minor = minor;
    lstrcpynA(p->origin, "the Python tfstack.dll is installed in", sizeof p->origin);
    return 1;
}

/* The Python to start, into `out`; else 0 and one line of what was looked at in `why`. */
static int find_python(Python *out, char *why, size_t why_size)
{
    static Python list[MAX_CANDIDATES];
    char seen[BIG], shown[MAX_PATH * 2];
    WCHAR folder[MAX_PATH];
    int count = 0;
    seen[0] = why[0] = 0;
    memset(out, 0, sizeof *out);
    DWORD n = GetEnvironmentVariableW(PYTHON_ENV, folder, MAX_PATH);
    if (n > 0 && n < MAX_PATH) {
        strip_slash(folder);
        narrow(folder, shown, sizeof shown, CP_ACP);
        int minor = dll_minor(folder);
        if (minor >= MIN_MINOR) {
            lstrcpynW(out->home, folder, MAX_PATH);
        } else if (from_venv(folder, out)) {
            minor = dll_minor(out->home);
        }
        if (minor < MIN_MINOR) {
            _snprintf(why, why_size,
                      "tfstack: DUMPKIT_PYTHON=%s is not a 64-bit CPython 3.8 or later (no python3X.dll there, no "
                      "pyvenv.cfg naming one); fix: set DUMPKIT_PYTHON to the folder of python.exe of a Python with "
                      "dumpkit installed (or of its virtual environment) and restart the debugger\n",
                      shown);
            why[why_size - 1] = 0;
            return 0;
        }
        out->minor = minor;
        lstrcpynA(out->origin, "DUMPKIT_PYTHON", sizeof out->origin);
        return 1;
    }
    if (from_own_prefix(out))
        return 1;
    scan_registry(list, &count, seen, sizeof seen);
    if (count == 0) {
        _snprintf(why, why_size,
                  "tfstack: no Python found (DUMPKIT_PYTHON is not set; %sno 64-bit Python 3.%d-3.%d registered under "
                  "HKCU or HKLM\\Software\\Python, PEP 514); fix: install Python from python.org and run "
                  "py -m pip install dumpkit, or set DUMPKIT_PYTHON to the folder of a Python with dumpkit installed "
                  "and restart the debugger\n",
                  seen, MIN_MINOR, MAX_MINOR);
        why[why_size - 1] = 0;
        return 0;
    }
    /* newest first; among equals the order found (HKCU before HKLM, PythonCore first) */
    int best = -1;
    for (int pass = 0; pass < 2 && best < 0; pass++) {
        for (int i = 0; i < count; i++) {
            if (pass == 0 && !has_dumpkit(&list[i]))
                continue;
            if (best < 0 || list[i].minor > list[best].minor)
                best = i;
        }
    }
    *out = list[best];
    return 1;
}

typedef HRESULT(CALLBACK *ExtensionInit)(PULONG, PULONG);

/* A Python that has pykd is started the way pykd.pyd starts it, by pykd.pyd's own
 * DebugExtensionInitialize: pykd registers its module with the interpreter before
 * starting it (PyImport_AppendInittab), so a pykd.pyd the user loads later (`.load
 * ...\pykd.pyd`, then `!py`) finds the interpreter as it needs it; started by
 * Py_InitializeEx instead, that later load throws and ends the debugger. pykd.pyd stays
 * loaded. 1 when pykd started it. */
static int start_through_pykd(PDEBUG_CLIENT client, const Python *p)
{
    WCHAR pyd[MAX_PATH];
    join(pyd, p->home, L"Lib\\site-packages\\pykd\\pykd.pyd");
    if (!exists(pyd)) {
        if (!p->site[0])
            return 0;
        join(pyd, p->site, L"pykd\\pykd.pyd");
        if (!exists(pyd))
            return 0;
    }
    /* Python finds its standard library from PYTHONHOME while pykd starts it; any
     * PYTHONHOME of the user's is put back */
    WCHAR saved[BIG];
    DWORD had = GetEnvironmentVariableW(L"PYTHONHOME", saved, BIG);
    SetEnvironmentVariableW(L"PYTHONHOME", p->home);
    HMODULE pykd = LoadLibraryExW(pyd, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
    ExtensionInit init = pykd ? (ExtensionInit)(void *)GetProcAddress(pykd, "DebugExtensionInitialize") : NULL;
    HRESULT hr = E_FAIL;
    if (init) {
        ULONG version = 0, flags = 0;
        hr = init(&version, &flags);
    }
    SetEnvironmentVariableW(L"PYTHONHOME", had > 0 && had < BIG ? saved : NULL);
    if (!init || FAILED(hr)) {
        char shown[MAX_PATH * 2];
        narrow(pyd, shown, sizeof shown, CP_ACP);
        say(client, DEBUG_OUTPUT_WARNING, "tfstack: %s did not start (0x%08lx); starting the Python without it\n", shown,
            (unsigned long)hr);
        return 0;
    }
    return 1;
}

/* python3X.dll loaded and started (or found started); 0 with one line said when not */
static int start_python(PDEBUG_CLIENT client, const Python *p)
{
    WCHAR dll[MAX_PATH], probe[MAX_PATH], zip[32];
    char shown[MAX_PATH * 2];
    dll_path(p, dll);
    narrow(dll, shown, sizeof shown, CP_ACP);
    /* by full path, its own folder first for what it imports (vcruntime140.dll) */
    HMODULE h = LoadLibraryExW(dll, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
    if (!h) {
        DWORD err = GetLastError();
        say(client, DEBUG_OUTPUT_ERROR, "tfstack: error: cannot load %s (Windows error %lu%s)\n", shown,
            (unsigned long)err, err == ERROR_BAD_EXE_FORMAT ? ": a 64-bit debugger needs a 64-bit Python" : "");
        return 0;
    }
    FARPROC *slots = (FARPROC *)&py;
    for (size_t i = 0; i < sizeof API_NAMES / sizeof API_NAMES[0]; i++) {
        slots[i] = GetProcAddress(h, API_NAMES[i]);
        if (!slots[i]) {
            say(client, DEBUG_OUTPUT_ERROR, "tfstack: error: %s has no %s (not a CPython 3.8-3.13 DLL)\n", shown,
                API_NAMES[i]);
            return 0;
        }
    }
    if (!py.Py_IsInitialized()) {
        /* Py_InitializeEx ends the process when it cannot start: look for the standard
         * library first (an installation's Lib\os.py, an embeddable one's python3X.zip) */
        join(probe, p->home, L"Lib\\os.py");
        if (!exists(probe))
            join(probe, p->home, L"Lib\\os.pyc");
        _snwprintf(zip, 31, L"python3%d.zip", p->minor);
        zip[31] = 0;
        WCHAR probe_zip[MAX_PATH];
        join(probe_zip, p->home, zip);
        if (!exists(probe) && !exists(probe_zip)) {
            narrow(p->home, shown, sizeof shown, CP_ACP);
            say(client, DEBUG_OUTPUT_ERROR,
                "tfstack: error: %s has no standard library (no Lib\\os.py, no python3%d.zip); not started\n", shown,
                p->minor);
            return 0;
        }
        if (!start_through_pykd(client, p)) {
            /* An installation needs its home named (the debugger's folder is not a
             * Python's); an embeddable distribution must not have one: its python3X._pth,
             * next to the DLL, is what sets its sys.path, and a home set by
             * Py_SetPythonHome turns the ._pth search off. */
            WCHAR pth[MAX_PATH], pth_name[32];
            _snwprintf(pth_name, 31, L"python3%d._pth", p->minor);
            pth_name[31] = 0;
            join(pth, p->home, pth_name);
            if (!exists(pth)) {
                lstrcpynW(g_home_for_python, p->home, MAX_PATH);
                py.Py_SetPythonHome(g_home_for_python);
            }
            py.Py_InitializeEx(0);
            /* the GIL stays with this, the engine's thread, as after any start */
        }
        if (!py.Py_IsInitialized()) {
            say(client, DEBUG_OUTPUT_ERROR, "tfstack: error: %s did not start\n", shown);
            return 0;
        }
    }
    g_python = *p;
    g_ready = 1;
    return 1;
}

static PyObject *bytes_of(const char *text)
{
    return py.PyBytes_FromStringAndSize(text, (long long)strlen(text));
}

/* Runs RUN_CODE with this call's client, options, script and site; prints the line it
 * answers, if any. Called with the GIL held. */
static void run(PDEBUG_CLIENT client, const char *args, const WCHAR *script)
{
    char script8[MAX_PATH * 4], site8[MAX_PATH * 4];
    narrow(script, script8, sizeof script8, CP_UTF8);
    narrow(g_python.site, site8, sizeof site8, CP_UTF8);
    PyObject *globals = py.PyDict_New();
    PyObject *builtins = py.PyImport_ImportModule("builtins");
    PyObject *values[4] = {py.PyLong_FromUnsignedLongLong((unsigned long long)(ULONG_PTR)client),
                           bytes_of(args ? args : ""), bytes_of(script8), bytes_of(site8)};
    static const char *const names[4] = {"client", "args", "script", "site"};
    int ok = globals && builtins && py.PyDict_SetItemString(globals, "__builtins__", builtins) == 0;
    for (int i = 0; i < 4; i++) {
        ok = ok && values[i] && py.PyDict_SetItemString(globals, names[i], values[i]) == 0;
    }
    if (ok) {
        PyObject *result = py.PyRun_StringFlags(RUN_CODE, PY_FILE_INPUT, globals, globals, NULL);
        if (!result) {
            py.PyErr_Clear();
            say(client, DEBUG_OUTPUT_ERROR, "tfstack: error: Python could not run tfstack.py\n");
        } else {
            py.Py_DecRef(result);
            PyObject *error = py.PyDict_GetItemString(globals, "error"); /* borrowed */
            const char *text = error ? py.PyUnicode_AsUTF8(error) : NULL;
            if (error && !text)
                py.PyErr_Clear(); /* None: nothing to say */
            if (text && text[0]) {
                /* UTF-8 -> the ANSI code page Output takes */
                int wn = MultiByteToWideChar(CP_UTF8, 0, text, -1, NULL, 0);
                WCHAR *wide = wn > 0 ? (WCHAR *)HeapAlloc(GetProcessHeap(), 0, wn * sizeof(WCHAR)) : NULL;
                if (wide) {
                    MultiByteToWideChar(CP_UTF8, 0, text, -1, wide, wn);
                    char line[BIG];
                    narrow(wide, line, sizeof line, CP_ACP);
                    HeapFree(GetProcessHeap(), 0, wide);
                    say(client, DEBUG_OUTPUT_ERROR, "%s\n", line);
                }
            }
        }
    } else {
        py.PyErr_Clear();
        say(client, DEBUG_OUTPUT_ERROR, "tfstack: error: Python could not set up the call\n");
    }
    for (int i = 0; i < 4; i++)
        if (values[i])
            py.Py_DecRef(values[i]);
    if (builtins)
        py.Py_DecRef(builtins);
    if (globals)
        py.Py_DecRef(globals);
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
    /* the Python stays running: finalizing one inside the debugger is what kills it; a
     * later .load finds it started (Py_IsInitialized) and uses it */
}

EXPORT HRESULT CALLBACK help(PDEBUG_CLIENT client, PCSTR args)
{
    (void)args;
    Python found;
    char why[BIG], home[MAX_PATH * 2];
    const Python *p = g_ready ? &g_python : (find_python(&found, why, sizeof why) ? &found : NULL);
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
        "Runs tfstack.py (next to tfstack.dll) in a 64-bit CPython 3.8-3.13 with dumpkit installed: the folder in\n"
        "DUMPKIT_PYTHON, else the newest registered one (PEP 514, HKCU/HKLM\\Software\\Python) that has dumpkit.\n"
        "Set-up: py -m pip install dumpkit  (windbg_scripts\\README.md)\n");
    if (p) {
        narrow(p->home, home, sizeof home, CP_ACP);
        say(client, DEBUG_OUTPUT_NORMAL, "Python: %s (3.%d, from %s%s)%s\n", home, p->minor, p->origin,
            p->site[0] ? ", a virtual environment" : "", g_ready ? ", running" : "");
    } else {
        say(client, DEBUG_OUTPUT_NORMAL, "%s", why);
    }
    return S_OK;
}

EXPORT HRESULT CALLBACK tfstack(PDEBUG_CLIENT client, PCSTR args)
{
    WCHAR script[MAX_PATH];
    if (!script_path(script) || !exists(script)) {
        say(client, DEBUG_OUTPUT_ERROR, "tfstack: error: tfstack.py is not next to tfstack.dll; keep the windbg_scripts folder together\n");
        return S_OK;
    }
    if (!g_ready) {
        Python found;
        char why[BIG];
        if (!find_python(&found, why, sizeof why)) {
            say(client, DEBUG_OUTPUT_ERROR, "%s", why);
            return S_OK;
        }
        if (!start_python(client, &found))
            return S_OK;
    }
    int state = py.PyGILState_Ensure();
    run(client, args, script);
    py.PyGILState_Release(state);
    return S_OK;
}
