/* A small cdb-like debugger host for the debugger-host lane (tests/windbg_host).
 *
 *   host.exe DBGENG_DLL DUMP COMMANDS_FILE OUT_FILE
 *   host.exe DBGENG_DLL "live:COMMAND LINE" COMMANDS_FILE OUT_FILE
 *
 * Loads Microsoft's dbgeng.dll (the one bundled in the pykd wheel) from DBGENG_DLL,
 * opens DUMP as cdb -z does (DebugCreate, OpenDumpFile, WaitForEvent), or starts the
 * command line as a live process under the debugger as cdb does
 * (CreateProcessAndAttach, WaitForEvent: the first event it stops at), then runs each
 * line of COMMANDS_FILE (UTF-8) through IDebugControl::Execute, the way cdb runs what
 * a user types. Everything the engine prints reaches an IDebugOutputCallbacks2, so text
 * and DML arrive separately (DEBUG_OUTCB_TEXT / DEBUG_OUTCB_DML), as WinDbg sees them.
 *
 * A line "#links [AFTER]" runs every distinct DML link the previous command printed, as
 * a user clicking them would, each followed by AFTER when given (see run_links).
 * A line "#interrupt MS COMMAND" runs COMMAND while another thread issues a passive
 * interrupt (IDebugControl::SetInterrupt(DEBUG_INTERRUPT_PASSIVE), what Ctrl-Break in
 * cdb and WinDbg's Debug > Break do) after MS milliseconds. Other lines starting with
 * "#" are skipped. A line "#interrupt-on TEXT COMMAND" runs COMMAND and issues the
 * interrupt as soon as output containing TEXT (no spaces) arrives.
 *
 * OUT_FILE gets records, flushed as they come (so a debugger that dies leaves what it
 * printed before dying):
 *   "@@CMD <n> <command>\n"                      before command n
 *   "@@OUT <T|D> <mask> <nbytes>\n<utf-8 bytes>"  one output chunk: T text, D DML
 *   "@@END <n> <hresult> <milliseconds>\n"       after command n
 *   "@@LINK <label>\n"                            before a link's command (#links)
 *   "@@EXIT\n"                                    when every command has run
 *   "@@INTERRUPT\n"                               when #interrupt-on issued its interrupt
 *   "@@CRASH ..."                                 an unhandled exception is ending the host
 * Exit code: 0 when the host got through every command, else 2 (set-up failed).
 */
#define INITGUID
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dbgeng.h>

#ifndef DEBUG_OUTCTL_DML
#define DEBUG_OUTCTL_DML 0x00000020
#endif
#define OUTCBI_EXPLICIT_FLUSH 1
#define OUTCBI_TEXT 2
#define OUTCBI_DML 4
#define OUTCB_TEXT 0
#define OUTCB_DML 1
#define OUTCB_EXPLICIT_FLUSH 2

/* IDebugOutputCallbacks2 (not in mingw-w64's dbgeng.h) */
DEFINE_GUID(IID_IDebugOutputCallbacks2_, 0x67721fe9, 0x56d2, 0x4a44, 0xa3, 0x25, 0x2b, 0x65, 0x51, 0x3c, 0xe6, 0xeb);

typedef struct Callbacks2 Callbacks2;
typedef struct {
    HRESULT(STDMETHODCALLTYPE *QueryInterface)(Callbacks2 *, REFIID, void **);
    ULONG(STDMETHODCALLTYPE *AddRef)(Callbacks2 *);
    ULONG(STDMETHODCALLTYPE *Release)(Callbacks2 *);
    HRESULT(STDMETHODCALLTYPE *Output)(Callbacks2 *, ULONG, PCSTR);
    HRESULT(STDMETHODCALLTYPE *GetInterestMask)(Callbacks2 *, PULONG);
    HRESULT(STDMETHODCALLTYPE *Output2)(Callbacks2 *, ULONG, ULONG, ULONG64, PCWSTR);
} Callbacks2Vtbl;
struct Callbacks2 {
    const Callbacks2Vtbl *lpVtbl;
};

