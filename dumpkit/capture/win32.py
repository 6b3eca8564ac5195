"""The Win32 debugging, process and dump-writing API through ctypes: no compiler, no
download. Windows only (the platform assert also tells type checkers to skip it on other
systems). Structures are declared as the SDK headers (minwinbase.h, winnt.h, tlhelp32.h,
minidumpapiset.h) lay them out for x64; the minidump ones are packed to 4 bytes, as
minidumpapiset.h declares them inside pshpack4.h."""

from __future__ import annotations

import sys

assert sys.platform == "win32"

import ctypes  # noqa: E402
from ctypes import wintypes as wt  # noqa: E402

kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
dbghelp = ctypes.WinDLL("dbghelp", use_last_error=True)
ntdll = ctypes.WinDLL("ntdll")

# debug events (minwinbase.h)
EXCEPTION_DEBUG_EVENT = 1
CREATE_THREAD_DEBUG_EVENT = 2
CREATE_PROCESS_DEBUG_EVENT = 3
EXIT_THREAD_DEBUG_EVENT = 4
EXIT_PROCESS_DEBUG_EVENT = 5
LOAD_DLL_DEBUG_EVENT = 6
UNLOAD_DLL_DEBUG_EVENT = 7
OUTPUT_DEBUG_STRING_EVENT = 8
RIP_EVENT = 9

DBG_CONTINUE = 0x00010002
DBG_EXCEPTION_NOT_HANDLED = 0x80010001
DEBUG_PROCESS = 0x00000001
DEBUG_ONLY_THIS_PROCESS = 0x00000002
INFINITE = 0xFFFFFFFF
WAIT_TIMEOUT_MS = 200  # WaitForDebugEvent's wait: Ctrl-C is looked at between waits

PROCESS_ALL_ACCESS = 0x001FFFFF
PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
PROCESS_VM_READ = 0x0010
PROCESS_DUP_HANDLE = 0x0040  # the handle data a dump may hold
PROCESS_QUERY_INFORMATION = 0x0400
PROCESS_SUSPEND_RESUME = 0x0800
SYNCHRONIZE = 0x00100000
WAIT_OBJECT_0 = 0
ERROR_INVALID_PARAMETER = 87
THREAD_GET_CONTEXT = 0x0008
THREAD_QUERY_INFORMATION = 0x0040
THREAD_SET_CONTEXT = 0x0010
CONTEXT_ALL_AMD64 = 0x0010001F  # CONTEXT_AMD64 | CONTROL | INTEGER | SEGMENTS | FLOATING_POINT | DEBUG_REGISTERS
CONTEXT_SIZE = 1232  # sizeof(CONTEXT) on x64
CONTEXT_FLAGS_OFFSET = 0x30
# register offsets in the x64 CONTEXT (winnt.h): the first two arguments, the stack and
# instruction pointers
CONTEXT_RCX, CONTEXT_RDX, CONTEXT_RSP, CONTEXT_RIP = 0x80, 0x88, 0x98, 0xF8

TH32CS_SNAPMODULE = 0x00000008
TH32CS_SNAPMODULE32 = 0x00000010
INVALID_HANDLE_VALUE = ctypes.c_void_p(-1).value

GENERIC_WRITE = 0x40000000
CREATE_ALWAYS = 2
FILE_ATTRIBUTE_NORMAL = 0x80

MiniDumpNormal = 0x00000000
MiniDumpWithFullMemory = 0x00000002
MiniDumpWithHandleData = 0x00000004
MiniDumpWithUnloadedModules = 0x00000020
MiniDumpWithProcessThreadData = 0x00000100
MiniDumpWithFullMemoryInfo = 0x00000800
MiniDumpWithThreadInfo = 0x00001000

# MINIDUMP_CALLBACK_TYPE
IncludeThreadCallback = 3
IncludeModuleCallback = 4
ModuleCallback = 0
ThreadCallback = 1
ThreadExCallback = 2
MemoryCallback = 5
CancelCallback = 6
ReadMemoryFailureCallback = 14


