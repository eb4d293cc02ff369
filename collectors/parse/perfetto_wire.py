"""The protobuf wire format of a Perfetto trace, scanned by compiled loops (numba): no message objects per event.

A trace is a `Trace` message: a sequence of `packet` fields (number 1, length-delimited), each a TracePacket.
The ftrace data is in TracePacket.ftrace_events (an FtraceEventBundle: cpu, repeated FtraceEvent event, ...),
and each FtraceEvent holds timestamp (1), pid (2) and exactly one event message under the field number that names
its type (block_rq_issue = 45, ...). Every field number used here comes from the perfetto package's protos
(perfetto_schema.py); this module only knows the wire format:

  tag        varint (field number << 3 | wire type); wire types 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  varint     7 bits per byte, least significant group first, at most 10 bytes

scan_trace() walks packets, bundles and events in one pass and returns index arrays (an event's timestamp, pid,
bundle, type and the place of its payload in the buffer); decode_fields() then reads the fields of many messages
of one type into columns, by field number. Damage is never skipped silently: the packet walk stops at the first
packet whose framing runs past the end or breaks (its byte offset is returned), a malformed bundle or event
inside a complete packet is counted and left out.
"""

from __future__ import annotations

import numpy as np
from numba import njit

WIRE_VARINT, WIRE_FIXED64, WIRE_LEN, WIRE_FIXED32 = 0, 1, 2, 5
KIND_INT, KIND_STR = 0, 1


@njit(cache=True, nogil=True, inline="always")
def _varint(buf, p, end):
    """(value, position after it); position -1 when it runs past end or is longer than 10 bytes."""
    v = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(10):
        if p >= end:
            return np.uint64(0), -1
        b = buf[p]
        p += 1
        v |= np.uint64(b & 0x7F) << shift
        if b < 0x80:
            return v, p
        shift += np.uint64(7)
    return np.uint64(0), -1


@njit(cache=True, nogil=True)
def _skip(buf, p, end, wire):
    """Position after a field's value of this wire type (-1 if it does not fit)."""
    if wire == WIRE_VARINT:
        _, q = _varint(buf, p, end)
        return q
    if wire == WIRE_FIXED64:
        return p + 8 if p + 8 <= end else -1
    if wire == WIRE_FIXED32:
        return p + 4 if p + 4 <= end else -1
    if wire == WIRE_LEN:
        n, q = _varint(buf, p, end)
        if q < 0 or q + np.int64(n) > end:
            return -1
        return q + np.int64(n)
    return -1


@njit(cache=True, nogil=True)
def split_packets(buf, start, end, packet_field=1):
    """The packets of a Trace byte range: (payload offsets, payload lengths, damage offset or -1).

    packet_field: Trace.packet's number (1 in every version of the protos; perfetto_schema passes it). Other
    top-level fields are skipped (a valid Trace has none). Damage: the offset of the first field whose framing
    breaks or runs past end; every packet before it is complete."""
    cap = 1024
    offs = np.empty(cap, np.int64)
    lens = np.empty(cap, np.int64)
    k = 0
    p = start
    while p < end:
        tag, q = _varint(buf, p, end)
        if q < 0:
            return offs[:k], lens[:k], p
        wire = np.int64(tag & np.uint64(7))
        if np.int64(tag >> np.uint64(3)) == packet_field and wire == WIRE_LEN:
            n, r = _varint(buf, q, end)
            if r < 0 or r + np.int64(n) > end:
                return offs[:k], lens[:k], p
            if k == cap:
                cap *= 2
                offs2 = np.empty(cap, np.int64)
                lens2 = np.empty(cap, np.int64)
                offs2[:k] = offs[:k]
                lens2[:k] = lens[:k]
                offs, lens = offs2, lens2
            offs[k] = r
            lens[k] = np.int64(n)
            k += 1
            p = r + np.int64(n)
        else:
            r = _skip(buf, q, end, wire)
            if r < 0:
                return offs[:k], lens[:k], p
            p = r
    return offs[:k], lens[:k], -1


@njit(cache=True, nogil=True)
def _grow(a, k):
    b = np.empty(max(2 * len(a), 1024), a.dtype)
    b[:k] = a[:k]
    return b


