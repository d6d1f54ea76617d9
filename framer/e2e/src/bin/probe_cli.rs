//! `mcp-probe`, built inside the e2e crate so its process tests can run it
//! (`CARGO_BIN_EXE_probe_cli`): cargo gives a test the path of its own
//! package's binaries only.

fn main() -> std::process::ExitCode {
    mcp_probe::main()
}