static FILE *g_out;
static CRITICAL_SECTION g_lock;
static char *g_dml;       /* the DML the current command printed (for #links) */
static IDebugControl *g_control;
static const char *g_trigger; /* #interrupt-on: output that sets off the interrupt */
static size_t g_dml_len, g_dml_cap;

static void keep_dml(const char *bytes, size_t n)
{
    if (g_dml_len + n + 1 > g_dml_cap) {
        size_t cap = (g_dml_cap ? g_dml_cap * 2 : 65536);
        while (cap < g_dml_len + n + 1)
            cap *= 2;
        g_dml = (char *)realloc(g_dml, cap);
        g_dml_cap = cap;
    }
    memcpy(g_dml + g_dml_len, bytes, n);
    g_dml_len += n;
    g_dml[g_dml_len] = 0;
}

static void record_chunk(char kind, ULONG mask, const char *bytes, size_t n)
{
    EnterCriticalSection(&g_lock);
    fprintf(g_out, "@@OUT %c %lu %lu\n", kind, (unsigned long)mask, (unsigned long)n);
    fwrite(bytes, 1, n, g_out);
    fflush(g_out);
    if (kind == 'D')
        keep_dml(bytes, n);
    if (g_trigger && n >= strlen(g_trigger)) {
        char *copy = (char *)malloc(n + 1);
        memcpy(copy, bytes, n);
        copy[n] = 0;
        if (strstr(copy, g_trigger)) {
            g_trigger = NULL;
            fprintf(g_out, "@@INTERRUPT\n");
            fflush(g_out);
            g_control->lpVtbl->SetInterrupt(g_control, DEBUG_INTERRUPT_PASSIVE);
        }
        free(copy);
    }
    LeaveCriticalSection(&g_lock);
}

static void record_wide(char kind, ULONG mask, PCWSTR text)
{
    int n = WideCharToMultiByte(CP_UTF8, 0, text, -1, NULL, 0, NULL, NULL);
    if (n <= 1)
        return;
    char *buf = (char *)malloc(n);
    WideCharToMultiByte(CP_UTF8, 0, text, -1, buf, n, NULL, NULL);
    record_chunk(kind, mask, buf, (size_t)(n - 1));
    free(buf);
}

