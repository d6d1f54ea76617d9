//! A portable stand-in for the shell one-liners of the unix process tests,
//! so the same tests run on Windows:
//!
//! * `stdin-to-stderr`: copies stdin to stderr until EOF (`cat >&2`).
//! * `hold LOCK`: creates `LOCK`, takes an exclusive lock on it
//!   (`File::lock`: `flock` on unix, `LockFileEx` on Windows) and sleeps
//!   until killed (at most 120 s, a backstop). The lock is free again only
//!   once this process is gone: [`lock_held`](mcp_framer_e2e::support::lock_held)
//!   is the tests' liveness check for a grandchild, on both platforms.
//! * `spawn-holder LOCK [--read-stdin | --exit]`: starts `hold LOCK` as its
//!   child (stdin null, stdout and stderr inherited, so the grandchild keeps
//!   the host's pipes open), reports `pid N` on stderr, then waits for it;
//!   with `--read-stdin` it reads stdin to EOF instead and exits 0, with
//!   `--exit` it exits 0 at once, leaving the holder behind in its tree.

use std::io::{self, Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

#[allow(clippy::zombie_processes, reason = "spawn-holder --read-stdin leaves its holder behind on purpose")]
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["stdin-to-stderr"] => {
            let _ = io::copy(&mut io::stdin().lock(), &mut io::stderr().lock());
            ExitCode::SUCCESS
        }
        ["hold", lock] => {
            let file = std::fs::File::create(lock).expect("create the lock file");
            file.lock().expect("lock the lock file");
            std::thread::sleep(Duration::from_secs(120));
            ExitCode::SUCCESS
        }
        ["spawn-holder", lock, rest @ ..] => {
            let me = std::env::current_exe().expect("current exe");
            let mut holder =
                Command::new(me).args(["hold", lock]).stdin(Stdio::null()).spawn().expect("spawn the holder");
            let _ = writeln!(io::stderr(), "pid {}", holder.id());
            match rest {
                ["--read-stdin"] => {
                    let _ = io::stdin().lock().read_to_end(&mut Vec::new());
                    return ExitCode::SUCCESS;
                }
                ["--exit"] => return ExitCode::SUCCESS,
                _ => {}
            }
            let _ = holder.wait();
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: proc_fixture stdin-to-stderr | hold LOCK | spawn-holder LOCK [--read-stdin | --exit]");
            ExitCode::from(2)
        }
    }
}
