"""Event formats for the Perfetto reader where a trace comes without the kernel's format files.

A Perfetto trace carries each event's fields, not how the kernel prints them; the tables of ftrace_events.py are
read from the kernel's text. When a trace comes with the formats/ of its kernel (as `mobiperf run` saves them
beside a trace it records), those are used. Otherwise these are: the format files (fields and print fmt) of the
events whose text the tables read, as this machine's kernel (6.18) declares them in tracefs, common fields left
out; f2fs_sync_file_enter/exit and Android's android_fs_*, which this kernel is built without, are written from the
TP_printk of the kernel's include/trace/events/f2fs.h (the cp_reason form of 4.14 and later: show_fsync_cpreason's
names) and of the Android common kernels' android_fs_template.h.
The print fmts of these events have been stable across kernels for years; sys_enter_* / sys_exit_* of the
syscalls system are all printed by one macro, which perfetto_bodies.py writes for any call.

Layout: one block per event, `name:`, `ID:` (0: unused here), `field:` lines, then `print fmt:` with long lines
continued by an indented line (joined with one space on load).
"""

from __future__ import annotations

from functools import lru_cache

from mobiperf.collectors.parse.event_format import EventFormat, parse_event_format

# jbd2's commit steps share one event class (jbd2_commit in include/trace/events/jbd2.h): one format, four names
_JBD2_COMMIT_STEPS = ("jbd2_start_commit", "jbd2_commit_locking", "jbd2_commit_flushing", "jbd2_commit_logging")
_JBD2_COMMIT_CLASS = """
    name: {name}
    ID: 0
    field:dev_t dev; offset:8; size:4; signed:0;
    field:char sync_commit; offset:12; size:1; signed:0;
    field:tid_t transaction; offset:16; size:4; signed:0;
    print fmt: "dev %d,%d transaction %u sync %d", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int)
        ((REC->dev) & ((1U << 20) - 1))), REC->transaction, REC->sync_commit
"""

# Android's android_fs events (android_fs_template.h of the Android common kernels), which a mainline kernel is
# built without: their text is what parse/android_fs.py reads. dataread and datawrite share the two classes.
_ANDROID_FS_START = """
    name: {name}
    ID: 0
    field:__data_loc char[] pathbuf; offset:8; size:4; signed:0;
    field:loff_t offset; offset:16; size:8; signed:1;
    field:int bytes; offset:24; size:4; signed:1;
    field:loff_t i_size; offset:32; size:8; signed:1;
    field:__data_loc char[] cmdline; offset:40; size:4; signed:0;
    field:pid_t pid; offset:44; size:4; signed:1;
    field:ino_t ino; offset:48; size:8; signed:0;
    print fmt: "entry_name %s, offset %llu, bytes %d, cmdline %s, pid %d, i_size %llu, ino %lu",
        __get_str(pathbuf), REC->offset, REC->bytes, __get_str(cmdline), REC->pid, REC->i_size,
        (unsigned long) REC->ino
"""
_ANDROID_FS_END = """
    name: {name}
    ID: 0
    field:ino_t ino; offset:8; size:8; signed:0;
    field:loff_t offset; offset:16; size:8; signed:1;
    field:int bytes; offset:24; size:4; signed:1;
    print fmt: "ino %lu, offset %llu, bytes %d", (unsigned long) REC->ino, REC->offset, REC->bytes
"""

# The scheduler's and the task events (include/trace/events/sched.h, task.h; sched_blocked_reason from the Android
# common kernels), as this kernel declares them. prev_state's flag bits differ in old kernels above D (0x2, the same
# everywhere): a 4.x trace's rarer states (K, W, x) may print under other letters, never as D.
_SCHED_STATES = ("0x00000001, \"S\" }, { 0x00000002, \"D\" }, { 0x00000004, \"T\" }, { 0x00000008, \"t\" }, "
                 "{ 0x00000010, \"X\" }, { 0x00000020, \"Z\" }, { 0x00000040, \"P\" }, { 0x00000080, \"I\"")