@njit(cache=True, nogil=True)
def _scan_event(buf, s, e_end, ts_field, pid_field):
    """One FtraceEvent: (ok, timestamp, pid, event field number, payload offset, payload length). ok is False
    for a message that does not decode or holds no event."""
    ts = np.int64(-1)
    pid = np.int64(-1)
    typ = np.int64(-1)
    off = np.int64(0)
    ln = np.int64(0)
    while s < e_end:
        t3, s2 = _varint(buf, s, e_end)
        if s2 < 0:
            return False, ts, pid, typ, off, ln
        f3 = np.int64(t3 >> np.uint64(3))
        w3 = np.int64(t3 & np.uint64(7))
        if w3 == WIRE_VARINT:
            v, s3 = _varint(buf, s2, e_end)
            if s3 < 0:
                return False, ts, pid, typ, off, ln
            if f3 == ts_field:
                ts = np.int64(v)
            elif f3 == pid_field:
                pid = np.int64(v)
            s = s3
        elif w3 == WIRE_LEN:
            L, s3 = _varint(buf, s2, e_end)
            if s3 < 0 or s3 + np.int64(L) > e_end:
                return False, ts, pid, typ, off, ln
            typ = f3
            off = s3
            ln = np.int64(L)
            s = s3 + np.int64(L)
        else:
            s3 = _skip(buf, s2, e_end, w3)
            if s3 < 0:
                return False, ts, pid, typ, off, ln
            s = s3
    return typ >= 0, ts, pid, typ, off, ln


