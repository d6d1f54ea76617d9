//! The servers' process trees: the list of every tree the probe started,
//! their kill, and the processes still alive in them afterwards (read from
//! Linux's `/proc`).
//!
//! A tree is a process group on unix (its id is the server's pid) and a Job
//! Object on Windows. A raw connection's tree is killed through the stdio
//! crate's [`Killer`]; a host session's by its group on unix, and on
//! Windows by the session itself when it is dropped (its job is closed).

use std::collections::HashSet;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use mcp_framer_stdio::tree::Killer;
use serde::Serialize;

/// A process of the server's group found alive when the probe ended.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Leftover {
    /// Its process id.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub comm: String,
    /// Its command line (`/proc/PID/cmdline`, arguments joined by spaces).
    pub cmdline: String,
}

impl fmt::Display for Leftover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} ({})", self.pid, if self.cmdline.is_empty() { &self.comm } else { &self.cmdline })
    }
}

/// Whether this platform lets the probe list a server's processes (the scan
/// reads Linux's `/proc`); where it does not, the checks say so.
pub(crate) const SCANS_PROCESSES: bool = cfg!(target_os = "linux");

/// What the evidence says where [`SCANS_PROCESSES`] is false.
pub(crate) const NO_SCAN: &str =
    "the server's child processes are not checked on this platform (the scan reads Linux's /proc)";

/// The server's processes: its group's members and its descendants (a
/// tool's child may lead a group of its own), the server itself left out.
/// None where the platform is not scanned ([`SCANS_PROCESSES`]).
pub(crate) fn server_processes(pid: Option<u32>) -> Vec<Leftover> {
    let Some(pid) = pid else { return Vec::new() };
    let mut found = group_members(&[pid]);
    for p in descendants(pid) {
        if !found.iter().any(|f| f.pid == p.pid) {
            found.push(p);
        }
    }
    found.retain(|p| p.pid != pid);
    found
}

/// The pids of [`server_processes`], to compare with [`started_since`].
pub(crate) fn snapshot(pid: Option<u32>) -> HashSet<u32> {
    server_processes(pid).into_iter().map(|p| p.pid).collect()
}

/// The server's processes not in `before` (a [`snapshot`]): those started
/// since.
pub(crate) fn started_since(pid: Option<u32>, before: &HashSet<u32>) -> Vec<Leftover> {
    server_processes(pid).into_iter().filter(|p| !before.contains(&p.pid)).collect()
}

/// Processes as evidence lists them: `pid 12 (sleep 60), pid 13 (sh)`.
pub(crate) fn list(processes: &[Leftover]) -> String {
    processes.iter().map(Leftover::to_string).collect::<Vec<_>>().join(", ")
}

/// Every process tree the probe started, by its root's pid.
#[derive(Debug, Default)]
pub(crate) struct Trees(Mutex<Vec<(u32, Option<Killer>)>>);

impl Trees {
    /// Remembers a tree to kill at the end: with its `killer`, or (`None`:
    /// a host session's) by its process group.
    pub(crate) fn add(&self, pid: u32, killer: Option<Killer>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push((pid, killer));
    }