_WAKE_CLASS = """
    name: {name}
    ID: 0
    field:char comm[16]; offset:8; size:16; signed:0;
    field:pid_t pid; offset:24; size:4; signed:1;
    field:int prio; offset:28; size:4; signed:1;
    field:int target_cpu; offset:32; size:4; signed:1;
    print fmt: "comm=%s pid=%d prio=%d target_cpu=%03d", REC->comm, REC->pid, REC->prio, REC->target_cpu
"""
_SCHED_FORMATS = (
    ("sched", """
    name: sched_switch
    ID: 0
    field:char prev_comm[16]; offset:8; size:16; signed:0;
    field:pid_t prev_pid; offset:24; size:4; signed:1;
    field:int prev_prio; offset:28; size:4; signed:1;
    field:long prev_state; offset:32; size:8; signed:1;
    field:char next_comm[16]; offset:40; size:16; signed:0;
    field:pid_t next_pid; offset:56; size:4; signed:1;
    field:int next_prio; offset:60; size:4; signed:1;
    print fmt: "prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d",
        REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & 0xff) ? __print_flags(REC->prev_state &
        0xff, "|", { """ + "{STATES}" + """ }) : "R", REC->prev_state & 0x100 ? "+" : "", REC->next_comm,
        REC->next_pid, REC->next_prio
"""),
    ("sched", _WAKE_CLASS.format(name="sched_waking")),
    ("sched", _WAKE_CLASS.format(name="sched_wakeup")),
    ("sched", """
    name: sched_blocked_reason
    ID: 0
    field:pid_t pid; offset:8; size:4; signed:1;
    field:void* caller; offset:16; size:8; signed:0;
    field:bool io_wait; offset:24; size:1; signed:0;
    print fmt: "pid=%d iowait=%d caller=%pS", REC->pid, REC->io_wait, REC->caller
"""),
    ("task", """
    name: task_newtask
    ID: 0
    field:pid_t pid; offset:8; size:4; signed:1;
    field:char comm[16]; offset:12; size:16; signed:0;
    field:u64 clone_flags; offset:32; size:8; signed:0;
    field:short oom_score_adj; offset:40; size:2; signed:1;
    print fmt: "pid=%d comm=%s clone_flags=%llx oom_score_adj=%hd", REC->pid, REC->comm, REC->clone_flags,
        REC->oom_score_adj
"""),
    ("task", """
    name: task_rename
    ID: 0
    field:pid_t pid; offset:8; size:4; signed:1;
    field:char oldcomm[16]; offset:12; size:16; signed:0;
    field:char newcomm[16]; offset:28; size:16; signed:0;
    field:short oom_score_adj; offset:44; size:2; signed:1;
    print fmt: "pid=%d oldcomm=%s newcomm=%s oom_score_adj=%hd", REC->pid, REC->oldcomm, REC->newcomm,
        REC->oom_score_adj
"""),
)

