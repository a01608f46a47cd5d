// <cocod.hpp> pulls in no operating-system header of its own: the POSIX file calls of
// checkpoints (open, fsync, mkdir: <fcntl.h>, <sys/stat.h>) come only with <cocod/checkpoint.hpp>.
// (<unistd.h> cannot be checked: libstdc++'s <atomic> includes it.) Compiled into test_headers.
#include <cocod.hpp>

#if defined(_FCNTL_H) || defined(_SYS_STAT_H)
#error "<cocod.hpp> includes <fcntl.h> or <sys/stat.h>: keep the file system in <cocod/checkpoint.hpp>"
#endif

#include <cocod/checkpoint.hpp>

#if !defined(_FCNTL_H) || !defined(_SYS_STAT_H)
#error "this check relies on glibc's include guards _FCNTL_H and _SYS_STAT_H, which <cocod/checkpoint.hpp> defines"
#endif