# One function on purpose: numba compiles the nested protobuf walk (packet, bundle, event) into one loop;
# split, the cursor and output arrays would cross calls on every event.
@njit(cache=True, nogil=True)
def scan_trace(buf, pk_offs, pk_lens, wanted, nums):
    """Every ftrace event of the packets, and where the other wanted packet fields are.

    wanted[n] is 1 for the TracePacket field numbers whose payloads the caller decodes itself (process_tree,
    clock_snapshot, stats, compressed packets, ...). nums: the field numbers this walk reads, from the protos
    (perfetto_schema.wire_numbers(): TracePacket timestamp, ftrace_events, previous_packet_dropped;
    FtraceEventBundle cpu, event, lost_events, ftrace_clock, generic_event_descriptors; FtraceEvent timestamp,
    pid). Returns
      events   ts, pid, bundle index, type (its FtraceEvent field number), payload offset, payload length
      bundles  cpu, lost_events flag, ftrace_clock, packet index
      extras   packet index, field number, payload offset, payload length (wanted fields, and the bundles'
               generic event descriptors, reported as field number -11 with the bundle index as packet index)
      packet timestamps (-1 where absent), packets flagged previous_packet_dropped, bad (packets or events that
      did not decode)
    """
    pk_ts_f, pk_ftrace_f, pk_dropped_f = nums[0], nums[1], nums[2]
    b_cpu_f, b_event_f, b_lost_f, b_clock_f, b_desc_f = nums[3], nums[4], nums[5], nums[6], nums[7]
    ev_ts_f, ev_pid_f = nums[8], nums[9]
    n_pk = len(pk_offs)
    cap = 1024
    for i in range(n_pk):  # an ftrace event takes 20 bytes or more on the wire: few regrowths, little slack
        cap += pk_lens[i] // 24
    ev_ts = np.empty(cap, np.int64)
    ev_pid = np.empty(cap, np.int32)
    ev_bundle = np.empty(cap, np.int32)
    ev_type = np.empty(cap, np.int32)
    ev_off = np.empty(cap, np.int64)
    ev_len = np.empty(cap, np.int32)
    b_cpu = np.empty(1024, np.int32)
    b_lost = np.empty(1024, np.int8)
    b_clock = np.empty(1024, np.int32)
    b_packet = np.empty(1024, np.int32)
    x_packet = np.empty(1024, np.int32)
    x_field = np.empty(1024, np.int32)
    x_off = np.empty(1024, np.int64)
    x_len = np.empty(1024, np.int64)
    pk_ts = np.full(n_pk, -1, np.int64)
    dropped = 0
    ne = 0
    nb = 0
    nx = 0
    bad = 0
    for i in range(n_pk):
        p = pk_offs[i]
        end = p + pk_lens[i]
        while p < end:
            tag, q = _varint(buf, p, end)
            if q < 0:
                bad += 1
                break
            field = np.int64(tag >> np.uint64(3))
            wire = np.int64(tag & np.uint64(7))
            if (field == pk_ts_f or field == pk_dropped_f) and wire == WIRE_VARINT:
                v, q2 = _varint(buf, q, end)
                if q2 < 0:
                    bad += 1
                    break
                if field == pk_ts_f:
                    pk_ts[i] = np.int64(v)
                elif v:
                    dropped += 1
                p = q2
                continue
            if wire != WIRE_LEN:
                q2 = _skip(buf, q, end, wire)
                if q2 < 0:
                    bad += 1
                    break
                p = q2
                continue
            n, q2 = _varint(buf, q, end)
            if q2 < 0 or q2 + np.int64(n) > end:
                bad += 1
                break
            pay, pay_end = q2, q2 + np.int64(n)
            p = pay_end
            if field == pk_ftrace_f:  # an FtraceEventBundle
                if nb == len(b_cpu):
                    b_cpu = _grow(b_cpu, nb)
                    b_lost = _grow(b_lost, nb)
                    b_clock = _grow(b_clock, nb)
                    b_packet = _grow(b_packet, nb)
                b_cpu[nb] = -1
                b_lost[nb] = 0
                b_clock[nb] = 0
                b_packet[nb] = i
                r = pay
                while r < pay_end:
                    t2, r2 = _varint(buf, r, pay_end)
                    if r2 < 0:
                        bad += 1
                        break
                    f2 = np.int64(t2 >> np.uint64(3))
                    w2 = np.int64(t2 & np.uint64(7))
                    if w2 == WIRE_VARINT:
                        v, r3 = _varint(buf, r2, pay_end)
                        if r3 < 0:
                            bad += 1
                            break
                        if f2 == b_cpu_f:
                            b_cpu[nb] = np.int32(v)
                        elif f2 == b_lost_f:
                            b_lost[nb] = 1 if v else 0
                        elif f2 == b_clock_f:
                            b_clock[nb] = np.int32(v)
                        r = r3
                        continue
                    if w2 != WIRE_LEN:
                        r3 = _skip(buf, r2, pay_end, w2)
                        if r3 < 0:
                            bad += 1
                            break
                        r = r3
                        continue
                    m, r3 = _varint(buf, r2, pay_end)
                    if r3 < 0 or r3 + np.int64(m) > pay_end:
                        bad += 1
                        break
                    e_end = r3 + np.int64(m)
                    if f2 == b_event_f:  # one FtraceEvent
                        ok, ts, pid, typ, off, ln = _scan_event(buf, r3, e_end, ev_ts_f, ev_pid_f)
                        if not ok:
                            bad += 1
                        else:
                            if ne == len(ev_ts):
                                ev_ts = _grow(ev_ts, ne)
                                ev_pid = _grow(ev_pid, ne)
                                ev_bundle = _grow(ev_bundle, ne)
                                ev_type = _grow(ev_type, ne)
                                ev_off = _grow(ev_off, ne)
                                ev_len = _grow(ev_len, ne)
                            ev_ts[ne] = ts
                            ev_pid[ne] = np.int32(pid)
                            ev_bundle[ne] = nb
                            ev_type[ne] = np.int32(typ)
                            ev_off[ne] = off
                            ev_len[ne] = np.int32(ln)
                            ne += 1
                    elif f2 == b_desc_f:  # generic_event_descriptors of this bundle
                        if nx == len(x_packet):
                            x_packet = _grow(x_packet, nx)
                            x_field = _grow(x_field, nx)
                            x_off = _grow(x_off, nx)
                            x_len = _grow(x_len, nx)
                        x_packet[nx] = nb
                        x_field[nx] = -11
                        x_off[nx] = r3
                        x_len[nx] = np.int64(m)
                        nx += 1
                    r = e_end
                nb += 1
            elif field < len(wanted) and wanted[field]:
                if nx == len(x_packet):
                    x_packet = _grow(x_packet, nx)
                    x_field = _grow(x_field, nx)
                    x_off = _grow(x_off, nx)
                    x_len = _grow(x_len, nx)
                x_packet[nx] = i
                x_field[nx] = np.int32(field)
                x_off[nx] = pay
                x_len[nx] = np.int64(n)
                nx += 1
    return ((ev_ts[:ne], ev_pid[:ne], ev_bundle[:ne], ev_type[:ne], ev_off[:ne], ev_len[:ne]),
            (b_cpu[:nb], b_lost[:nb], b_clock[:nb], b_packet[:nb]),
            (x_packet[:nx], x_field[:nx], x_off[:nx], x_len[:nx]), pk_ts, dropped, bad)