FORMATS = (
    ("ext4", """
    name: ext4_sync_file_enter
    ID: 0
    field:dev_t dev; offset:8; size:4; signed:0;
    field:ino_t ino; offset:16; size:8; signed:0;
    field:ino_t parent; offset:24; size:8; signed:0;
    field:int datasync; offset:32; size:4; signed:1;
    print fmt: "dev %d,%d ino %lu parent %lu datasync %d ", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int)
        ((REC->dev) & ((1U << 20) - 1))), (unsigned long) REC->ino, (unsigned long) REC->parent, REC->datasync
"""),
    ("ext4", """
    name: ext4_sync_file_exit
    ID: 0
    field:dev_t dev; offset:8; size:4; signed:0;
    field:ino_t ino; offset:16; size:8; signed:0;
    field:int ret; offset:24; size:4; signed:1;
    print fmt: "dev %d,%d ino %lu ret %d", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U
        << 20) - 1))), (unsigned long) REC->ino, REC->ret
"""),
    *(("jbd2", _JBD2_COMMIT_CLASS.format(name=name)) for name in _JBD2_COMMIT_STEPS),
    ("jbd2", """
    name: jbd2_end_commit
    ID: 0
    field:dev_t dev; offset:8; size:4; signed:0;
    field:char sync_commit; offset:12; size:1; signed:0;
    field:tid_t transaction; offset:16; size:4; signed:0;
    field:tid_t head; offset:20; size:4; signed:0;
    print fmt: "dev %d,%d transaction %u sync %d head %u", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int)
        ((REC->dev) & ((1U << 20) - 1))), REC->transaction, REC->sync_commit, REC->head
"""),
    ("jbd2", """
    name: jbd2_drop_transaction
    ID: 0
    field:dev_t dev; offset:8; size:4; signed:0;
    field:char sync_commit; offset:12; size:1; signed:0;
    field:tid_t transaction; offset:16; size:4; signed:0;
    print fmt: "dev %d,%d transaction %u sync %d", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int)
        ((REC->dev) & ((1U << 20) - 1))), REC->transaction, REC->sync_commit
"""),
    ("jbd2", """
    name: jbd2_run_stats
    ID: 0
    field:dev_t dev; offset:8; size:4; signed:0;
    field:tid_t tid; offset:12; size:4; signed:0;
    field:unsigned long wait; offset:16; size:8; signed:0;
    field:unsigned long request_delay; offset:24; size:8; signed:0;
    field:unsigned long running; offset:32; size:8; signed:0;
    field:unsigned long locked; offset:40; size:8; signed:0;
    field:unsigned long flushing; offset:48; size:8; signed:0;
    field:unsigned long logging; offset:56; size:8; signed:0;
    field:__u32 handle_count; offset:64; size:4; signed:0;
    field:__u32 blocks; offset:68; size:4; signed:0;
    field:__u32 blocks_logged; offset:72; size:4; signed:0;
    print fmt: "dev %d,%d tid %u wait %u request_delay %u running %u locked %u flushing %u logging %u handle_count
        %u blocks %u blocks_logged %u", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U <<
        20) - 1))), REC->tid, jiffies_to_msecs(REC->wait), jiffies_to_msecs(REC->request_delay),
        jiffies_to_msecs(REC->running), jiffies_to_msecs(REC->locked), jiffies_to_msecs(REC->flushing),
        jiffies_to_msecs(REC->logging), REC->handle_count, REC->blocks, REC->blocks_logged
"""),
    ("fuse", """
    name: fuse_request_send
    ID: 0
    field:dev_t connection; offset:8; size:4; signed:0;
    field:uint64_t unique; offset:16; size:8; signed:0;
    field:enum fuse_opcode opcode; offset:24; size:4; signed:0;
    field:uint32_t len; offset:28; size:4; signed:0;
    print fmt: "connection %u req %llu opcode %u (%s) len %u ", REC->connection, REC->unique, REC->opcode,
        __print_symbolic(REC->opcode, {1, "FUSE_LOOKUP"}, {2, "FUSE_FORGET"}, {3, "FUSE_GETATTR"}, {4,
        "FUSE_SETATTR"}, {5, "FUSE_READLINK"}, {6, "FUSE_SYMLINK"}, {8, "FUSE_MKNOD"}, {9, "FUSE_MKDIR"}, {10,
        "FUSE_UNLINK"}, {11, "FUSE_RMDIR"}, {12, "FUSE_RENAME"}, {13, "FUSE_LINK"}, {14, "FUSE_OPEN"}, {15,
        "FUSE_READ"}, {16, "FUSE_WRITE"}, {17, "FUSE_STATFS"}, {18, "FUSE_RELEASE"}, {20, "FUSE_FSYNC"}, {21,
        "FUSE_SETXATTR"}, {22, "FUSE_GETXATTR"}, {23, "FUSE_LISTXATTR"}, {24, "FUSE_REMOVEXATTR"}, {25,
        "FUSE_FLUSH"}, {26, "FUSE_INIT"}, {27, "FUSE_OPENDIR"}, {28, "FUSE_READDIR"}, {29, "FUSE_RELEASEDIR"},
        {30, "FUSE_FSYNCDIR"}, {31, "FUSE_GETLK"}, {32, "FUSE_SETLK"}, {33, "FUSE_SETLKW"}, {34, "FUSE_ACCESS"},
        {35, "FUSE_CREATE"}, {36, "FUSE_INTERRUPT"}, {37, "FUSE_BMAP"}, {38, "FUSE_DESTROY"}, {39, "FUSE_IOCTL"},
        {40, "FUSE_POLL"}, {41, "FUSE_NOTIFY_REPLY"}, {42, "FUSE_BATCH_FORGET"}, {43, "FUSE_FALLOCATE"}, {44,
        "FUSE_READDIRPLUS"}, {45, "FUSE_RENAME2"}, {46, "FUSE_LSEEK"}, {47, "FUSE_COPY_FILE_RANGE"}, {48,
        "FUSE_SETUPMAPPING"}, {49, "FUSE_REMOVEMAPPING"}, {50, "FUSE_SYNCFS"}, {51, "FUSE_TMPFILE"}, {52,
        "FUSE_STATX"}, {4096, "CUSE_INIT"}), REC->len
"""),
    ("fuse", """
    name: fuse_request_end
    ID: 0
    field:dev_t connection; offset:8; size:4; signed:0;
    field:uint64_t unique; offset:16; size:8; signed:0;
    field:uint32_t len; offset:24; size:4; signed:0;
    field:int32_t error; offset:28; size:4; signed:1;
    print fmt: "connection %u req %llu len %u error %d", REC->connection, REC->unique, REC->len, REC->error
"""),
    ("raw_syscalls", """
    name: sys_enter
    ID: 0
    field:long id; offset:8; size:8; signed:1;
    field:unsigned long args[6]; offset:16; size:48; signed:0;
    print fmt: "NR %ld (%lx, %lx, %lx, %lx, %lx, %lx)", REC->id, REC->args[0], REC->args[1], REC->args[2],
        REC->args[3], REC->args[4], REC->args[5]
"""),
    ("raw_syscalls", """
    name: sys_exit
    ID: 0
    field:long id; offset:8; size:8; signed:1;
    field:long ret; offset:16; size:8; signed:1;
    print fmt: "NR %ld = %ld", REC->id, REC->ret
"""),
    ("f2fs", """
    name: f2fs_sync_file_enter
    ID: 0
    field:dev_t dev; offset:8; size:4; signed:0;
    field:ino_t ino; offset:16; size:8; signed:0;
    field:ino_t pino; offset:24; size:8; signed:0;
    field:umode_t mode; offset:32; size:2; signed:0;
    field:loff_t size; offset:40; size:8; signed:1;
    field:unsigned int nlink; offset:48; size:4; signed:0;
    field:blkcnt_t blocks; offset:56; size:8; signed:0;
    field:__u8 advise; offset:64; size:1; signed:0;
    print fmt: "dev = (%d,%d), ino = %lu, pino = %lu, i_mode = 0x%hx, i_size = %lld, i_nlink = %u, i_blocks =
        %llu, i_advise = 0x%x", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) -
        1))), (unsigned long)REC->ino, (unsigned long)REC->pino, REC->mode, REC->size, (unsigned int)REC->nlink,
        (unsigned long long)REC->blocks, (unsigned char)REC->advise
"""),
    ("f2fs", """
    name: f2fs_sync_file_exit
    ID: 0
    field:dev_t dev; offset:8; size:4; signed:0;
    field:ino_t ino; offset:16; size:8; signed:0;
    field:int cp_reason; offset:24; size:4; signed:1;
    field:int datasync; offset:28; size:4; signed:1;
    field:int ret; offset:32; size:4; signed:1;
    print fmt: "dev = (%d,%d), ino = %lu, cp_reason: %s, datasync = %d, ret = %d", ((unsigned int) ((REC->dev) >>
        20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1))), (unsigned long)REC->ino,
        __print_symbolic(REC->cp_reason, { 0, "no needed" }, { 1, "non regular" }, { 2, "compressed" }, { 3,
        "hardlink" }, { 4, "sb needs cp" }, { 5, "wrong pino" }, { 6, "no space roll forward" }, { 7, "node needs
        cp" }, { 8, "fastboot mode" }, { 9, "log type is 2" }, { 10, "dir needs recovery" }), REC->datasync,
        REC->ret
"""),
    *(("android_fs", template.format(name=f"android_fs_{io}_{end}"))
      for io in ("dataread", "datawrite")
      for end, template in (("start", _ANDROID_FS_START), ("end", _ANDROID_FS_END))),
)


@lru_cache(maxsize=1)
def builtin_formats() -> dict[str, EventFormat]:
    """The formats above by event name."""
    out = {}
    for system, block in (*FORMATS, *_SCHED_FORMATS):
        block = block.replace("{STATES}", _SCHED_STATES)
        lines: list[str] = []
        for line in block.strip("\n").splitlines():
            if line.startswith("        ") and lines:
                lines[-1] += " " + line.strip()
            else:
                lines.append(line.strip())
        fmt = parse_event_format("\n".join(lines), system)
        if fmt is not None:
            out[fmt.name] = fmt
    return out