static HRESULT STDMETHODCALLTYPE cb_qi(Callbacks2 *self, REFIID iid, void **out)
{
    if (IsEqualIID(iid, &IID_IUnknown) || IsEqualIID(iid, &IID_IDebugOutputCallbacks) ||
        IsEqualIID(iid, &IID_IDebugOutputCallbacks2_)) {
        *out = self;
        return S_OK;
    }
    *out = NULL;
    return E_NOINTERFACE;
}
static ULONG STDMETHODCALLTYPE cb_addref(Callbacks2 *self) { (void)self; return 1; }
static ULONG STDMETHODCALLTYPE cb_release(Callbacks2 *self) { (void)self; return 0; }
static HRESULT STDMETHODCALLTYPE cb_output(Callbacks2 *self, ULONG mask, PCSTR text)
{
    (void)self;
    if (text)
        record_chunk('T', mask, text, strlen(text));
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE cb_interest(Callbacks2 *self, PULONG mask)
{
    (void)self;
    *mask = OUTCBI_TEXT | OUTCBI_DML;
    return S_OK;
}
static HRESULT STDMETHODCALLTYPE cb_output2(Callbacks2 *self, ULONG which, ULONG flags, ULONG64 arg, PCWSTR text)
{
    (void)self;
    (void)flags;
    if (which == OUTCB_EXPLICIT_FLUSH || !text)
        return S_OK;
    record_wide(which == OUTCB_DML ? 'D' : 'T', (ULONG)arg, text);
    return S_OK;
}
static const Callbacks2Vtbl g_vtbl = {cb_qi, cb_addref, cb_release, cb_output, cb_interest, cb_output2};
static Callbacks2 g_callbacks = {&g_vtbl};


/* An exception nothing handled, about to end the process: its code, and for a C++ one
 * (MSVC's 0xE06D7363) the type and, for a std::exception, what(), so an extension that
 * kills the debugger says why (kdlib throws "CLRCreateInstance failed" and the like). */
static LONG WINAPI log_crash(PEXCEPTION_POINTERS info)
{
    PEXCEPTION_RECORD r = info->ExceptionRecord;
    if (r->ExceptionCode != 0xE06D7363 || r->NumberParameters < 4) {
        fprintf(stderr, "host: unhandled exception 0x%08lx at %p\n", (unsigned long)r->ExceptionCode, r->ExceptionAddress);
        if (g_out) {
            fprintf(g_out, "@@CRASH 0x%08lx\n", (unsigned long)r->ExceptionCode);
            fflush(g_out);
        }
        return EXCEPTION_CONTINUE_SEARCH;
    }
    const char *object = (const char *)r->ExceptionInformation[1];
    const BYTE *base = (const BYTE *)r->ExceptionInformation[3];
    const DWORD *throw_info = (const DWORD *)r->ExceptionInformation[2];
    const char *name = "?";
    if (throw_info && base) {
        const DWORD *types = (const DWORD *)(base + throw_info[3]); /* CatchableTypeArray */
        if (types[0] > 0) {
            const DWORD *type = (const DWORD *)(base + types[1]); /* CatchableType */
            name = (const char *)(base + type[1]) + 16;          /* TypeDescriptor.name */
        }
    }
    const char *what = NULL;
    if (object && !IsBadReadPtr(object + 8, 8)) {
        what = *(const char *const *)(object + 8);
        if (what && IsBadStringPtrA(what, 512))
            what = NULL;
    }
    fprintf(stderr, "host: unhandled C++ exception %s: %s\n", name, what ? what : "");
    fflush(stderr);
    if (g_out) {
        fprintf(g_out, "@@CRASH C++ %s: %s\n", name, what ? what : "");
        fflush(g_out);
    }
    return EXCEPTION_CONTINUE_SEARCH;
}

typedef HRESULT(STDAPICALLTYPE *DebugCreateFn)(REFIID, PVOID *);

struct interrupter {
    IDebugControl *control;
    DWORD delay_ms;
    HANDLE done;
};

static DWORD WINAPI interrupt_later(LPVOID p)
{
    struct interrupter *it = (struct interrupter *)p;
    if (WaitForSingleObject(it->done, it->delay_ms) == WAIT_TIMEOUT)
        it->control->lpVtbl->SetInterrupt(it->control, DEBUG_INTERRUPT_PASSIVE);
    return 0;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = (char *)malloc(n + 1);
    n = (long)fread(buf, 1, n, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* UTF-8 -> the ANSI code page Execute takes */
static char *to_ansi(const char *utf8)
{
    int wn = MultiByteToWideChar(CP_UTF8, 0, utf8, -1, NULL, 0);
    WCHAR *w = (WCHAR *)malloc(wn * sizeof(WCHAR));
    MultiByteToWideChar(CP_UTF8, 0, utf8, -1, w, wn);
    int an = WideCharToMultiByte(CP_ACP, 0, w, -1, NULL, 0, NULL, NULL);
    char *a = (char *)malloc(an);
    WideCharToMultiByte(CP_ACP, 0, w, -1, a, an, NULL, NULL);
    free(w);
    return a;
}

static void run_command(IDebugControl *control, IDebugClient *client, int index, const char *line, int interrupt,
                        DWORD delay)
{
    EnterCriticalSection(&g_lock);
    fprintf(g_out, "@@CMD %d %s\n", index, line);
    fflush(g_out);
    g_dml_len = 0;
    if (g_dml)
        g_dml[0] = 0;
    LeaveCriticalSection(&g_lock);
    struct interrupter it = {control, delay, CreateEventA(NULL, TRUE, FALSE, NULL)};
    HANDLE thread = interrupt ? CreateThread(NULL, 0, interrupt_later, &it, 0, NULL) : NULL;
    char *ansi = to_ansi(line);
    DWORD started = GetTickCount();
    HRESULT hr = control->lpVtbl->Execute(control, DEBUG_OUTCTL_ALL_CLIENTS, ansi, DEBUG_EXECUTE_ECHO | DEBUG_EXECUTE_NOT_LOGGED);
    DWORD took = GetTickCount() - started;
    free(ansi);
    SetEvent(it.done);
    if (thread) {
        WaitForSingleObject(thread, INFINITE);
        CloseHandle(thread);
    }
    CloseHandle(it.done);
    client->lpVtbl->FlushCallbacks(client);
    EnterCriticalSection(&g_lock);
    fprintf(g_out, "@@END %d 0x%08lx %lu\n", index, (unsigned long)hr, (unsigned long)took);
    fflush(g_out);
    LeaveCriticalSection(&g_lock);
}

/* DML's five entities back to characters, in place */
static void unescape(char *s)
{
    static const struct {
        const char *entity;
        char ch;
    } table[] = {{"&quot;", '"'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&apos;", '\''}, {"&amp;", '&'}};
    char *out = s;
    while (*s) {
        int done = 0;
        if (*s == '&') {
            for (int i = 0; i < 5; i++) {
                size_t n = strlen(table[i].entity);
                if (strncmp(s, table[i].entity, n) == 0) {
                    *out++ = table[i].ch;
                    s += n;
                    done = 1;
                    break;
                }
            }
        }
        if (!done)
            *out++ = *s++;
    }
    *out = 0;
}

/* "#links [AFTER]": every distinct <link cmd="..."> the previous command printed as DML,
 * run as a user clicking it would (each preceded by "@@LINK <its text>"), each followed
 * by AFTER when given (e.g. "~." to see which thread the link selected). */
static void run_links(IDebugControl *control, IDebugClient *client, int *index, const char *after)
{
    char *dml = g_dml ? _strdup(g_dml) : _strdup("");
    size_t seen_cap = 64, seen_n = 0;
    char **seen = (char **)malloc(seen_cap * sizeof(char *));
    for (char *p = strstr(dml, "<link cmd=\""); p; p = strstr(p, "<link cmd=\"")) {
        p += 11;
        char *q = strchr(p, '"');
        if (!q)
            break;
        *q = 0;
        char *cmd = p;
        char *label = strchr(q + 1, '>');
        char *close = label ? strstr(label, "</link>") : NULL;
        if (!label || !close)
            break;
        *close = 0;
        p = close + 7;
        label++;
        unescape(cmd);
        int dup = 0;
        for (size_t i = 0; i < seen_n; i++)
            if (strcmp(seen[i], cmd) == 0)
                dup = 1;
        if (dup)
            continue;
        if (seen_n == seen_cap)
            seen = (char **)realloc(seen, (seen_cap *= 2) * sizeof(char *));
        seen[seen_n++] = cmd;
        /* the label's text: tags dropped, entities back */
        char *w = label;
        int in_tag = 0;
        for (char *r = label; *r; r++) {
            if (*r == '<')
                in_tag = 1;
            else if (*r == '>')
                in_tag = 0;
            else if (!in_tag)
                *w++ = *r;
        }
        *w = 0;
        unescape(label);
        EnterCriticalSection(&g_lock);
        fprintf(g_out, "@@LINK %s\n", label);
        fflush(g_out);
        LeaveCriticalSection(&g_lock);
        run_command(control, client, (*index)++, cmd, 0, 0);
        if (after[0])
            run_command(control, client, (*index)++, after, 0, 0);
    }
    free(seen);
    free(dml);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: host.exe DBGENG_DLL DUMP COMMANDS_FILE OUT_FILE\n");
        return 2;
    }
    InitializeCriticalSection(&g_lock);
    SetUnhandledExceptionFilter(log_crash);
    g_out = fopen(argv[4], "wb");
    if (!g_out) {
        fprintf(stderr, "host: cannot write %s\n", argv[4]);
        return 2;
    }
    char *commands = read_file(argv[3]);
    if (!commands) {
        fprintf(stderr, "host: cannot read %s\n", argv[3]);
        return 2;
    }
    /* pykd.pyd imports mscoree.dll (.NET's, on every Windows). Under Wine the lane's
     * stand-in (tests/support/wine/mscoree.c) sits next to host.exe; an extension DLL
     * loaded by full path would find Wine's own placeholder in system32 first. */
    {
        WCHAR self[MAX_PATH];
        DWORD n = GetModuleFileNameW(NULL, self, MAX_PATH);
        while (n > 0 && self[n - 1] != L'\\')
            n--;
        if (n > 0 && n + 12 < MAX_PATH) {
            lstrcpyW(self + n, L"mscoree.dll");
            if (GetFileAttributesW(self) != INVALID_FILE_ATTRIBUTES)
                LoadLibraryW(self);
        }
    }
    HMODULE engine = LoadLibraryExA(argv[1], NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
    if (!engine) {
        fprintf(stderr, "host: cannot load %s (error %lu)\n", argv[1], GetLastError());
        return 2;
    }
    DebugCreateFn create = (DebugCreateFn)(void *)GetProcAddress(engine, "DebugCreate");
    IDebugClient *client = NULL;
    IDebugControl *control = NULL;
    HRESULT hr = create ? create(&IID_IDebugClient, (void **)&client) : E_FAIL;
    if (FAILED(hr)) {
        fprintf(stderr, "host: DebugCreate failed 0x%08lx\n", hr);
        return 2;
    }
    client->lpVtbl->QueryInterface(client, &IID_IDebugControl, (void **)&control);
    g_control = control;
    client->lpVtbl->SetOutputCallbacks(client, (PDEBUG_OUTPUT_CALLBACKS)&g_callbacks);
    /* "live:COMMAND LINE": a live process, started under the debugger as `cdb COMMAND LINE`
     * starts one; WaitForEvent returns at its first event the engine stops for */
    int live = strncmp(argv[2], "live:", 5) == 0;
    if (live)
        hr = client->lpVtbl->CreateProcessAndAttach(client, 0, argv[2] + 5, DEBUG_ONLY_THIS_PROCESS, 0, 0);
    else
        hr = client->lpVtbl->OpenDumpFile(client, argv[2]);
    if (SUCCEEDED(hr))
        hr = control->lpVtbl->WaitForEvent(control, 0, INFINITE);
    if (FAILED(hr)) {
        fprintf(stderr, "host: cannot open %s: 0x%08lx\n", argv[2], hr);
        return 2;
    }
    int index = 0;
    char *saved = NULL;
    for (char *line = strtok_r(commands, "\r\n", &saved); line; line = strtok_r(NULL, "\r\n", &saved)) {
        if (strncmp(line, "#links", 6) == 0) {
            run_links(control, client, &index, line[6] == ' ' ? line + 7 : "");
            continue;
        }
        DWORD delay = 0;
        int interrupt = 0;
        if (strncmp(line, "#interrupt-on ", 14) == 0) {
            char *text = line + 14, *command = strchr(text, ' ');
            if (!command)
                continue;
            *command++ = 0;
            g_trigger = text;
            run_command(control, client, index++, command, 0, 0);
            g_trigger = NULL;
            continue;
        }
        if (line[0] == '#') {
            if (strncmp(line, "#interrupt ", 11) != 0)
                continue;
            char *rest = NULL;
            delay = strtoul(line + 11, &rest, 10);
            while (*rest == ' ')
                rest++;
            line = rest;
            interrupt = 1;
        }
        run_command(control, client, index++, line, interrupt, delay);
    }
    fprintf(g_out, "@@EXIT\n");
    fclose(g_out);
    fflush(stdout);
    if (live) /* like cdb's q on a live process: the debuggee ends with the session */
        client->lpVtbl->TerminateProcesses(client);
    /* like cdb's q on a dump: end the session without unloading extensions through Python's finalizer */
    TerminateProcess(GetCurrentProcess(), 0);
    return 0;
}
