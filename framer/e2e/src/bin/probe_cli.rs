//! `mcp-probe`, built inside the e2e crate so its process tests can run it
//! (`CARGO_BIN_EXE_probe_cli`): cargo gives a test the path of its own
//! package's binaries only. The binary's own `main.rs`, compiled here as a
//! module: the same program.

#[path = "../../../probe/src/main.rs"]
mod probe_main;

fn main() -> std::process::ExitCode {
    probe_main::main()
}
