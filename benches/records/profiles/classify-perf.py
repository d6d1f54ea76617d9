#!/usr/bin/env python3
"""Sorts the samples of a `perf record --call-graph dwarf` of
benches/src/bin/pipe_profile.rs into where the parent's CPU goes (issue 31;
the record is 2026-12-02-host-session.txt beside this file).

Usage: classify-perf.py <perf.data> [-v] [--cpu <ms per MiB> --line <line bytes>]

Prints each class's share of the parent's samples (the child, comm
pipe_writer, left out); -v lists the unattributed ones; --cpu/--line adds
the grouped shares of the timed window with ns per message."""
import re, subprocess, sys, collections

data = sys.argv[1]
out = subprocess.run(['perf', 'script', '-i', data, '-F', 'comm,tid,period,ip,sym'],
                     capture_output=True, text=True).stdout

def samples():
    cur = None
    for line in out.splitlines():
        if not line.strip():
            if cur: yield cur
            cur = None
            continue
        if not line.startswith((' ', '\t')):
            parts = line.split()
            cur = {'comm': parts[0], 'frames': []}
            continue
        m = re.match(r'\s*([0-9a-f]+)\s+(.*)$', line)
        if m and cur is not None:
            addr, sym = m.groups()
            sym = sym.replace(' (inlined)', '')
            cur['frames'].append((addr.startswith('ffffffff'), sym))
    if cur: yield cur

SETUP = re.compile(r'_dl_start|std::rt::init|notification_with|Writer::with_total|Session::spawn|Command::spawn|'
                   r'Driver::new|runtime::builder|_dl_fini|__libc_start_call_main$|stat_ticks|exit_group|do_exit|'
                   r'execve|Watchdog::arm|__x64_sys_clone|wait4|pidfd|GlobalOrphanQueue|reap_orphans|'
                   r'tokio::process|tokio::time::sleep|stderr|Supervisor|supervisor|'
                   r'criterion::analysis|criterion::stats|criterion::report|criterion::plot|plotters|empty_baseline')
def kernel_class(stack):
    syms = [s for k, s in stack if k]
    j = ' '.join(syms)
    if 'asm_exc_page_fault' in j or 'exc_page_fault' in j:
        # the user frame that faulted
        user = next((s for k, s in stack if not k), '?')
        if 'memset' in user: return 'kernel: page faults (zero-init of fresh framer storage)'
        if 'memmove' in user or 'memcpy' in user: return 'kernel: page faults (copy target)'
        return 'kernel: page faults (other)'
    if re.search(r'ksys_read|__x64_sys_read\b|anon_pipe_read|pipe_read', j): return 'kernel: pipe read (copy out, pipe buffers, waiting)'
    if 'futex' in j: return 'kernel: futex (park/unpark threads)'
    if re.search(r'epoll', j): return 'kernel: epoll_wait (park on the pipe)'
    if re.search(r'munmap|madvise|__x64_sys_brk|__x64_sys_mmap|mremap', j): return 'kernel: mmap/munmap/brk (allocator)'
    if re.search(r'ksys_write|__x64_sys_write', j): return 'kernel: write (eventfd wake, start line)'
    if re.search(r'sched_yield', j): return 'kernel: sched_yield'
    user = next((s for k, s in stack if not k), '')
    if re.search(r'libc_read|^read$', user): return 'kernel: pipe read (copy out, pipe buffers, waiting)'
    if user == 'syscall' or 'futex' in user: return 'kernel: futex (park/unpark threads)'
    if 'epoll' in user: return 'kernel: epoll_wait (park on the pipe)'
    return 'kernel: other (interrupts, preemption, timers)'

ALLOC = re.compile(r'^(malloc|_int_malloc|_int_free|cfree|free|realloc|_int_realloc|malloc_consolidate|'
                   r'__rustc::__rust_(alloc|dealloc|realloc)|__rdl_|alloc::raw_vec|unlink_chunk|tcache|__libc_malloc|'
                   r'__libc_free|_int_free_merge_chunk|_int_free_create_chunk|__GI___libc|sysmalloc)')