    /// Kills every tree started so far (they stay listed for
    /// [`kill_all`](Trees::kill_all)).
    pub(crate) fn kill(&self) {
        for (pid, killer) in self.0.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            kill(*pid, killer.as_ref());
        }
    }

    /// Kills every tree and lists their processes still alive afterwards
    /// (waiting up to 2 s for the kernel to take them down; none listed
    /// where the platform is not scanned, see [`SCANS_PROCESSES`]).
    pub(crate) async fn kill_all(&self) -> Vec<Leftover> {
        let trees = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        for (pid, killer) in &trees {
            kill(*pid, killer.as_ref());
        }
        let groups: Vec<u32> = trees.iter().map(|(pid, _)| *pid).collect();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let left = group_members(&groups);
            if left.is_empty() || tokio::time::Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Kills one tree: through its killer, else its process group.
fn kill(pid: u32, killer: Option<&Killer>) {
    match killer {
        // A tree already gone is Ok; any other failure leaves nothing to do
        // but the scan that lists what is left.
        Some(killer) => drop(killer.kill()),
        None => kill_group(pid),
    }
}

/// Sends SIGKILL to process group `pgid` (ignoring a group that is gone).
/// On Windows nothing: a host session's server runs in a Job Object of its
/// own, terminated when the session is dropped.
#[cfg(not(unix))]
pub(crate) fn kill_group(_pgid: u32) {}

/// Sends SIGKILL to process group `pgid` (ignoring a group that is gone).
#[cfg(unix)]
pub(crate) fn kill_group(pgid: u32) {
    let Some(pid) = i32::try_from(pgid).ok().and_then(rustix::process::Pid::from_raw) else {
        return;
    };
    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
}

/// `/proc/PID/cmdline`, its arguments joined by spaces (empty if gone).
#[cfg(unix)]
pub(crate) fn cmdline(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> =
        raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    args.join(" ")
}

/// Live processes whose process group is one of `groups`: the scan reads
/// Linux's `/proc`, so on other platforms none are found (the checks that
/// compare a server's children before and after say so in their evidence).
#[cfg(not(unix))]
pub(crate) fn group_members(_groups: &[u32]) -> Vec<Leftover> {
    Vec::new()
}

/// A live (not zombie) process, read from `/proc/PID/stat`.
#[cfg(unix)]
struct Proc {
    pid: u32,
    ppid: u32,
    pgrp: u32,
    comm: String,
}

#[cfg(unix)]
impl Proc {
    fn leftover(&self) -> Leftover {
        Leftover { pid: self.pid, comm: self.comm.clone(), cmdline: cmdline(self.pid) }
    }
}

/// Every live (not zombie) process, read from `/proc`.
#[cfg(unix)]
fn live_processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut live = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces and parens.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let number = |i: usize| fields.get(i).and_then(|p| p.parse::<u32>().ok());
        let (Some(state), Some(ppid), Some(pgrp)) = (fields.first(), number(1), number(2)) else {
            continue;
        };
        if *state != "Z" {
            let comm = head.split_once('(').map(|(_, c)| c.to_owned()).unwrap_or_default();
            live.push(Proc { pid, ppid, pgrp, comm });
        }
    }
    live
}

/// Live (not zombie) processes whose process group is one of `groups`,
/// read from `/proc`.
#[cfg(unix)]
pub(crate) fn group_members(groups: &[u32]) -> Vec<Leftover> {
    live_processes().iter().filter(|p| groups.contains(&p.pgrp)).map(Proc::leftover).collect()
}

/// The live (not zombie) descendants of `root`, whatever their process
/// group (a tool's child may lead a group of its own), read from `/proc`;
/// `root` itself is not listed.
#[cfg(unix)]
pub(crate) fn descendants(root: u32) -> Vec<Leftover> {
    let all = live_processes();
    let mut tree = vec![root];
    let mut found = Vec::new();
    while let Some(parent) = tree.pop() {
        for child in all.iter().filter(|p| p.ppid == parent) {
            tree.push(child.pid);
            found.push(child.leftover());
        }
    }
    found
}

/// The descendants of `root` (none where `/proc` is not scanned).
#[cfg(not(unix))]
pub(crate) fn descendants(_root: u32) -> Vec<Leftover> {
    Vec::new()
}

/// Keeps the processes of `watched` that are still alive, by pid wherever
/// they are now (a child that leads a group of its own, or was reparented,
/// is still there), with their names read again: a process found between
/// its fork and its exec carried its parent's command line.
pub(crate) fn keep_alive(watched: &mut Vec<Leftover>) {
    watched.retain(|p| alive(p.pid));
    #[cfg(unix)]
    for p in watched.iter_mut() {
        if let Ok(comm) = std::fs::read_to_string(format!("/proc/{}/comm", p.pid)) {
            p.comm = comm.trim_end().to_owned();
        }
        let line = cmdline(p.pid);
        if !line.is_empty() {
            p.cmdline = line;
        }
    }
}

/// Whether process `pid` is alive (not a zombie), read from `/proc`.
#[cfg(unix)]
pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().next() != Some("Z")))
        .unwrap_or(false)
}

/// Whether process `pid` is alive (never, where `/proc` is not scanned).
#[cfg(not(unix))]
pub(crate) fn alive(_pid: u32) -> bool {
    false
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn keep_alive_drops_the_dead_and_reads_the_living_names_again() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep starts");
        let pid = child.id();
        // spawn returns once the exec has begun: the new command line comes
        // a moment later.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while cmdline(pid).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // As seen between fork and exec: the parent's name and command line.
        let stale = Leftover { pid, comm: "parent".into(), cmdline: "parent --flag".into() };
        let mut watched = vec![stale.clone()];
        keep_alive(&mut watched);
        assert_eq!(watched, vec![Leftover { pid, comm: "sleep".into(), cmdline: "sleep 30".into() }]);

        child.kill().expect("kill");
        child.wait().expect("reaped");
        let mut watched = vec![stale];
        keep_alive(&mut watched);
        assert!(watched.is_empty(), "{watched:?}");
    }
}