class EXCEPTION_RECORD(ctypes.Structure):
    _fields_ = [
        ("ExceptionCode", wt.DWORD),
        ("ExceptionFlags", wt.DWORD),
        ("ExceptionRecord", ctypes.c_void_p),
        ("ExceptionAddress", ctypes.c_void_p),
        ("NumberParameters", wt.DWORD),
        ("ExceptionInformation", ctypes.c_uint64 * 15),
    ]


class EXCEPTION_DEBUG_INFO(ctypes.Structure):
    _fields_ = [("ExceptionRecord", EXCEPTION_RECORD), ("dwFirstChance", wt.DWORD)]


class CREATE_THREAD_DEBUG_INFO(ctypes.Structure):
    _fields_ = [("hThread", wt.HANDLE), ("lpThreadLocalBase", ctypes.c_void_p), ("lpStartAddress", ctypes.c_void_p)]


class CREATE_PROCESS_DEBUG_INFO(ctypes.Structure):
    _fields_ = [
        ("hFile", wt.HANDLE),
        ("hProcess", wt.HANDLE),
        ("hThread", wt.HANDLE),
        ("lpBaseOfImage", ctypes.c_void_p),
        ("dwDebugInfoFileOffset", wt.DWORD),
        ("nDebugInfoSize", wt.DWORD),
        ("lpThreadLocalBase", ctypes.c_void_p),
        ("lpStartAddress", ctypes.c_void_p),
        ("lpImageName", ctypes.c_void_p),
        ("fUnicode", wt.WORD),
    ]


class EXIT_PROCESS_DEBUG_INFO(ctypes.Structure):
    _fields_ = [("dwExitCode", wt.DWORD)]


class LOAD_DLL_DEBUG_INFO(ctypes.Structure):
    _fields_ = [
        ("hFile", wt.HANDLE),
        ("lpBaseOfDll", ctypes.c_void_p),
        ("dwDebugInfoFileOffset", wt.DWORD),
        ("nDebugInfoSize", wt.DWORD),
        ("lpImageName", ctypes.c_void_p),
        ("fUnicode", wt.WORD),
    ]


class _DebugUnion(ctypes.Union):
    _fields_ = [
        ("Exception", EXCEPTION_DEBUG_INFO),
        ("CreateThread", CREATE_THREAD_DEBUG_INFO),
        ("CreateProcessInfo", CREATE_PROCESS_DEBUG_INFO),
        ("ExitProcess", EXIT_PROCESS_DEBUG_INFO),
        ("LoadDll", LOAD_DLL_DEBUG_INFO),
    ]


class DEBUG_EVENT(ctypes.Structure):
    _fields_ = [("dwDebugEventCode", wt.DWORD), ("dwProcessId", wt.DWORD), ("dwThreadId", wt.DWORD), ("u", _DebugUnion)]


class STARTUPINFOW(ctypes.Structure):
    _fields_ = [
        ("cb", wt.DWORD),
        ("lpReserved", wt.LPWSTR),
        ("lpDesktop", wt.LPWSTR),
        ("lpTitle", wt.LPWSTR),
        ("dwX", wt.DWORD),
        ("dwY", wt.DWORD),
        ("dwXSize", wt.DWORD),
        ("dwYSize", wt.DWORD),
        ("dwXCountChars", wt.DWORD),
        ("dwYCountChars", wt.DWORD),
        ("dwFillAttribute", wt.DWORD),
        ("dwFlags", wt.DWORD),
        ("wShowWindow", wt.WORD),
        ("cbReserved2", wt.WORD),
        ("lpReserved2", ctypes.c_void_p),
        ("hStdInput", wt.HANDLE),
        ("hStdOutput", wt.HANDLE),
        ("hStdError", wt.HANDLE),
    ]


class PROCESS_INFORMATION(ctypes.Structure):
    _fields_ = [("hProcess", wt.HANDLE), ("hThread", wt.HANDLE), ("dwProcessId", wt.DWORD), ("dwThreadId", wt.DWORD)]


class MODULEENTRY32W(ctypes.Structure):
    _fields_ = [
        ("dwSize", wt.DWORD),
        ("th32ModuleID", wt.DWORD),
        ("th32ProcessID", wt.DWORD),
        ("GlblcntUsage", wt.DWORD),
        ("ProccntUsage", wt.DWORD),
        ("modBaseAddr", ctypes.c_void_p),
        ("modBaseSize", wt.DWORD),
        ("hModule", wt.HMODULE),
        ("szModule", wt.WCHAR * 256),
        ("szExePath", wt.WCHAR * 260),
    ]