USER_RULES = [
    (r'simdutf8', 'UTF-8 validation (simdutf8, whole frame)'),
    (r'mcp_framer_jsonrpc::scan', 'JSON scan (skip_value: structure and strings)'),
    (r'^memchr::|memchr::arch|memchr::memchr', 'framing (memchr for \\n)'),
    (r'memmove|memcpy', None),
    (r'memset', None),
    (ALLOC.pattern, 'allocation (malloc/free)'),
    (r'mcp_framer_jsonrpc|Head::new|head::Head', 'parse/classification (envelope, routing, Head)'),
    (r'serde_json', 'serde_json: building and dropping the Value (hand-written reader)'),
    (r'core::str::converts::from_utf8|run_utf8_validation', 'UTF-8 validation (std, LinesCodec)'),
    (r'tokio_util|LinesCodec', 'framing (LinesCodec, FramedRead)'),
    (r'drop_in_place<serde_json|drop_in_place<alloc::string::String', 'allocation (malloc/free)'),
    (r'^mcp_framer::|^<mcp_framer::|mcp_framer::framer|mcp_framer::buffer', 'framing (framer state)'),
    (r'readers::hand_written', 'consumer: recv_many, items, drops'),
    (r'run_session|InboundQueue|drop_in_place<mcp_framer_stdio::host::inbound|drop_in_place<alloc::vec::Vec<mcp_framer_stdio::host::inbound', 'consumer: recv_many, items, drops'),
    (r'mcp_framer_stdio', 'reader: batch/queue building, dispatch, metrics'),
    (r'tokio|mio::|parking|std::sys::sync|^syscall$|^read$|__GI___libc_read|^epoll_wait|__GI___pthread|futex|std::thread', 'runtime: tokio scheduling, wakers, channel'),
]
def user_class(stack):
    users = [s for k, s in stack if not k]
    for i, s in enumerate(users):
        for pat, name in USER_RULES:
            if re.search(pat, s):
                if name: return name
                if 'memset' in pat:
                    for t in users[i+1:]:
                        if re.search(r'Buffer::prepare|Framer::spare|buffer::Buffer|Vec<T,A>>::resize|extend_with', t): return 'zero-init of framer storage (Buffer::prepare)'
                    return 'memset: other'
                for t in users[i+1:]:
                    if 'Batch::push' in t: return 'copy: frame into the batch (Batch::push)'
                    if re.search(r'Buffer::(roll|relocate|make_room)|buffer::Buffer', t): return 'copy: framer roll/grow'
                    if 'copied' in t or 'to_vec' in t: return 'copy: to_vec (a line out of the codec buffer; Received::copied)'
                return 'copy: other memmove'
    return 'user: other'

counts = collections.Counter(); other = collections.Counter(); total = 0
for s in samples():
    if s['comm'] == 'pipe_writer' or not s['frames']: continue
    stack = s['frames']
    j = ' '.join(x for _, x in stack)
    if SETUP.search(j) and 'Reader::run' not in j:
        c = 'outside the timed window (start-up, spawn, exit)'
    elif stack[0][0]:
        c = kernel_class(stack)
    else:
        c = user_class(stack)
    if c in ('user: other', 'kernel: other (interrupts, preemption, timers)'):
        other[(c, stack[0][1], next((x for k, x in stack if not k), ''))] += 1
    counts[c] += 1; total += 1

print(f'{data}: {total} samples of the parent (comm != pipe_writer)')
for c, n in counts.most_common():
    print(f'  {100*n/total:5.1f}%  {n:6d}  {c}')
if '-v' in sys.argv:
    for (c, leaf, u), n in other.most_common(25):
        print(f'    {n:5d} {c} | {leaf[:70]} | {u[:70]}')

# Optional: `--cpu MS_PER_MIB --line LEN`: ns per message of each class, from
# the class's share of the samples in the timed window (start-up excluded)
# and a CPU per MiB measured without the profiler.
if '--cpu' in sys.argv:
    cpu = float(sys.argv[sys.argv.index('--cpu') + 1])
    line = float(sys.argv[sys.argv.index('--line') + 1])
    window = total - counts['outside the timed window (start-up, spawn, exit)']
    per_msg = cpu * 1e6 * line / (1 << 20)
    print(f'  in the timed window: {window} samples; at {cpu} ms/MiB a {int(line)}-byte line costs {per_msg:.0f} ns')
    GROUPS = [
        ('kernel read (pipe copy-out, waking the writer)', ['kernel: pipe read']),
        ('parking: epoll_wait on the pipe', ['kernel: epoll_wait']),
        ('hand-off: futex park/unpark (reader <-> consumer thread)', ['kernel: futex', 'kernel: write', 'kernel: sched_yield']),
        ('hand-off: tokio runtime, wakers, channel (user)', ['runtime:']),
        ('queue building: Batch::push, Head, Arc per message, flush', ['reader:']),
        ('consumer: recv_many, drops', ['consumer:']),
        ('JSON scan (skip_value)', ['JSON scan']),
        ('serde_json Value (hand-written reader)', ['serde_json']),
        ('parse/classification (envelope fields, routing)', ['parse/classification']),
        ('UTF-8 validation (simdutf8; std in LinesCodec)', ['UTF-8']),
        ('framing (memchr + framer; LinesCodec)', ['framing']),
        ('copy: frame into the batch', ['copy: frame into the batch']),
        ('copy: framer storage grow/roll', ['copy: framer roll/grow']),
        ('copy: other (a line out of the codec buffer, to_vec)', ['copy: other', 'copy: to_vec']),
        ('zero-init of fresh framer storage', ['zero-init', 'memset']),
        ('allocation: malloc/free (user)', ['allocation']),
        ('allocation: page faults + brk/munmap (kernel)', ['kernel: page faults', 'kernel: mmap']),
        ('other (interrupts, unattributed)', ['kernel: other', 'user: other']),
    ]
    print(f'  {"share":>6} {"ns/msg":>9}  group')
    for name, prefixes in GROUPS:
        n = sum(v for k, v in counts.items() if any(k.startswith(p) for p in prefixes))
        if n:
            print(f'  {100*n/window:5.1f}% {per_msg*n/window:9.1f}  {name}')
