/* Declarations read by tools/gen_status_codes.py BEFORE the packaged headers, so they win
 * over them: corrections of packaged values that differ from the Windows SDK, and codes
 * and fail-fast subcodes no Debian-packaged header defines. In the SDK's own syntax; every
 * line is checked by hand against the source named beside it.
 */

/* mingw-w64 10's ntstatus.h has these two wrong (an informational severity for the first);
 * the values below are the Windows SDK's (10.0.26100 shared/ntstatus.h) and Wine's. */
#define STATUS_GRAPHICS_DRIVER_MISMATCH ((NTSTATUS)0xC01E0009)
#define STATUS_PKU2U_CERT_FAILURE       ((NTSTATUS)0xC000042F)

/* winnt.h of the current Windows SDK continues the FAST_FAIL_* block past Wine 8.0's 70
 * (the same names and numbers appear in the win32metadata-generated Windows bindings,
 * Win32.System.SystemServices). */
#define FAST_FAIL_ASAN_ERROR                        71
#define FAST_FAIL_CLR_EXCEPTION_AOT                 72
#define FAST_FAIL_POINTER_AUTH_INVALID_RETURN_ADDRESS 73
#define FAST_FAIL_INVALID_THREAD_STATE              74
#define FAST_FAIL_CORRUPT_WOW64_STATE               75
#define FAST_FAIL_INVALID_EXTENDED_STATE            76
#define FAST_FAIL_KERNEL_POINTER_EXPECTED           77
#define FAST_FAIL_INVALID_SME_STATE                 78

/* Exception codes raised by runtimes rather than by Windows (customer bit set, or an
 * informational code of the debugger protocol). */
#define MS_VC_EXCEPTION   ((NTSTATUS)0x406D1388)  /* "set thread name" (Visual Studio docs) */
#define CPP_EH_EXCEPTION  ((NTSTATUS)0xE06D7363)  /* MSVC C++ throw: 0xE0000000 | 'msc' (ehdata.h EH_EXCEPTION_NUMBER) */
#define CLR_EXCEPTION     ((NTSTATUS)0xE0434352)  /* .NET CLR exception: 0xE0000000 | 'CCR' */

/* The delay-load helper's exceptions: delayimp.h builds them as VcppException(ERROR_SEVERITY_ERROR,
 * error) = 0xC0000000 | FACILITY_VISUALCPP (109 = 0x6D) << 16 | the Win32 error, and MSVC's
 * delayhlp.cpp and mingw-w64's delayimp.c (libmingwex.a) raise these three with one parameter, the
 * DelayLoadInfo. No header names the values: the names are dumpkit's, after the Win32 error each
 * carries (ERROR_MOD_NOT_FOUND 126, ERROR_PROC_NOT_FOUND 127, ERROR_INVALID_PARAMETER 87). */
#define DELAYLOAD_MOD_NOT_FOUND       ((NTSTATUS)0xC06D007E)
#define DELAYLOAD_PROC_NOT_FOUND      ((NTSTATUS)0xC06D007F)
#define DELAYLOAD_INVALID_PARAMETER   ((NTSTATUS)0xC06D0057)