# One function on purpose: one compiled loop over the messages, each field dispatched on its slot kind in
# place, so no per-field call is made.
@njit(cache=True, nogil=True)
def decode_fields(buf, offs, lens, slot_of, slot_kind, slot_repeat, slot_col, n_int, n_str):
    """The fields of n messages of one type, as columns: ints[col, i] (varints and fixed values as int64 bits)
    for KIND_INT slots, spans starts/ends[col, i] of the KIND_STR slots, and whether a message did not decode.

    slot_of[field number] is the field's first slot (-1: not wanted); slot_repeat[slot] how many occurrences of a
    repeated field go to consecutive slots (packed repeated varints are unpacked into them too); slot_col[slot]
    the slot's row in ints or in starts/ends. A field that is absent reads 0 (""), the proto default. A message
    whose fields do not decode keeps what was read before the damage and is flagged in broken."""
    n = len(offs)
    ints = np.zeros((n_int, n), np.int64)
    starts = np.zeros((n_str, n), np.int64)
    ends = np.zeros((n_str, n), np.int64)
    broken = np.zeros(n, np.bool_)
    seen = np.zeros(max(len(slot_kind), 1), np.int64)
    for i in range(n):
        p = offs[i]
        end = p + lens[i]
        seen[:] = 0
        while p < end:
            tag, q = _varint(buf, p, end)
            if q < 0:
                broken[i] = True
                break
            f = np.int64(tag >> np.uint64(3))
            w = np.int64(tag & np.uint64(7))
            slot = slot_of[f] if f < len(slot_of) else -1
            if slot < 0:
                q2 = _skip(buf, q, end, w)
                if q2 < 0:
                    broken[i] = True
                    break
                p = q2
                continue
            if w == WIRE_VARINT:
                v, q2 = _varint(buf, q, end)
                if q2 < 0:
                    broken[i] = True
                    break
                k = seen[slot]
                if k < slot_repeat[slot] and slot_kind[slot] == KIND_INT:
                    ints[slot_col[slot] + k, i] = np.int64(v)
                    seen[slot] = k + 1
                p = q2
            elif w == WIRE_FIXED64 or w == WIRE_FIXED32:
                size = 8 if w == WIRE_FIXED64 else 4
                if q + size > end:
                    broken[i] = True
                    break
                v = np.uint64(0)
                for j in range(size):
                    v |= np.uint64(buf[q + j]) << np.uint64(8 * j)
                k = seen[slot]
                if k < slot_repeat[slot] and slot_kind[slot] == KIND_INT:
                    ints[slot_col[slot] + k, i] = np.int64(v)
                    seen[slot] = k + 1
                p = q + size
            elif w == WIRE_LEN:
                L, q2 = _varint(buf, q, end)
                if q2 < 0 or q2 + np.int64(L) > end:
                    broken[i] = True
                    break
                stop = q2 + np.int64(L)
                if slot_kind[slot] == KIND_STR:
                    starts[slot_col[slot], i] = q2
                    ends[slot_col[slot], i] = stop
                else:  # packed repeated varints
                    r = q2
                    while r < stop:
                        v, r2 = _varint(buf, r, stop)
                        if r2 < 0:
                            broken[i] = True
                            break
                        k = seen[slot]
                        if k < slot_repeat[slot]:
                            ints[slot_col[slot] + k, i] = np.int64(v)
                            seen[slot] = k + 1
                        r = r2
                p = stop
            else:
                broken[i] = True
                break
    return ints, starts, ends, broken


@njit(cache=True, nogil=True)
def hash_spans(buf, starts, ends):
    """FNV-1a (64 bit) of the bytes of each span: equal strings, equal hashes (a collision between two of a
    trace's few distinct comm/rwbs strings is not a practical concern at 64 bits)."""
    out = np.empty(len(starts), np.uint64)
    for i in range(len(starts)):
        h = np.uint64(0xCBF29CE484222325)
        for p in range(starts[i], ends[i]):
            h = (h ^ np.uint64(buf[p])) * np.uint64(0x100000001B3)
        out[i] = h ^ np.uint64(ends[i] - starts[i])
    return out


