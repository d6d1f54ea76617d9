//! `mcp-probe`: see the crate's README.

fn main() -> std::process::ExitCode {
    mcp_probe::main()
}