class EXCEPTION_POINTERS(ctypes.Structure):
    _fields_ = [("ExceptionRecord", ctypes.POINTER(EXCEPTION_RECORD)), ("ContextRecord", ctypes.c_void_p)]


class MINIDUMP_EXCEPTION_INFORMATION(ctypes.Structure):
    _pack_ = 4
    _fields_ = [
        ("ThreadId", wt.DWORD),
        ("ExceptionPointers", ctypes.POINTER(EXCEPTION_POINTERS)),
        ("ClientPointers", wt.BOOL),
    ]


class MINIDUMP_CALLBACK_INPUT(ctypes.Structure):
    """Only the fixed head: ProcessId, ProcessHandle, CallbackType (the union after it is
    not read for the callbacks dumpkit answers)."""

    _pack_ = 4
    _fields_ = [("ProcessId", wt.ULONG), ("ProcessHandle", wt.HANDLE), ("CallbackType", wt.ULONG)]


class _MemoryOut(ctypes.Structure):
    _pack_ = 4
    _fields_ = [("MemoryBase", ctypes.c_uint64), ("MemorySize", wt.ULONG)]


class _CancelOut(ctypes.Structure):
    _pack_ = 4
    _fields_ = [("CheckCancel", wt.BOOL), ("Cancel", wt.BOOL)]


class MINIDUMP_CALLBACK_OUTPUT(ctypes.Union):
    _pack_ = 4
    _fields_ = [
        ("ModuleWriteFlags", wt.ULONG),
        ("Memory", _MemoryOut),
        ("Cancel", _CancelOut),
        ("Status", ctypes.c_long),  # HRESULT
        ("_size", ctypes.c_ubyte * 64),  # the union's largest member (VmRegion + Continue) fits in this
    ]


class MINIDUMP_USER_STREAM(ctypes.Structure):
    _pack_ = 4
    _fields_ = [("Type", wt.ULONG), ("BufferSize", wt.ULONG), ("Buffer", ctypes.c_void_p)]


class MINIDUMP_USER_STREAM_INFORMATION(ctypes.Structure):
    _pack_ = 4
    _fields_ = [("UserStreamCount", wt.ULONG), ("UserStreamArray", ctypes.POINTER(MINIDUMP_USER_STREAM))]


CommentStreamW = 11  # MINIDUMP_STREAM_TYPE: a UTF-16 comment from whoever wrote the dump


MINIDUMP_CALLBACK_ROUTINE = ctypes.WINFUNCTYPE(
    wt.BOOL, ctypes.c_void_p, ctypes.POINTER(MINIDUMP_CALLBACK_INPUT), ctypes.POINTER(MINIDUMP_CALLBACK_OUTPUT)
)


class MINIDUMP_CALLBACK_INFORMATION(ctypes.Structure):
    _pack_ = 4
    _fields_ = [("CallbackRoutine", MINIDUMP_CALLBACK_ROUTINE), ("CallbackParam", ctypes.c_void_p)]