GENERIC_STR, GENERIC_INT, GENERIC_UINT = 3, 4, 5  # the value kinds flatten_generic() reports


@njit(cache=True, nogil=True)
def _generic_field(buf, r, stop, nums):
    """One GenericFtraceEvent.Field: (ok, value kind, int value, name span, string span)."""
    kind = 0
    ival = np.int64(0)
    ns = ne = ss = se = np.int64(0)
    while r < stop:
        t2, r2 = _varint(buf, r, stop)
        if r2 < 0:
            return False, kind, ival, ns, ne, ss, se
        f2 = np.int64(t2 >> np.uint64(3))
        w2 = np.int64(t2 & np.uint64(7))
        if w2 == WIRE_VARINT:
            v, r3 = _varint(buf, r2, stop)
            if r3 < 0:
                return False, kind, ival, ns, ne, ss, se
            if f2 == nums[4] or f2 == nums[5]:
                kind = GENERIC_INT if f2 == nums[4] else GENERIC_UINT
                ival = np.int64(v)
            r = r3
        elif w2 == WIRE_LEN:
            L2, r3 = _varint(buf, r2, stop)
            if r3 < 0 or r3 + np.int64(L2) > stop:
                return False, kind, ival, ns, ne, ss, se
            if f2 == nums[2]:
                ns, ne = r3, r3 + np.int64(L2)
            elif f2 == nums[3]:
                kind = GENERIC_STR
                ss, se = r3, r3 + np.int64(L2)
            r = r3 + np.int64(L2)
        else:
            r3 = _skip(buf, r2, stop, w2)
            if r3 < 0:
                return False, kind, ival, ns, ne, ss, se
            r = r3
    return True, kind, ival, ns, ne, ss, se


@njit(cache=True, nogil=True)
def flatten_generic(buf, offs, lens, nums):
    """Old-style generic events (GenericFtraceEvent: event_name, repeated Field field with name, str_value,
    int_value, uint_value; their numbers in nums, from the protos: perfetto_schema.generic_numbers()): the event
    name's span per message, and one row per field: (message index, name span, value kind GENERIC_STR/INT/UINT or
    0 if none, int value, string span)."""
    n = len(offs)
    name_s = np.zeros(n, np.int64)
    name_e = np.zeros(n, np.int64)
    cap = max(4 * n, 1024)
    f_msg = np.empty(cap, np.int64)
    f_ns = np.empty(cap, np.int64)
    f_ne = np.empty(cap, np.int64)
    f_kind = np.empty(cap, np.int8)
    f_int = np.empty(cap, np.int64)
    f_ss = np.empty(cap, np.int64)
    f_se = np.empty(cap, np.int64)
    k = 0
    broken = np.zeros(n, np.bool_)
    for i in range(n):
        p = offs[i]
        end = p + lens[i]
        while p < end:
            tag, q = _varint(buf, p, end)
            w = np.int64(tag & np.uint64(7))
            if q < 0 or w != WIRE_LEN:
                q2 = _skip(buf, q, end, w) if q >= 0 else -1
                if q2 < 0:
                    broken[i] = True
                    break
                p = q2
                continue
            L, q2 = _varint(buf, q, end)
            if q2 < 0 or q2 + np.int64(L) > end:
                broken[i] = True
                break
            stop = q2 + np.int64(L)
            f = np.int64(tag >> np.uint64(3))
            if f == nums[0]:
                name_s[i] = q2
                name_e[i] = stop
            elif f == nums[1]:
                ok, kind, ival, ns, ne, ss, se = _generic_field(buf, q2, stop, nums)
                if not ok:
                    broken[i] = True
                if k == len(f_msg):
                    f_msg = _grow(f_msg, k)
                    f_ns = _grow(f_ns, k)
                    f_ne = _grow(f_ne, k)
                    f_kind = _grow(f_kind, k)
                    f_int = _grow(f_int, k)
                    f_ss = _grow(f_ss, k)
                    f_se = _grow(f_se, k)
                f_msg[k] = i
                f_ns[k] = ns
                f_ne[k] = ne
                f_kind[k] = kind
                f_int[k] = ival
                f_ss[k] = ss
                f_se[k] = se
                k += 1
            p = stop
    return name_s, name_e, (f_msg[:k], f_ns[:k], f_ne[:k], f_kind[:k], f_int[:k], f_ss[:k], f_se[:k]), broken
