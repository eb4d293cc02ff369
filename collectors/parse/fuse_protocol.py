"""The FUSE protocol as the kernel speaks it on /dev/fuse: opcodes, header sizes, and what a reply's length says.

From include/uapi/linux/fuse.h (Debian's linux-libc-dev 6.1 at /usr/include/linux/fuse.h; FUSE_STATX = 52 is 6.6's)
and the opcode table of fuse_request_send's print format (fs/fuse/fuse_trace.h, 6.18's format file): names as the
tracepoint prints them (FUSE_WRITE), so every FUSE source fills fuse_req.opcode_name alike.
tests/unit/test_fuse_layer.py holds the table to the installed header.

A request starts with fuse_in_header (40 bytes: len, opcode, unique, nodeid, uid, gid, pid, padding); a WRITE's
fuse_write_in (40) follows it, then the data. A reply starts with fuse_out_header (16: len, error, unique); its body
has a fixed size for most opcodes, which is what REPLY_BODY_BYTES says (both the current and the pre-7.9 "compat"
sizes of entry and attr replies; an error reply is the header alone).
"""

from __future__ import annotations

IN_HEADER_BYTES = 40
WRITE_IN_BYTES = 40
OUT_HEADER_BYTES = 16

OPCODES = {
    1: "FUSE_LOOKUP", 2: "FUSE_FORGET", 3: "FUSE_GETATTR", 4: "FUSE_SETATTR", 5: "FUSE_READLINK", 6: "FUSE_SYMLINK",
    8: "FUSE_MKNOD", 9: "FUSE_MKDIR", 10: "FUSE_UNLINK", 11: "FUSE_RMDIR", 12: "FUSE_RENAME", 13: "FUSE_LINK",
    14: "FUSE_OPEN", 15: "FUSE_READ", 16: "FUSE_WRITE", 17: "FUSE_STATFS", 18: "FUSE_RELEASE", 20: "FUSE_FSYNC",
    21: "FUSE_SETXATTR", 22: "FUSE_GETXATTR", 23: "FUSE_LISTXATTR", 24: "FUSE_REMOVEXATTR", 25: "FUSE_FLUSH",
    26: "FUSE_INIT", 27: "FUSE_OPENDIR", 28: "FUSE_READDIR", 29: "FUSE_RELEASEDIR", 30: "FUSE_FSYNCDIR",
    31: "FUSE_GETLK", 32: "FUSE_SETLK", 33: "FUSE_SETLKW", 34: "FUSE_ACCESS", 35: "FUSE_CREATE",
    36: "FUSE_INTERRUPT", 37: "FUSE_BMAP", 38: "FUSE_DESTROY", 39: "FUSE_IOCTL", 40: "FUSE_POLL",
    41: "FUSE_NOTIFY_REPLY", 42: "FUSE_BATCH_FORGET", 43: "FUSE_FALLOCATE", 44: "FUSE_READDIRPLUS",
    45: "FUSE_RENAME2", 46: "FUSE_LSEEK", 47: "FUSE_COPY_FILE_RANGE", 48: "FUSE_SETUPMAPPING",
    49: "FUSE_REMOVEMAPPING", 50: "FUSE_SYNCFS", 51: "FUSE_TMPFILE", 52: "FUSE_STATX", 4096: "CUSE_INIT",
}
FUSE_READ, FUSE_WRITE = 15, 16
# Requests the daemon never answers.
NO_REPLY = {2, 36, 42}   # FORGET, INTERRUPT, BATCH_FORGET

_ENTRY = (128, 120)       # fuse_entry_out, FUSE_COMPAT_ENTRY_OUT_SIZE
_ATTR = (104, 96)         # fuse_attr_out, FUSE_COMPAT_ATTR_OUT_SIZE
# Bodies of successful replies, in bytes, where they have one fixed size (other opcodes: any length).
REPLY_BODY_BYTES: dict[int, tuple[int, ...]] = {
    1: _ENTRY, 6: _ENTRY, 8: _ENTRY, 9: _ENTRY, 13: _ENTRY,
    3: _ATTR, 4: _ATTR,
    14: (16,), 27: (16,),                              # fuse_open_out
    35: tuple(e + 16 for e in _ENTRY),                 # CREATE: entry then open
    16: (8,),                                          # fuse_write_out
    17: (80, 48),                                      # fuse_statfs_out, FUSE_COMPAT_STATFS_SIZE
    10: (0,), 11: (0,), 12: (0,), 45: (0,), 18: (0,), 29: (0,), 20: (0,), 30: (0,), 21: (0,), 24: (0,),
    25: (0,), 34: (0,), 43: (0,), 50: (0,),
}


def reply_fits(opcode: int, error: int, reply_len: int) -> bool:
    """Whether a reply of this length (header included) can answer a request of this opcode: an error reply is the
    header alone, a successful one has its opcode's body (any length where the body varies)."""
    if error:
        return reply_len == OUT_HEADER_BYTES
    sizes = REPLY_BODY_BYTES.get(opcode)
    return sizes is None or reply_len - OUT_HEADER_BYTES in sizes