def _declare(dll, name, restype, *argtypes):
    fn = getattr(dll, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


CreateProcessW = _declare(
    kernel32,
    "CreateProcessW",
    wt.BOOL,
    wt.LPCWSTR,
    wt.LPWSTR,
    ctypes.c_void_p,
    ctypes.c_void_p,
    wt.BOOL,
    wt.DWORD,
    ctypes.c_void_p,
    wt.LPCWSTR,
    ctypes.POINTER(STARTUPINFOW),
    ctypes.POINTER(PROCESS_INFORMATION),
)
# not in kernel32: what Process Explorer's "Suspend" and ProcDump use (NTSTATUS, 0 = success)
NtSuspendProcess = _declare(ntdll, "NtSuspendProcess", ctypes.c_long, wt.HANDLE)
NtResumeProcess = _declare(ntdll, "NtResumeProcess", ctypes.c_long, wt.HANDLE)
DebugActiveProcess = _declare(kernel32, "DebugActiveProcess", wt.BOOL, wt.DWORD)
DebugActiveProcessStop = _declare(kernel32, "DebugActiveProcessStop", wt.BOOL, wt.DWORD)
DebugSetProcessKillOnExit = _declare(kernel32, "DebugSetProcessKillOnExit", wt.BOOL, wt.BOOL)
WaitForDebugEvent = _declare(kernel32, "WaitForDebugEvent", wt.BOOL, ctypes.POINTER(DEBUG_EVENT), wt.DWORD)
ContinueDebugEvent = _declare(kernel32, "ContinueDebugEvent", wt.BOOL, wt.DWORD, wt.DWORD, wt.DWORD)
OpenProcess = _declare(kernel32, "OpenProcess", wt.HANDLE, wt.DWORD, wt.BOOL, wt.DWORD)
OpenThread = _declare(kernel32, "OpenThread", wt.HANDLE, wt.DWORD, wt.BOOL, wt.DWORD)
CloseHandle = _declare(kernel32, "CloseHandle", wt.BOOL, wt.HANDLE)
TerminateProcess = _declare(kernel32, "TerminateProcess", wt.BOOL, wt.HANDLE, wt.UINT)
WaitForSingleObject = _declare(kernel32, "WaitForSingleObject", wt.DWORD, wt.HANDLE, wt.DWORD)
GetExitCodeProcess = _declare(kernel32, "GetExitCodeProcess", wt.BOOL, wt.HANDLE, ctypes.POINTER(wt.DWORD))
GetThreadContext = _declare(kernel32, "GetThreadContext", wt.BOOL, wt.HANDLE, ctypes.c_void_p)
SetThreadContext = _declare(kernel32, "SetThreadContext", wt.BOOL, wt.HANDLE, ctypes.c_void_p)
WriteProcessMemory = _declare(
    kernel32,
    "WriteProcessMemory",
    wt.BOOL,
    wt.HANDLE,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_size_t),
)
FlushInstructionCache = _declare(
    kernel32, "FlushInstructionCache", wt.BOOL, wt.HANDLE, ctypes.c_void_p, ctypes.c_size_t
)
GetModuleHandleW = _declare(kernel32, "GetModuleHandleW", wt.HMODULE, wt.LPCWSTR)
GetProcAddress = _declare(kernel32, "GetProcAddress", ctypes.c_void_p, wt.HMODULE, wt.LPCSTR)
ReadProcessMemory = _declare(
    kernel32,
    "ReadProcessMemory",
    wt.BOOL,
    wt.HANDLE,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_size_t),
)
QueryFullProcessImageNameW = _declare(
    kernel32, "QueryFullProcessImageNameW", wt.BOOL, wt.HANDLE, wt.DWORD, wt.LPWSTR, ctypes.POINTER(wt.DWORD)
)
CreateToolhelp32Snapshot = _declare(kernel32, "CreateToolhelp32Snapshot", wt.HANDLE, wt.DWORD, wt.DWORD)
Module32FirstW = _declare(kernel32, "Module32FirstW", wt.BOOL, wt.HANDLE, ctypes.POINTER(MODULEENTRY32W))
Module32NextW = _declare(kernel32, "Module32NextW", wt.BOOL, wt.HANDLE, ctypes.POINTER(MODULEENTRY32W))
CreateFileW = _declare(
    kernel32, "CreateFileW", wt.HANDLE, wt.LPCWSTR, wt.DWORD, wt.DWORD, ctypes.c_void_p, wt.DWORD, wt.DWORD, wt.HANDLE
)
MiniDumpWriteDump = _declare(
    dbghelp,
    "MiniDumpWriteDump",
    wt.BOOL,
    wt.HANDLE,
    wt.DWORD,
    wt.HANDLE,
    wt.DWORD,
    ctypes.POINTER(MINIDUMP_EXCEPTION_INFORMATION),
    ctypes.POINTER(MINIDUMP_USER_STREAM_INFORMATION),
    ctypes.POINTER(MINIDUMP_CALLBACK_INFORMATION),
)


def last_error() -> str:
    code = ctypes.get_last_error()
    return f"{ctypes.FormatError(code).strip()} (error {code})"
